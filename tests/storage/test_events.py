"""Change events on both backends (CONTRACT 14; service.storage.contract.events): one event per history entry, in the
change's commit, with what the entry says; seqs without gaps under concurrent writers; a refused change takes no seq;
reads by seq and type; test mode's reset and restore start the seqs again at 1; a watcher wakes on a commit of its own
process and of another. What is the file backend's own (torn lines, segments) is in tests/storage/files."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from service.domain.lifecycle import delete_object, restore_object
from service.domain.processes import upsert_process
from service.domain.products import upsert_product
from service.domain.stations import upsert_station
from service.errors import ProcessInUse
from service.storage.contract import StagedDocument

ORG = "default"


def station(identifier, name):
    return {"id": identifier, "name": name}


def listed(repo, org=ORG, after=0, first=1000, wanted=None):
    return [(event.seq, event.kind, event.id, event.revision, event.change, event.name)
            for event in repo.events.read(org, after, first, wanted)]


def test_each_change_is_one_event_with_its_history_entry_and_nothing_else_makes_one(repo):
    upsert_station(repo, ORG, station("st_1", "Press"))
    upsert_station(repo, ORG, station("st_1", "Press"))  # unchanged: no entry, no event
    upsert_station(repo, ORG, station("st_1", "Press 2"), dry_run=True)
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    restore_object(repo, ORG, "stations", "st_1", 2)  # equal to the current content: no entry
    restore_object(repo, ORG, "stations", "st_1", 1)
    delete_object(repo, ORG, "stations", "st_1", dry_run=True)
    delete_object(repo, ORG, "stations", "st_1")
    assert listed(repo) == [(1, "stations", "st_1", 1, "CREATED", "Press"),
                            (2, "stations", "st_1", 2, "UPDATED", "Press 2"),
                            (3, "stations", "st_1", 3, "RESTORED", "Press"),
                            (4, "stations", "st_1", 4, "DELETED", None)]
    history = {entry.revision: entry for entry in repo.documents.history(ORG, "stations", "st_1", 10)}
    for event in repo.events.read(ORG, 0, 10):
        assert (event.timestamp, event.change) == (history[event.revision].saved_at, history[event.revision].change)
        assert (event.author, event.comment) == (None, None)
    assert repo.events.bounds(ORG) == (1, 4)
    assert repo.events.read(ORG, 4, 10) == [] and repo.events.read("other", 0, 10) == []
    assert repo.events.bounds("other") == (1, 0)


@pytest.mark.parametrize("name", ["\x00\x01\x1f needle", "Straße \U0001f527 \"quoted\" \\ back"])
def test_an_event_keeps_the_name_as_written(repo, name):
    """NUL and other control characters too, which PostgreSQL text cannot hold as they are."""
    upsert_station(repo, ORG, station("st_1", name))
    assert [event.name for event in repo.events.read(ORG, 0, 10)] == [name]


def test_concurrent_writers_get_every_seq_once_in_commit_order(repo):
    def write(worker):
        for number in range(15):
            upsert_station(repo, ORG, station(f"st_{worker}", f"Press {number}"))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8)))
    found = repo.events.read(ORG, 0, 1000)
    assert [event.seq for event in found] == list(range(1, 121))
    for worker in range(8):  # each object's events are its revisions, in order
        assert [(event.revision, event.name) for event in found if event.id == f"st_{worker}"] == [
            (number + 1, f"Press {number}") for number in range(15)]


def test_a_refused_change_makes_no_event_and_takes_no_seq(repo):
    upsert_process(repo, ORG, {"id": "final", "name": "Final"})
    upsert_product(repo, ORG, {"id": "gearbox", "name": "Gearbox", "finalProcessId": "final", "dependencies": []})
    with pytest.raises(ProcessInUse):
        delete_object(repo, ORG, "processes", "final")
    upsert_station(repo, ORG, station("st_1", "Press"))
    assert [(seq, kind, change) for seq, kind, _id, _revision, change, _name in listed(repo)] == [
        (1, "processes", "CREATED"), (2, "products", "CREATED"), (3, "stations", "CREATED")]


def test_reads_go_by_seq_and_keep_the_wanted_kinds_and_changes(repo):
    for number in range(3):
        upsert_process(repo, ORG, {"id": "line_1", "name": f"Line {number}"})
        upsert_station(repo, ORG, station(f"st_{number}", "Press"))
    upsert_station(repo, "other", station("st_9", "Elsewhere"))
    assert [event[0] for event in listed(repo, after=2, first=3)] == [3, 4, 5]
    updates = frozenset({("processes", "UPDATED")})
    assert [event[:4] for event in listed(repo, wanted=updates)] == [(3, "processes", "line_1", 2),
                                                                     (5, "processes", "line_1", 3)]
    stations = frozenset({("stations", change) for change in ("CREATED", "UPDATED", "DELETED", "RESTORED")})
    assert [event[0] for event in listed(repo, after=2, first=2, wanted=stations)] == [4, 6]
    assert listed(repo, wanted=frozenset()) == []
    assert listed(repo, "other") == [(1, "stations", "st_9", 1, "CREATED", "Elsewhere")]


def test_reset_and_restoring_a_state_start_the_seqs_again_at_1(repo):
    upsert_station(repo, ORG, station("st_1", "Press"))
    upsert_station(repo, "other", station("st_1", "Press"))
    repo.reset()
    assert repo.events.bounds(ORG) == (1, 0) and repo.events.bounds("other") == (1, 0)
    upsert_station(repo, ORG, station("st_1", "Press"))
    assert listed(repo) == [(1, "stations", "st_1", 1, "CREATED", "Press")]

    # A restored state's documents are revision 1 with no event; the org's next change is seq 1.
    repo.replace_state([StagedDocument(ORG, "stations", "st_2", b'{"id":"st_2","name":"Restored"}')], [])
    assert repo.events.bounds(ORG) == (1, 0)
    upsert_station(repo, ORG, station("st_2", "Changed"))
    assert listed(repo) == [(1, "stations", "st_2", 2, "UPDATED", "Changed")]


def test_a_watcher_wakes_on_a_commit_of_another_worker_or_node(repo, other_repo):
    watcher = repo.events.watcher()
    try:
        assert watcher.wait(0.05) is False
        upsert_station(other_repo, ORG, station("st_9", "From elsewhere"))
        assert watcher.wait(5) is True
        assert repo.events.bounds(ORG).latest == 1
    finally:
        watcher.close()


def test_a_watcher_wakes_on_a_commit_of_its_own_process(repo):
    watcher = repo.events.watcher()
    woke = []
    waiting = threading.Thread(target=lambda: woke.append(watcher.wait(30)))
    try:
        waiting.start()
        time.sleep(0.05)
        upsert_station(repo, ORG, station("st_1", "Press"))
        waiting.join(10)
        assert woke == [True]
    finally:
        watcher.close()
