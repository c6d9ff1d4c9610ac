"""The file backend's event log (service.storage.files.events): one event per change in the change's commit, seqs
without gaps under concurrent writers, a torn or uncommitted end cut off, pruning by whole segments, and a watcher that
wakes on a commit of another process."""
import errno
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from service.domain.events import list_events
from service.domain.stations import upsert_station
from service.errors import StorageFull
from service.storage.files import FileRepository
from service.storage.contract import NewEvent
from service.storage.files import events as events_module
from support.disk import FaultyDisk

ORG = "default"


@pytest.fixture
def repo(tmp_path):
    return FileRepository(tmp_path / "data")


def station(identifier, name):
    return {"id": identifier, "name": name}


def seqs_and_changes(repo):
    return [(event.seq, event.id, event.revision, event.change) for event in repo.events.read(ORG, 0, 1000)]


def test_each_change_is_one_event_in_its_commit_and_unchanged_pushes_and_dry_runs_are_none(repo):
    upsert_station(repo, ORG, station("st_1", "Press"))
    upsert_station(repo, ORG, station("st_1", "Press"))  # unchanged: no entry, no event
    upsert_station(repo, ORG, station("st_1", "Press 2"), dry_run=True)
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    repo.documents.delete(ORG, "stations", "st_1")
    assert seqs_and_changes(repo) == [(1, "st_1", 1, "CREATED"), (2, "st_1", 2, "UPDATED"), (3, "st_1", 3, "DELETED")]
    assert repo.events.bounds(ORG) == (1, 3)
    assert repo.events.read(ORG, 3, 10) == [] and repo.events.read("other", 0, 10) == []
    assert repo.events.bounds("other") == (1, 0)


def test_concurrent_writers_get_every_seq_once_in_commit_order(repo):
    def write(worker):
        for number in range(15):
            upsert_station(repo, ORG, station(f"st_{worker}", f"Press {number}"))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8)))
    found = repo.events.read(ORG, 0, 1000)
    assert [event.seq for event in found] == list(range(1, 121))
    for worker in range(8):  # each object's events are its revisions, in order
        assert [event.revision for event in found if event.id == f"st_{worker}"] == list(range(1, 16))


def test_a_torn_last_line_is_cut_off_and_its_seq_given_again(repo):
    upsert_station(repo, ORG, station("st_1", "Press"))
    segment = repo.orgs_root / ORG / "events" / "0000000000.jsonl"
    with open(segment, "ab") as log:
        log.write(b'{"seq":2,"timestamp":"2026-')  # a writer killed in the middle of its append
    assert repo.events.bounds(ORG).latest == 1
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    assert seqs_and_changes(repo) == [(1, "st_1", 1, "CREATED"), (2, "st_1", 2, "UPDATED")]
    assert segment.read_bytes().count(b"\n") == 2


def test_an_event_whose_change_did_not_commit_is_cut_off(repo):
    upsert_station(repo, ORG, station("st_1", "Press"))
    # The log of a writer killed between its event's append and its document's replace.
    with repo.events.committing(ORG, NewEvent("2026-11-28T00:00:00.000Z", "stations", "st_1", 2,
                                              "UPDATED", "Never")):
        pass
    repo.events.forget()  # another process: it has not seen that event commit
    assert repo.events.bounds(ORG).latest == 1
    assert seqs_and_changes(repo) == [(1, "st_1", 1, "CREATED")]


def test_a_disk_full_at_the_event_stores_neither_the_change_nor_its_event(repo, monkeypatch):
    upsert_station(repo, ORG, station("st_1", "Press"))
    disk = FaultyDisk(monkeypatch)
    disk.fail("write", errno.ENOSPC, where="events")
    with pytest.raises(StorageFull):
        upsert_station(repo, ORG, station("st_1", "Press 2"))
    disk.heal()
    assert repo.documents.get(ORG, "stations", "st_1")["name"] == "Press"
    assert seqs_and_changes(repo) == [(1, "st_1", 1, "CREATED")]
    upsert_station(repo, ORG, station("st_1", "Press 3"))
    assert seqs_and_changes(repo)[-1] == (2, "st_1", 2, "UPDATED")


def test_pruning_removes_whole_old_segments_but_never_the_last(tmp_path, monkeypatch):
    monkeypatch.setattr(events_module, "SEGMENT_EVENTS", 10)
    now = [time.time()]
    repo = FileRepository(tmp_path / "data", clock=lambda: now[0], events_retention_seconds=3600)
    for number in range(25):
        upsert_station(repo, ORG, station("st_1", f"Press {number}"))
    assert repo.events.prune() == 0  # nothing is old yet
    now[0] += 7200
    assert repo.events.prune() == 20  # the first two segments; the third holds the latest
    assert repo.events.bounds(ORG) == (21, 25)
    assert [event.seq for event in repo.events.read(ORG, 20, 100)] == [21, 22, 23, 24, 25]
    with pytest.raises(Exception) as expired:
        list_events(repo, ORG, after=5)
    assert expired.value.code == "events_expired" and expired.value.extensions == {"oldest": 21}
    assert [event.seq for event in list_events(repo, ORG, after=20)] == [21, 22, 23, 24, 25]
    upsert_station(repo, ORG, station("st_1", "Press again"))
    assert repo.events.bounds(ORG) == (21, 26)


def test_with_every_event_kept_nothing_is_pruned(tmp_path):
    repo = FileRepository(tmp_path / "data", clock=lambda: time.time() + 10 ** 9, events_retention_seconds=0)
    upsert_station(repo, ORG, station("st_1", "Press"))
    assert repo.events.prune() == 0 and repo.events.bounds(ORG) == (1, 1)


def test_reset_starts_the_seqs_again_at_1(repo):
    upsert_station(repo, ORG, station("st_1", "Press"))
    repo.reset()
    assert repo.events.bounds(ORG) == (1, 0)
    upsert_station(repo, ORG, station("st_1", "Press"))
    assert seqs_and_changes(repo) == [(1, "st_1", 1, "CREATED")]


def test_a_watcher_wakes_on_a_commit_of_another_process(repo, tmp_path):
    watcher = repo.events.watcher()
    assert watcher.wait(0.05) is False
    pid = os.fork()
    if pid == 0:
        try:
            upsert_station(FileRepository(tmp_path / "data"), ORG, station("st_9", "From another process"))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert watcher.wait(2) is True
    assert repo.events.bounds(ORG).latest == 1


def test_a_watcher_wakes_at_once_on_a_commit_of_its_own_process(repo):
    watcher = repo.events.watcher()
    woke = []
    waiting = threading.Thread(target=lambda: woke.append(watcher.wait(30)))
    waiting.start()
    time.sleep(0.05)
    upsert_station(repo, ORG, station("st_1", "Press"))
    waiting.join(5)
    assert woke == [True]
