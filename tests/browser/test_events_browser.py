"""The event stream in a real browser (headless Chromium) against real gunicorn, both backends: an `EventSource` opened
in a page of a signed-in person (the session cookie authenticates it; the pages' CSP lets it connect) receives events,
and after the server drops it (a SIGHUP's new workers) connects again by itself with Last-Event-ID and receives what
was committed meanwhile, nothing twice."""
import signal

import pytest

from support.events import commit
from support.pages import sign_in
from support.servers import BROWSER_WAIT_MS, SHIPPED_WORKER_CLASS

FOLLOW = """() => {
    window.received = [];
    window.opened = 0;
    window.dropped = 0;
    const source = new EventSource("/events");
    source.addEventListener("open", () => window.opened++);
    source.addEventListener("error", () => window.dropped++);
    for (const type of ["station.created", "station.updated"]) {
        source.addEventListener(type, event => {
            window.received.push([event.lastEventId, JSON.parse(event.data).data.name]);
        });
    }
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend, start_module_gunicorn):
    return start_module_gunicorn(tmp_path_factory.mktemp("events-browser") / "data", workers=1, backend=backend,
                                 extra_args=("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4"))


def test_an_eventsource_in_a_signed_in_page_follows_and_resumes_by_itself(browser, server):
    context = browser.new_context(base_url=server.url)
    try:
        page = context.new_page()
        sign_in(page, "/view/stations")
        page.evaluate(FOLLOW)
        page.wait_for_function("() => window.opened === 1", timeout=BROWSER_WAIT_MS)
        commit(server.url, "br_press", "Press")
        page.wait_for_function("() => window.received.length === 1", timeout=BROWSER_WAIT_MS)

        server.process.send_signal(signal.SIGHUP)  # the worker stops: the stream ends
        page.wait_for_function("() => window.dropped === 1", timeout=BROWSER_WAIT_MS)
        commit(server.url, "br_press", "Press 2")  # while the page waits to connect again (retry: 3000)
        commit(server.url, "br_press", "Press 3")
        page.wait_for_function("() => window.received.length === 3 && window.opened === 2", timeout=BROWSER_WAIT_MS)
        assert page.evaluate("window.received") == [["1", "Press"], ["2", "Press 2"], ["3", "Press 3"]]
    finally:
        context.close()
