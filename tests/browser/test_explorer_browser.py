"""The GraphQL explorer (GET /graph/v2, and /graphql) in a real browser: headless Chromium driven by Playwright, against gunicorn.

The browser comes from the `browser` fixture (conftest.py: the system's Chromium, never Playwright's download).
WIS_EXPLORER_SCREENSHOT=<directory> keeps a screenshot of the page once the token is in.
"""
import json
import os

import pytest
import requests
from playwright.sync_api import expect

from service.interface import TOKEN_HEADER
from support.servers import BROWSER_WAIT_MS as WAIT_MS
from support.tokens import HEADERS, TOKEN


STATUS = ".wis-token-status"
HEADERS_EDITOR = "section.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror"
QUERY_EDITOR = ".graphiql-query-editor .CodeMirror"
RESPONSE_EDITOR = ".result-window .CodeMirror"
DOCS = ".graphiql-doc-explorer"


@pytest.fixture(scope="module")
def server(tmp_path_factory, start_module_gunicorn):
    return start_module_gunicorn(tmp_path_factory.mktemp("explorer-data"), workers=1)


@pytest.fixture
def new_page(browser):
    """Pages in one fresh browser context (its own, empty localStorage); script errors fail the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    errors = []

    def open_page(url):
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(url)
        expect(page.locator(STATUS)).to_be_visible(timeout=WAIT_MS)
        return page

    yield open_page
    context.close()
    assert errors == []


def editor_text(page, selector):
    return page.evaluate("selector => document.querySelector(selector).CodeMirror.getValue()", selector)


def paste_headers(page, text):
    """What a user does: click into the Headers tab, select all, paste."""
    page.locator(HEADERS_EDITOR).click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)
    assert editor_text(page, HEADERS_EDITOR) == text


def stored(page, *keys):
    """localStorage, once it holds `keys`: GraphiQL saves some of its state after a short delay."""
    page.wait_for_function("keys => keys.every(key => localStorage.getItem(key) !== null)", arg=list(keys),
                           timeout=WAIT_MS)
    return page.evaluate("() => Object.fromEntries(Object.entries(localStorage))")


def token_headers(token=TOKEN):
    """The explorer's headers editor text that carries `token`."""
    return json.dumps({TOKEN_HEADER: token})


def run_default_query(page):
    """Press the run button; return the parsed response."""
    page.locator(".graphiql-execute-button").click()
    expect(page.locator(RESPONSE_EDITOR)).to_contain_text('"data"', timeout=WAIT_MS)
    return json.loads(editor_text(page, RESPONSE_EDITOR))


def test_the_schema_loads_once_a_working_token_is_pasted_and_the_default_query_runs(server, new_page):
    created = requests.post(server.url + "/graph/v2", headers=HEADERS, timeout=10, json={
        "query": 'mutation { stationCreate(input: {station: {id: "st_1", name: "Station 1"}}) }'})
    assert created.json() == {"data": {"stationCreate": "CREATED"}}

    page = new_page(server.url + "/graph/v2")
    expect(page.locator(STATUS)).to_have_attribute("data-state", "missing", timeout=WAIT_MS)
    assert "paste your API token here" in editor_text(page, HEADERS_EDITOR)
    page.get_by_label("Show Documentation Explorer").click()
    expect(page.locator(DOCS)).to_contain_text("Error fetching schema", timeout=WAIT_MS)

    paste_headers(page, token_headers())
    # No reload, no re-fetch button: the Docs pane fills in by itself.
    expect(page.locator(STATUS)).to_have_attribute("data-state", "accepted", timeout=WAIT_MS)
    expect(page.locator(DOCS)).to_contain_text("query: Query", timeout=WAIT_MS)
    expect(page.locator(DOCS)).to_contain_text("mutation: Mutation")
    expect(page.locator(DOCS)).not_to_contain_text("Error fetching schema")
    # The 401 of the schema fetch made before the token was there is no longer shown as the response.
    assert editor_text(page, RESPONSE_EDITOR) == ""
    if os.environ.get("WIS_EXPLORER_SCREENSHOT"):
        page.screenshot(path=os.path.join(os.environ["WIS_EXPLORER_SCREENSHOT"], "explorer.png"))

    response = run_default_query(page)
    assert "errors" not in response
    assert [station["id"] for station in response["data"]["stations"]] == ["st_1"]
    assert response["data"]["processes"] == []

    # Neither the headers nor the query history, nor the tabs keep the token in the browser.
    entries = stored(page, "graphiql:queries", "graphiql:tabState", "graphiql:shouldPersistHeaders")
    assert "graphiql:headers" not in entries
    assert not [key for key, value in entries.items() if TOKEN in key or TOKEN in value]

    page.reload()
    expect(page.locator(STATUS)).to_have_attribute("data-state", "missing", timeout=WAIT_MS)
    assert TOKEN not in editor_text(page, HEADERS_EDITOR)


def test_the_default_query_editor_content_is_the_runnable_read(server, new_page):
    page = new_page(server.url + "/graph/v2")
    query = editor_text(page, QUERY_EDITOR)
    assert "query FirstLook" in query and "mutation {" in query  # the mutation is only shown in a comment
    response = requests.post(server.url + "/graph/v2", json={"query": query}, headers=HEADERS,
                             timeout=10)
    assert response.status_code == 200 and "errors" not in response.json()


def test_the_explorer_on_the_vendor_path_accepts_the_vendor_header(server, new_page):
    page = new_page(server.url + "/graphql")
    expect(page.locator(STATUS)).to_contain_text("x-pico-api-org", timeout=WAIT_MS)  # the hint names it
    paste_headers(page, json.dumps({"x-pico-api-org": TOKEN}))
    expect(page.locator(STATUS)).to_have_attribute("data-state", "accepted", timeout=WAIT_MS)
    assert "errors" not in run_default_query(page)


def test_an_unknown_token_is_reported_on_the_page(server, new_page):
    page = new_page(server.url + "/graph/v2")
    paste_headers(page, token_headers("not-a-known-token"))
    expect(page.locator(STATUS)).to_have_attribute("data-state", "refused", timeout=WAIT_MS)
    expect(page.locator(STATUS)).to_contain_text("missing or unknown API token")
    paste_headers(page, '{' + json.dumps(TOKEN_HEADER) + ': ')
    expect(page.locator(STATUS)).to_have_attribute("data-state", "invalid", timeout=WAIT_MS)


def test_headers_an_earlier_page_saved_are_forgotten(server, new_page):
    page = new_page(server.url + "/graph/v2")
    # Seeded from another page of the same origin: the explorer writes some of its state a moment late.
    page.goto(server.url + "/healthz")
    headers = token_headers()
    tab = {"id": "t1", "hash": None, "title": "Old", "query": "{ stations { id } }", "variables": None,
           "headers": headers, "operationName": None, "response": None}
    page.evaluate("""items => { localStorage.clear(); for (const [key, value] of Object.entries(items)) localStorage.setItem(key, value); }""", {
        "graphiql:headers": headers,
        "graphiql:shouldPersistHeaders": "true",
        "graphiql:tabState": json.dumps({"activeTabIndex": 0, "tabs": [tab]}),
        "graphiql:queries": json.dumps({"queries": [{"query": "{ stations { id } }", "headers": headers}]}),
    })
    page.goto(server.url + "/graph/v2")
    expect(page.locator(STATUS)).to_have_attribute("data-state", "missing", timeout=WAIT_MS)
    entries = stored(page)
    assert not [key for key, value in entries.items() if TOKEN in value]
    # The tab and the history entry themselves are kept, only without headers.
    assert json.loads(entries["graphiql:tabState"])["tabs"][0]["query"] == "{ stations { id } }"
    assert json.loads(entries["graphiql:queries"])["queries"] == [{"query": "{ stations { id } }", "headers": None}]


def test_the_operator_can_let_the_browser_keep_the_headers(tmp_path, new_page, start_gunicorn):
    server = start_gunicorn(tmp_path / "data", workers=1, env={"WIS_EXPLORER_PERSIST_HEADERS": "1"})
    try:
        page = new_page(server.url + "/graph/v2")
        paste_headers(page, token_headers())
        expect(page.locator(STATUS)).to_have_attribute("data-state", "accepted", timeout=WAIT_MS)
        assert "errors" not in run_default_query(page)
        page.wait_for_function("token => (localStorage.getItem('graphiql:headers') || '').includes(token)",
                               arg=TOKEN, timeout=WAIT_MS)

        page.reload()
        # The token is back, and the schema loads without anyone touching the page.
        expect(page.locator(STATUS)).to_have_attribute("data-state", "accepted", timeout=WAIT_MS)
        assert TOKEN in editor_text(page, HEADERS_EDITOR)
        page.get_by_label("Show Documentation Explorer").click()
        expect(page.locator(DOCS)).to_contain_text("query: Query", timeout=WAIT_MS)

        # A user of this browser can still turn it off: what was saved (history included) goes at once.
        page.get_by_label("Open settings dialog").click()
        page.locator("#disable-persist-headers").click()
        expect(page.locator(STATUS)).to_contain_text("Headers are not saved in this browser")
        assert not [key for key, value in stored(page).items() if TOKEN in value]
        page.reload()
        expect(page.locator(STATUS)).to_have_attribute("data-state", "missing", timeout=WAIT_MS)
    finally:
        server.stop()
