"""The preview pages in a real browser (headless Chromium driven by Playwright) against real gunicorn, both backends:
sign in, open every page of the docs' complete example and the history of a second revision, check what a person sees (steps in order, images decoded,
the video playing and seeking through the session cookie, the product's drawing), markup in names staying text, and
sign out. Screenshots of each page, at 1440 and 768 pixels wide, go to `page-screenshots/` in the test run's
temporary directory (pytest prints it with --basetemp, or see /tmp/pytest-of-<user>/)."""
import re

import pytest
import requests
from playwright.sync_api import expect

from service.interface import TOKEN_HEADER
from support.example import CLIP, example_processes, example_product
from support.pages import (HOSTILE, LONG_STATION_IDS, MICROSCOPE, MICROSCOPE_PROCESSES, graphql, seed,
                           sign_in)
from support.servers import BROWSER_WAIT_MS as WAIT_MS
from support.tokens import TOKEN

WIDTHS = (1440, 768)
# The lines the browser broke an element's text into, from where each character is drawn.
RENDERED_LINES = """element => {
    const lines = [];
    let top = null;
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
        for (let i = 0; i < text.length; i++) {
            const range = document.createRange();
            range.setStart(text, i);
            range.setEnd(text, i + 1);
            const box = range.getClientRects()[0];
            if (!box) continue;
            if (top === null || Math.abs(box.top - top) > 2) { lines.push(""); top = box.top; }
            lines[lines.length - 1] += text.data[i];
        }
    }
    return lines;
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend, start_module_gunicorn):
    started = start_module_gunicorn(tmp_path_factory.mktemp("pages-data"), workers=2, backend=backend)
    started.video = seed(started.url)
    return started


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory):
    folder = tmp_path_factory.getbasetemp() / "page-screenshots"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture
def browse(browser, server):
    """`browse(width)`: a page in a fresh browser context (no cookie yet); script errors, console errors (a CSP
    refusal is one) and dialogs fail the test."""
    contexts, problems = [], []

    def open_page(width=1440):
        context = browser.new_context(viewport={"width": width, "height": 900}, base_url=server.url)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
        page.on("console", lambda message: message.type == "error" and problems.append(f"console: {message.text}"))
        page.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert problems == []


def shoot(page, screenshots, backend, name, width):
    page.screenshot(path=screenshots / f"{backend.name}-{name}-{width}.png", full_page=True)


def images_decoded(page):
    """How many <img> the page has, once each has loaded: all must have decoded (naturalWidth > 0)."""
    page.wait_for_function("() => [...document.images].every(image => image.complete)", timeout=WAIT_MS)
    return page.evaluate("() => [...document.images].map(image => image.naturalWidth)")


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_of_the_example_shows_what_the_operator_needs(server, backend, browse, screenshots, width):
    page = browse(width)
    sign_in(page)
    expect(page.get_by_role("heading", name="Processes")).to_be_visible()
    expect(page.get_by_role("link", name="Gearbox assembly")).to_be_visible()
    shoot(page, screenshots, backend, "processes", width)

    for process_id, name, steps in example_processes():
        page.goto(f"/view/processes/{process_id}")
        expect(page.get_by_role("heading", level=1)).to_have_text(name)
        assert page.locator(".step-name").all_inner_texts() == steps
        widths = images_decoded(page)
        assert all(natural > 0 for natural in widths), widths
        # The assembly shows the process image and its first step's image; the test process has none.
        assert len(widths) == (2 if process_id == "gearbox_assembly" else 0)
        expect(page.get_by_role("table")).to_contain_text("Quantity")  # the bill of materials
        shoot(page, screenshots, backend, f"process-{process_id}", width)

    page.goto("/view/processes/gearbox_assembly")
    assert page.locator(".step-image img").first.get_attribute("alt").startswith("Mount the housing")
    expect(page.locator(".action-scan")).to_have_count(2)
    expect(page.locator(".action-torque")).to_have_count(2)
    expect(page.locator(".alert-caution")).to_contain_text("The fixture clamps close automatically.")
    expect(page.locator(".note")).to_contain_text("Wipe the flange before applying sealant.")

    product = example_product()
    page.goto(f"/view/products/{product['id']}")
    expect(page.get_by_role("heading", level=1)).to_have_text(product["name"])
    expect(page.locator("svg.graph .node")).to_have_count(1 + len(product["dependencies"]))
    expect(page.locator("svg.graph .edge")).to_have_count(len(product["dependencies"]))
    expect(page.locator("svg.graph .node-final")).to_have_attribute("data-process", product["finalProcessId"])
    shoot(page, screenshots, backend, "product", width)
    page.locator(f'svg.graph .node[data-process="{product["dependencies"][0]["upstreamProcessId"]}"]').click()
    expect(page).to_have_url(re.compile(f"/view/processes/{product['dependencies'][0]['upstreamProcessId']}$"))

    for path, name, shown in (("/view/products", "products", "GB-200 gearbox"), ("/view/stations", "stations", "Press 1"),
                              ("/", "home", "Work-instruction service")):
        page.goto(path)
        expect(page.locator("main")).to_contain_text(shown)
        shoot(page, screenshots, backend, name, width)


def raise_the_torque_limit(url):
    """A second revision of the example's assembly: the torque limit of `fit_bolts` raised to 24 Nm (sent twice, the
    second is an unchanged push and stores nothing)."""
    read = graphql(url, {"query": '{ process(id: "gearbox_assembly") { input } }'})
    process = read["data"]["process"]["input"]
    process["steps"][0]["actions"][1]["measurement"]["max"] = 24
    graphql(url, {"query": "mutation($p: ProcessInput!) { processCreate(input: {process: $p}) }",
                  "variables": {"p": process}})


@pytest.mark.parametrize("width", WIDTHS)
def test_the_history_of_a_process_says_what_changed_in_words(server, backend, browse, screenshots, width):
    raise_the_torque_limit(server.url)
    page = browse(width)
    sign_in(page, "/view/processes/gearbox_assembly")
    page.get_by_role("link", name="History").click()
    expect(page).to_have_url(re.compile(r"/view/processes/gearbox_assembly/history$"), timeout=WAIT_MS)
    expect(page.get_by_role("heading", level=1)).to_have_text("History of Gearbox assembly")
    # The ids are shown as code, without the backticks of the words' plain form.
    words = "step 1 step_housing: action fit_bolts: measurement max 22 -> 24 Nm"
    expect(page.locator(".changes li")).to_have_text([words])
    expect(page.locator(".changes li code")).to_have_text(["step_housing", "fit_bolts"])
    expect(page.locator(".revisions tbody tr")).to_have_count(2)
    expect(page.get_by_label("From revision")).to_have_value("1")
    shoot(page, screenshots, backend, "history", width)
    # The other way round, chosen in the form.
    page.get_by_label("From revision").select_option("2")
    page.get_by_label("to revision").select_option("1")
    page.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(re.compile(r"/history\?from=2&to=1$"), timeout=WAIT_MS)
    expect(page.locator(".changes li")).to_have_text([words.replace("22 -> 24", "24 -> 22")])
    # The search of the list finds the process by a word of its name.
    page.goto("/view/processes")
    search = page.get_by_label("Search processes by id or name")
    search.fill("END-OF-LINE")
    search.press("Enter")
    expect(page.locator("main table a")).to_have_text(["Gearbox end-of-line test"])


def test_the_video_plays_and_seeks_through_the_session_cookie(server, browse):
    page = browse()
    ranged = []
    page.on("response", lambda response: server.video in response.url and ranged.append(response.status))
    sign_in(page, "/view/processes/gearbox_assembly")
    video = page.locator(".step-video video")
    expect(video).to_have_count(1)
    # The test starts it (muted, as a browser lets a page play without a gesture); the page itself has no script.
    video.evaluate("video => { video.muted = true; video.play(); }")
    page.wait_for_function("() => document.querySelector('.step-video video').readyState >= 2", timeout=WAIT_MS)
    duration = video.evaluate("video => video.duration")
    assert 3.5 < duration < 4.5
    video.evaluate("video => { video.pause(); video.currentTime = video.duration / 2; }")
    page.wait_for_function("() => { const v = document.querySelector('.step-video video');"
                           " return !v.seeking && v.readyState >= 2 && Math.abs(v.currentTime - v.duration / 2) < 0.5; }",
                           timeout=WAIT_MS)
    assert ranged and set(ranged) <= {200, 206, 304}


def test_markup_in_names_and_texts_is_shown_as_text_and_never_runs(server, backend, browse, screenshots):
    page = browse(768)
    sign_in(page)
    expect(page.get_by_role("link", name=HOSTILE)).to_be_visible()
    page.goto("/view/processes/hostile_names")
    expect(page.get_by_role("heading", level=1)).to_have_text(HOSTILE)
    expect(page.locator(".step-name")).to_have_text(HOSTILE)
    expect(page.locator(".note")).to_contain_text(HOSTILE)
    page.goto("/view/processes")
    search = page.get_by_label("Search processes by id or name")
    search.fill(HOSTILE)
    search.press("Enter")
    # Found by its name, shown as text; a search that finds nothing is said, as text too.
    expect(page.locator("main table a")).to_have_text([HOSTILE])
    search = page.get_by_label("Search processes by id or name")
    search.fill(HOSTILE + "!")
    search.press("Enter")
    expect(page.locator("main")).to_contain_text(f"No processes with an id or name containing \u201c{HOSTILE}!\u201d")
    expect(search).to_have_value(HOSTILE + "!")
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("main script, main img[src='x']").count() == 0
    page.goto("/view/processes/hostile_names")
    shoot(page, screenshots, backend, "process-hostile_names", 768)


def test_log_out_sends_back_to_the_login_and_the_token_is_kept_nowhere(server, browse):
    page = browse()
    sign_in(page)
    seen = [page.content()]
    for path in ("/view/processes/gearbox_assembly", "/view/products/gb_200", "/view/stations", "/"):
        page.goto(path)
        seen.append(page.content())
    assert not [html for html in seen if TOKEN in html]
    stored = page.evaluate("() => JSON.stringify([document.cookie, {...localStorage}, {...sessionStorage}])")
    assert TOKEN not in stored and "wis_session" not in stored  # HttpOnly: no script sees the cookie
    cookies = page.context.cookies()
    assert [(c["name"], c["httpOnly"], c["sameSite"]) for c in cookies] == [("wis_session", True, "Strict")]
    assert TOKEN not in cookies[0]["value"]

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/view/login$"), timeout=WAIT_MS)
    assert page.context.cookies() == []
    page.goto("/view/processes")
    expect(page).to_have_url(re.compile(r"/view/login\?next=/view/processes$"), timeout=WAIT_MS)
    assert TOKEN not in server.stderr_text  # gunicorn's log, access lines included


@pytest.mark.parametrize("width", WIDTHS)
def test_a_wrong_token_shows_the_login_again_with_a_message(server, backend, browse, screenshots, width):
    page = browse(width)
    page.goto("/view/login")
    page.get_by_label("API token").fill("not the token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("That token is not valid. Check it and try again.")
    expect(page.get_by_label("API token")).to_have_value("")
    assert page.context.cookies() == []
    shoot(page, screenshots, backend, "login-refused", width)


def test_a_session_started_on_one_node_reads_pages_and_media_on_another(server, backend, start_gunicorn, tmp_path):
    """Two servers on the same stores: a second node of the shared backend, a second server on the same data
    directory on the file backend. Each has two workers of its own."""
    data_dir = server.data_dir if backend.name == "file" else tmp_path / "node-b"
    other = start_gunicorn(data_dir, workers=2, backend=backend, settings=server.settings or None)
    session = requests.Session()
    signed_in = session.post(f"{server.url}/view/login", data={"token": TOKEN}, allow_redirects=False, timeout=30)
    assert signed_in.status_code == 303 and "wis_session" in session.cookies
    for url in (server.url, other.url):
        for _ in range(4):  # each request may meet either worker of the node
            page = session.get(f"{url}/view/processes/gearbox_assembly", timeout=30, allow_redirects=False)
            assert page.status_code == 200 and "Mount the housing" in page.text
            part = session.get(f"{url}{server.video}", headers={"Range": "bytes=0-99"}, timeout=30)
            assert part.status_code == 206 and part.content == CLIP.read_bytes()[:100]
    # Without the cookie, the other node sends to the login and refuses the media.
    assert requests.get(f"{other.url}/view/stations", allow_redirects=False, timeout=30).status_code == 302
    assert requests.get(f"{other.url}{server.video}", timeout=30).status_code == 401
    # And the cookie opens nothing that writes, on either node.
    refused = session.post(f"{other.url}/graph/v2", timeout=30, json={
        "query": 'mutation { stationCreate(input: {station: {id: "st_x", name: "x"}}) }'})
    assert refused.status_code == 401 and TOKEN_HEADER in refused.json()["error"]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_product_drawing_wraps_long_names_and_uses_the_width_it_has(server, backend, browse, screenshots, width):
    page = browse(width)
    sign_in(page, f"/view/products/{MICROSCOPE}")
    expect(page.locator("svg.graph .node")).to_have_count(len(MICROSCOPE_PROCESSES))
    shoot(page, screenshots, backend, "product-long-names", width)
    # Every name whole on its node: the short one on one line, the long ones wrapped on two (then an ellipsis).
    shown = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('svg.graph .node')].map(node => {
        const name = node.querySelector('.node-name');
        const lines = name.offsetHeight / parseFloat(getComputedStyle(name).lineHeight);
        return [node.dataset.process, [name.textContent, Math.round(lines)]]; }))""")
    assert shown == {identifier: [name, 1 if len(name) <= 22 else 2]
                     for identifier, name in MICROSCOPE_PROCESSES.items()}
    # Each node is a link a screen reader names by its process: the drawing is a group of links, not an image.
    expect(page.get_by_role("group", name=re.compile("^Workflow of")).get_by_role(
        "link", name=MICROSCOPE_PROCESSES["of_body"])).to_have_attribute("href", "/view/processes/of_body")
    drawn, natural, frame, scrolls = page.evaluate("""() => {
        const svg = document.querySelector('svg.graph'), frame = document.querySelector('.graph-frame');
        return [svg.getBoundingClientRect().width, svg.width.baseVal.value, frame.clientWidth,
                frame.scrollWidth > frame.clientWidth]; }""")
    if width == 1440:
        # Four columns fill the page (the frame's width less its padding of 2 x 8.5 px).
        assert drawn >= 0.95 * (frame - 17) and not scrolls
    else:
        # On a tablet the drawing keeps its size, legible; the frame scrolls sideways.
        assert drawn == natural and scrolls


def test_station_ids_wrap_only_after_an_underscore(server, backend, browse, screenshots):
    page = browse(768)
    sign_in(page, "/view/stations")
    shoot(page, screenshots, backend, "stations-long-ids", 768)
    for identifier in LONG_STATION_IDS:
        lines = page.locator("td code", has_text=identifier).evaluate(RENDERED_LINES)
        assert "".join(lines) == identifier
        assert all(line.endswith("_") for line in lines[:-1]), lines
    # The longest id does not fit the column on one line.
    assert len(page.locator("td code", has_text=LONG_STATION_IDS[0]).evaluate(RENDERED_LINES)) > 1
