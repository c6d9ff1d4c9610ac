"""The shared backend's documents (PostgreSQL): the same answers as the file backend's FileDocumentStore, one revision per
acknowledged write under concurrent processes, pages as index range scans, the import that `wis migrate` uses, and the
upgrades of a database of an earlier version."""
import multiprocessing
import os
import re
import time

import pytest

from service.errors import UnstorableDocument
from service.storage.contract import Attribution
from service.storage.files.documents import FileDocumentStore
from service.storage.shared.database import Database
from service.storage.shared.documents import SharedDocumentStore
from service.storage.shared.events import SharedEventStore
from service.storage.shared.schema import MIGRATIONS
from service.storage.shared.tokens import SharedTokenStore
from support.old_schema import database_with_an_old_station

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
ORG = "default"
# The schema version before the migration that gave history entries their author (CONTRACT 16).
BEFORE_AUTHORS = next(number for number, migration in enumerate(MIGRATIONS) if "ADD COLUMN author" in migration)


@pytest.fixture
def database_url(postgres):
    url = postgres.new_database()
    Database(url).upgrade()
    return url


@pytest.fixture
def database(database_url):
    database = Database(database_url)
    yield database
    database.close()


@pytest.fixture
def shared(database):
    return SharedDocumentStore(database, SharedEventStore(database))


@pytest.fixture
def local(tmp_path):
    return FileDocumentStore(tmp_path / "orgs")


def without_times(document):
    return {key: value for key, value in document.items() if key not in ("createdAt", "updatedAt")}


def test_upsert_and_get_answer_as_the_file_backend_does(shared, local):
    # Numbers as written (1.0 stays a float, a 20-digit integer stays exact), keys in their order, metadata given in
    # the body ignored.
    body = {"id": "line_1", "zeta": 1.0, "alpha": [1, 2.5, {"b": None, "a": "ü"}], "big": 12345678901234567890,
            "revision": 99, "createdAt": "forged"}
    answers = {}
    for name, store in (("shared", shared), ("local", local)):
        first, created, _ = store.save(ORG, "processes", "line_1", body)
        second, created_again, _ = store.save(ORG, "processes", "line_1", {**body, "zeta": 2})
        stored = store.get(ORG, "processes", "line_1")
        assert created and not created_again
        assert stored == second and list(stored) == list(second)
        assert second["createdAt"] == first["createdAt"] == first["updatedAt"] <= second["updatedAt"]
        assert TIMESTAMP.fullmatch(second["createdAt"]) and TIMESTAMP.fullmatch(second["updatedAt"])
        answers[name] = (without_times(first), without_times(stored), list(stored),
                         store.existing(ORG, "processes", ["line_1", "line_2", "line_1"]),
                         store.get(ORG, "processes", "line_2"))
    assert answers["shared"] == answers["local"]
    assert list(answers["shared"][2]) == ["id", "zeta", "alpha", "big", "createdAt", "updatedAt", "revision"]
    assert answers["shared"][1]["revision"] == 2 and answers["shared"][1]["zeta"] == 2


def test_lists_are_in_byte_order_like_file_names(shared, local):
    ids = ["abc", "ABC", "Abd", "a_b", "z-1", "z", "0", "_", "-"]
    for store in (shared, local):
        for identifier in ids:
            store.save(ORG, "stations", identifier, {"id": identifier})
        store.save(ORG, "processes", "p", {"id": "p"})
        store.save("other", "products", "q", {"id": "q"})
    assert shared.ids(ORG, "stations") == local.ids(ORG, "stations") == sorted(ids) == [
        "-", "0", "ABC", "Abd", "_", "a_b", "abc", "z", "z-1"]
    assert shared.kinds(ORG) == local.kinds(ORG) == ["processes", "stations"]
    assert shared.kinds("nobody") == local.kinds("nobody") == []
    assert shared.ids(ORG, "products") == local.ids(ORG, "products") == []
    for first, after in ((3, None), (2, "Abd"), (100, "a_b"), (5, "z-1"), (2, "B")):
        assert ([d["id"] for d in shared.page(ORG, "stations", first, after)]
                == [d["id"] for d in local.page(ORG, "stations", first, after)])
    assert [without_times(d) for d in shared.page(ORG, "stations", 2, "Abd")] == [
        {"id": "_", "revision": 1}, {"id": "a_b", "revision": 1}]


def _upsert_many(url, times, acknowledged):
    database = Database(url)
    store = SharedDocumentStore(database, SharedEventStore(database))
    for number in range(times):
        # A body of its own per write: an unchanged one would store nothing.
        document, _created, _ = store.save(ORG, "processes", "hot", {"id": "hot", "write": f"{os.getpid()}-{number}"})
        acknowledged.put(document["revision"])
    store.database.close()


def test_concurrent_upserts_from_many_processes_each_add_exactly_one(database_url, shared):
    processes, times = 6, 40
    context = multiprocessing.get_context("spawn")
    acknowledged = context.Queue()
    workers = [context.Process(target=_upsert_many, args=(database_url, times, acknowledged))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    revisions = [acknowledged.get(timeout=60) for _ in range(processes * times)]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert sorted(revisions) == list(range(1, processes * times + 1))
    assert shared.get(ORG, "processes", "hot")["revision"] == processes * times


def test_a_page_of_a_large_kind_is_an_index_range_scan(database, shared):
    with database.transaction() as connection:
        with connection.cursor().copy(
                "COPY documents (org, kind, id, body, created_at, updated_at, revision) FROM STDIN") as copy:
            for org in (ORG, "other"):
                for number in range(10_000):
                    copy.write_row((org, "processes", f"p{number:05d}", '{"id":"p%05d"}' % number,
                                    "2024-01-01T00:00:00.000Z", "2024-01-01T00:00:00.000Z", 1))
        connection.execute("ANALYZE documents")
    with database.transaction() as connection:
        plan = "\n".join(row[0] for row in connection.execute(
            "EXPLAIN SELECT body FROM documents WHERE org = %s AND kind = %s AND id > %s ORDER BY id LIMIT %s",
            (ORG, "processes", "p05000", 100)))
    assert "Index Scan using documents_pkey" in plan and "Sort" not in plan, plan

    list(shared.page(ORG, "processes", 100, "p05000"))
    started = time.perf_counter()
    for _ in range(20):
        page = list(shared.page(ORG, "processes", 100, "p05000"))
    per_page = (time.perf_counter() - started) / 20
    assert [document["id"] for document in page] == [f"p{number:05d}" for number in range(5001, 5101)]
    # About 0.5 ms on a 2-core machine; the bound only catches a scan of the whole kind.
    assert per_page < 0.05, f"{per_page * 1000:.1f} ms per page of 100 out of 10,000"


def test_import_keeps_the_metadata_and_a_second_run_changes_nothing(shared, local):
    local.save(ORG, "processes", "line_1", {"id": "line_1", "n": 1})
    original, _created, _ = local.save(ORG, "processes", "line_1", {"id": "line_1", "n": 2})

    assert shared.import_document(ORG, "processes", "line_1", original) == "copied"
    assert shared.get(ORG, "processes", "line_1") == original
    assert shared.import_document(ORG, "processes", "line_1", original) == "unchanged"

    # Updated on the file side since the first run (a migration repeated before the switch): the later revision goes.
    later, _created, _ = local.save(ORG, "processes", "line_1", {"id": "line_1", "n": 3})
    assert shared.import_document(ORG, "processes", "line_1", later) == "copied"
    assert shared.get(ORG, "processes", "line_1") == later

    # Updated on the shared side since: an older copy from the data directory does not roll it back.
    newest, created, _ = shared.save(ORG, "processes", "line_1", {"id": "line_1", "n": 4})
    assert not created and newest["revision"] == 4 and newest["createdAt"] == original["createdAt"]
    assert shared.import_document(ORG, "processes", "line_1", later) == "unchanged"
    assert shared.get(ORG, "processes", "line_1") == newest


def test_remove_all_empties_every_org(shared):
    shared.save(ORG, "processes", "a", {"id": "a"})
    shared.save("other", "stations", "b", {"id": "b"})
    shared.remove_all()
    assert shared.kinds(ORG) == shared.kinds("other") == []
    assert shared.save(ORG, "processes", "a", {"id": "a"})[0]["revision"] == 1


@pytest.mark.parametrize("number", [float("inf"), float("nan")])
def test_import_refuses_a_number_json_cannot_hold_instead_of_storing_null(shared, local, number):
    """`wis migrate` copies documents without the create path's checks: the encoding both backends share refuses what
    orjson would write as null, naming the field, and nothing is copied."""
    document, _created, _ = local.save(ORG, "processes", "line_1", {"id": "line_1", "n": 1})
    with pytest.raises(UnstorableDocument, match=r"steps\[0\]\.quantity holds a number JSON cannot represent"):
        shared.import_document(ORG, "processes", "line_1", {**document, "steps": [{"quantity": number}]})
    assert shared.get(ORG, "processes", "line_1") is None


def test_the_history_migration_starts_each_stored_document_at_its_revision(postgres):
    """A database of the version before history was kept: after `upgrade` each document's history holds its current
    revision, and its next change continues from there."""
    url = postgres.new_database()
    database_with_an_old_station(url, 4)
    assert Database(url).upgrade() == (4, len(MIGRATIONS))
    assert Database(url).upgrade() == (len(MIGRATIONS), len(MIGRATIONS))
    database = Database(url)
    store = SharedDocumentStore(database, SharedEventStore(database))
    try:
        assert store.history(ORG, "stations", "st_1", 10) == [(3, "2024-01-02T00:00:00.000Z", "UPDATED", None, None)]
        assert store.revision(ORG, "stations", "st_1", 3)["name"] == "A"
        assert store.save(ORG, "stations", "st_1", {"id": "st_1", "name": "B"}).document["revision"] == 4
        assert [entry.change for entry in store.history(ORG, "stations", "st_1", 10)] == ["UPDATED", "UPDATED"]
    finally:
        database.close()


def test_history_stored_before_authors_reads_as_made_by_nobody_after_the_upgrade(postgres):
    """A database of the version before changes had authors (CONTRACT 16): after `upgrade` its history entries have a
    null author and comment, the next change records both, and tokens can be stored."""
    url = postgres.new_database()
    database_with_an_old_station(url, BEFORE_AUTHORS)
    database = Database(url)
    try:
        with database.transaction() as connection:
            connection.execute("INSERT INTO revisions (org, kind, id, revision, change, saved_at, created_at, body) "
                               "SELECT org, kind, id, revision, 'UPDATED', updated_at, created_at, body FROM documents")
    finally:
        database.close()
    assert Database(url).upgrade() == (BEFORE_AUTHORS, len(MIGRATIONS))
    database = Database(url)
    store = SharedDocumentStore(database, SharedEventStore(database))
    try:
        store.save(ORG, "stations", "st_1", {"id": "st_1", "name": "B"}, by=Attribution("pipeline", "renamed"))
        assert [entry[2:] for entry in store.history(ORG, "stations", "st_1", 10)] == [
            ("UPDATED", "pipeline", "renamed"), ("UPDATED", None, None)]
        assert SharedTokenStore(database).all() == []
    finally:
        database.close()
