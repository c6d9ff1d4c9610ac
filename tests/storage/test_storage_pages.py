"""Reading a page opens only that page's documents, and an update opens only the document it replaces.

Files are counted where the document store opens them (its module's `open`), whatever layer above calls it.
"""
import json

import pytest

from service.interface.kinds import PROCESSES
from service.storage.files import documents as documents_module
from service.storage import get_repository

pytestmark = pytest.mark.file_backend_only("they check which files the file store opens")


STORED = 150
PAGE = "query($after: String) { processes(first: 100, after: $after) { id revision } }"


@pytest.fixture
def opened(monkeypatch):
    """Names of the document files opened from now on, in order."""
    names = []

    def counting_open(file, *args, **kwargs):
        names.append(str(file).rsplit("/", 1)[-1])
        return open(file, *args, **kwargs)

    monkeypatch.setattr(documents_module, "open", counting_open, raising=False)
    return names


@pytest.fixture
def stored(app):
    store = get_repository(app).documents
    for number in range(STORED):
        store.save("default", PROCESSES, f"proc_{number:03d}", {"id": f"proc_{number:03d}", "name": "p"})
    return store


def page(client, auth, after=None):
    response = client.post("/graph/v2", headers=auth, json={"query": PAGE, "variables": {"after": after}})
    assert response.status_code == 200
    return [process["id"] for process in response.get_json()["data"]["processes"]]


def test_a_page_opens_exactly_its_own_documents(stored, client, auth, opened):
    assert page(client, auth) == [f"proc_{number:03d}" for number in range(100)]
    assert opened == [f"proc_{number:03d}.json" for number in range(100)]

    opened.clear()
    assert page(client, auth, after="proc_099") == [f"proc_{number:03d}" for number in range(100, STORED)]
    assert opened == [f"proc_{number:03d}.json" for number in range(100, STORED)]


def test_listing_ids_opens_no_document(stored, opened):
    assert len(stored.ids("default", PROCESSES)) == STORED
    assert opened == []


def test_an_update_opens_only_the_document_it_replaces(stored, client, auth, opened):
    response = client.post("/graph/v2", headers=auth, json={
        "query": "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }",
        "variables": {"input": {"process": {"id": "proc_042", "name": "renamed"}}}})
    assert response.get_json() == {"data": {"processCreate": "UPDATED"}}
    assert opened == ["proc_042.json"]
    assert stored.get("default", PROCESSES, "proc_042")["revision"] == 2


def test_an_update_keeps_created_at_and_counts_revisions_of_a_document_written_by_hand(stored):
    # Metadata not at the end (an operator's edit, an older writer): the update parses the whole file instead.
    path = stored._path("default", PROCESSES, "proc_007")
    path.write_text(json.dumps({"revision": 41, "createdAt": "2020-01-02T03:04:05.000Z", "id": "proc_007",
                                "updatedAt": "2020-01-02T03:04:05.000Z", "name": "edited"}, indent=2))
    document, created, _ = stored.save("default", PROCESSES, "proc_007", {"id": "proc_007", "name": "again"})
    assert not created
    assert (document["createdAt"], document["revision"]) == ("2020-01-02T03:04:05.000Z", 42)
    assert stored.get("default", PROCESSES, "proc_007") == document


def test_metadata_inside_a_value_does_not_fool_an_update(stored):
    sneaky = ',"createdAt":"1999-01-01T00:00:00.000Z","updatedAt":"1999-01-01T00:00:00.000Z","revision":99}'
    first, _, _ = stored.save("default", PROCESSES, "proc_sneaky", {"id": "proc_sneaky", "name": sneaky})
    document, created, _ = stored.save("default", PROCESSES, "proc_sneaky", {"id": "proc_sneaky", "name": sneaky + "!"})
    assert not created
    assert (document["createdAt"], document["revision"]) == (first["createdAt"], 2)
