"""What a page costs in memory and reads, in process (the Flask test client, both backends): a list page holds about
one document at a time, not its page of 100, and the product page reads only the start of its processes' documents.
Memory is tracemalloc's peak, as tests/hostile/test_hostile_graphql_limits.py measures it (never RSS or wall time)."""
import re
import tracemalloc

from service.interface.kinds import PROCESSES, PRODUCTS
from service.storage import get_repository
from test_pages_http import log_in, text_of

ORG = "default"


def store_large_process(app, identifier, description, steps=2):
    """A process stored before texts had a limit: its description may be megabytes long."""
    get_repository(app).documents.save(ORG, PROCESSES, identifier, {
        "id": identifier, "name": f"Large {identifier}", "description": description, "startBehavior": "CONFIRM",
        "endBehavior": "SUMMARY", "steps": [{"id": f"step_{number}"} for number in range(steps)]})


def traced_get(client, path):
    """(the page at `path`, the peak of memory traced while it was made), after a first page has rendered what every
    page shares."""
    client.get("/view/stations")
    tracemalloc.start()
    try:
        page = client.get(path)
        return page, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_list_page_of_large_documents_holds_one_at_a_time(app, client):
    """40 processes of 1 MB are 40 MB read for a page of a few KB: what is held stays near a document (a batch of
    them on the shared backend, 8 MB), not the page."""
    for number in range(40):
        store_large_process(app, f"proc_{number:02d}", "d" * 1_000_000, steps=number % 3)
    log_in(client)
    page, peak = traced_get(client, "/view/processes")
    assert page.status_code == 200 and len(page.get_data()) < 100_000
    text = text_of(page)
    assert all(f"Large proc_{number:02d} proc_ {number:02d} {number % 3} 1" in text for number in range(40)), text
    assert peak < 30_000_000


def test_a_search_page_holds_one_document_at_a_time_too(app, client):
    for number in range(40):
        store_large_process(app, f"proc_{number:02d}", "d" * 1_000_000)
    log_in(client)
    page, peak = traced_get(client, "/view/processes?q=large")
    assert len(re.findall(r'<a href="/view/processes/proc_\d\d">', page.get_data(as_text=True))) == 40
    assert peak < 30_000_000


def test_the_product_page_reads_no_whole_process_document(app, client, monkeypatch):
    """The drawing needs each process's name, which the start of its document holds."""
    for number in range(3):
        store_large_process(app, f"proc_{number}", "d" * 1_000_000)
    documents = get_repository(app).documents
    documents.save(ORG, PRODUCTS, "prod", {"id": "prod", "name": "Product", "finalProcessId": "proc_2",
                                           "dependencies": [
        {"processId": "proc_2", "upstreamProcessId": "proc_0", "quantity": 1},
        {"processId": "proc_2", "upstreamProcessId": "proc_1", "quantity": 2},
        {"processId": "proc_2", "upstreamProcessId": "gone", "quantity": 1}]})
    read_whole = []
    get = documents.get

    def counting_get(org, kind, identifier):
        read_whole.append((kind, identifier))
        return get(org, kind, identifier)
    monkeypatch.setattr(documents, "get", counting_get)
    log_in(client)
    page = client.get("/view/products/prod")
    assert page.status_code == 200 and read_whole == [(PRODUCTS, "prod")]
    body = page.get_data(as_text=True)
    assert all(f"Large proc_{number}" in body for number in range(3))
