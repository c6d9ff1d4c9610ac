"""CORS (CONTRACT 9) in a real browser: a page served from another origin than the service (gunicorn, its
WIS_CORS_ORIGINS naming that origin) runs GraphQL, uploads an image and reads it back in headless Chromium; the same
page served from an origin not listed is refused by the browser. The page is tests/data/pages/cors_client.html."""
import base64

import pytest
import requests

from service.errors import Unauthenticated
from support.media import PNG
from support.tokens import HEADERS, TOKEN
from support.paths import DATA


PAGE = DATA / "pages" / "cors_client.html"
# What Chromium says in the console when CORS keeps a page from an answer.
CORS_REFUSAL = "has been blocked by CORS policy"


@pytest.fixture(scope="module")
def listed(serve_pages):
    return serve_pages({"/cors_client.html": PAGE})


@pytest.fixture(scope="module")
def unlisted(serve_pages):
    return serve_pages({"/cors_client.html": PAGE})


@pytest.fixture(scope="module")
def service(tmp_path_factory, listed, start_module_gunicorn):
    return start_module_gunicorn(tmp_path_factory.mktemp("cors-data"), workers=1,
                                 env={"WIS_CORS_ORIGINS": listed.url})


@pytest.fixture
def open_page(browser):
    """Open a page in a fresh browser context; returns it with the console messages it logs."""
    context = browser.new_context()
    errors = []

    def open_(url):
        page = context.new_page()
        console = []
        page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: errors.append(str(error)))
        assert page.goto(url).status == 200
        return page, console

    yield open_
    context.close()
    assert errors == []


def run_page(page, service, station_id):
    return page.evaluate("([service, token, stationId]) => run(service, token, stationId)",
                         [service.url, TOKEN, station_id])


def wait_for_refusals(page, console, count, timeout_ms=5_000):
    """The console lines telling of CORS refusals, once there are `count` (the browser may log them a little late)."""
    for _ in range(timeout_ms // 100):
        refusals = [line for line in console if CORS_REFUSAL in line]
        if len(refusals) >= count:
            return refusals
        page.wait_for_timeout(100)
    return [line for line in console if CORS_REFUSAL in line]


def stations(service):
    response = requests.post(service.url + "/graph/v2", json={"query": "{ stations { id } }"},
                             headers=HEADERS, timeout=10)
    return [station["id"] for station in response.json()["data"]["stations"]]


def test_a_page_on_a_listed_origin_queries_uploads_and_reads_the_media_back(service, listed, open_page):
    page, console = open_page(listed.url + "/cors_client.html")
    report = run_page(page, service, "st_cors")

    assert all(step["ok"] for step in report.values()), report
    created, read = report["created"]["value"], report["read"]["value"]
    assert (created["status"], created["body"]) == (200, {"data": {"stationCreate": "CREATED"}})
    assert (read["status"], read["body"]) == (200, {"data": {"stations": [
        {"id": "st_cors", "name": "Made by a page on another origin"}]}})
    # An exposed header, and an error the page can read.
    assert created["requestId"] and read["requestId"] and created["requestId"] != read["requestId"]
    refused = report["withoutToken"]["value"]
    assert refused["status"] == 401
    assert refused["body"]["error"] == Unauthenticated.message

    uploaded = report["uploaded"]["value"]
    assert uploaded["upload"]["status"] == 201
    path = uploaded["upload"]["body"]["path"]
    assert path.startswith("/api/v1/images/") and path.endswith("-drawn.png")
    sent = base64.b64decode(uploaded["sent"])
    assert sent.startswith(PNG)
    media = uploaded["media"]
    assert (media["status"], media["contentType"]) == (200, "image/png")
    assert base64.b64decode(media["bytes"]) == sent
    served = requests.get(service.url + path, headers=HEADERS, timeout=10)
    assert served.content == sent and media["etag"] == served.headers["ETag"]

    assert report["health"]["value"]["body"] == {"status": "ok"}
    assert [line for line in console if CORS_REFUSAL in line] == []


def test_the_same_page_on_an_origin_not_listed_is_refused_by_the_browser(service, unlisted, open_page):
    page, console = open_page(unlisted.url + "/cors_client.html")
    report = run_page(page, service, "st_blocked")

    assert {name: step["ok"] for name, step in report.items()} == {
        "created": False, "read": False, "withoutToken": False, "uploaded": False, "health": False}
    assert {step["error"] for step in report.values()} == {"TypeError: Failed to fetch"}
    assert len(wait_for_refusals(page, console, len(report))) == len(report)
    # The preflight failed, so the mutation itself was never sent.
    assert "st_blocked" not in stations(service)
