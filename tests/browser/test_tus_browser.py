"""tus from a browser (CONTRACT 7 and 9): tus-js-client's browser build, in a page served from another origin than
the service, uploads an image in several PATCHes to gunicorn (WIS_CORS_ORIGINS naming the page's origin) in headless
Chromium; the page then reads the media path from the exposed Media-Path header and fetches the bytes back."""

import pytest
import requests

from support.servers import JS_DIR
from support.tokens import HEADERS, TOKEN
from support.paths import DATA

PAGE = DATA / "pages" / "tus_client.html"


@pytest.fixture(scope="module")
def pages(serve_pages, node):
    return serve_pages({"/tus_client.html": PAGE,
                        "/tus.min.js": JS_DIR / "node_modules" / "tus-js-client" / "dist" / "tus.min.js"})


@pytest.fixture(scope="module")
def service(tmp_path_factory, pages, start_module_gunicorn):
    return start_module_gunicorn(tmp_path_factory.mktemp("tus-browser") / "data", workers=2,
                                 env={"WIS_CORS_ORIGINS": pages.url})


def test_tus_js_client_in_a_browser_uploads_from_another_origin_and_reads_the_media_path(browser, pages, service):
    context = browser.new_context()
    try:
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        assert page.goto(f"{pages.url}/tus_client.html").status == 200
        size, chunk_size = 700_000, 256 * 1024  # three PATCHes
        result = page.evaluate("([service, token, size, chunkSize]) => run(service, token, size, chunkSize)",
                               [service.url, TOKEN, size, chunk_size])
        assert errors == []
    finally:
        context.close()
    assert result["uploadUrl"].startswith(f"{service.url}/uploads/")
    assert result["path"].startswith("/api/v1/images/") and result["path"].endswith("-browser_shot.png")
    assert result["same"] and result["size"] == size
    # What the service holds is what the page sent, read from Python too.
    stored = requests.get(service.url + result["path"], headers=HEADERS, timeout=30).content
    expected = bytes([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + bytes((i * 31 + 7) & 255 for i in range(8, size))
    assert stored == expected
    status = requests.get(result["uploadUrl"], headers=HEADERS, timeout=30).json()
    assert status["protocol"] == "tus" and status["state"] == "complete" and status["path"] == result["path"]
