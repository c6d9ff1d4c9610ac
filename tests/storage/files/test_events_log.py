"""The file backend's event log (service.storage.files.events), what is its own: a torn or uncommitted end cut off, a
full disk at the event storing neither the change nor its event, pruning by whole segments. The behaviour both backends
share (one event per change, seqs under concurrent writers, reads, resets, watchers) is tests/storage/test_events.py."""
import errno
import fcntl
import os
import signal
import threading
import time

import orjson

import pytest

from service.domain.events import list_events
from service.domain.stations import upsert_station
from service.errors import StorageFailed, StorageFull
from service.storage.files import FileRepository
from service.storage.contract import (
    AttemptOutcome, DeliveryState, DispatchRules, NewEvent, SubscriptionSettings)
from service.storage.common import disk as disk_module
from service.storage.files import events as events_module
from service.storage.files import group_commit as group_commit_module
from service.storage.files import documents as documents_module
from service.storage.files import reboot_check as reboot_check_module
from service.storage.files import write_ahead as write_ahead_module
from support.disk import FaultyDisk, on_flock

real_event = events_module._event

ORG = "default"


@pytest.fixture
def repo(tmp_path):
    return FileRepository(tmp_path / "data")


def station(identifier, name):
    return {"id": identifier, "name": name}


def seqs_and_changes(repo):
    return [(event.seq, event.id, event.revision, event.change) for event in repo.events.read(ORG, 0, 1000)]


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
    event = NewEvent("2026-11-28T00:00:00.000Z", "stations", "st_1", 2, "UPDATED", "Never")
    repo.events.append(ORG, 2, orjson.dumps({"seq": 2, **event._asdict()}) + b"\n")
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


def test_pruning_keeps_the_segments_a_webhook_subscription_may_still_send(tmp_path, monkeypatch):
    monkeypatch.setattr(events_module, "SEGMENT_EVENTS", 10)
    now = [time.time()]
    repo = FileRepository(tmp_path / "data", clock=lambda: now[0], events_retention_seconds=3600)
    upsert_station(repo, ORG, station("st_1", "Press 0"))
    repo.webhooks.subscribe(ORG, SubscriptionSettings("mes", "https://93.184.216.34/", {}, None, None, None),
                            "whsec_" + "A" * 43 + "=", 86400, 100)
    for number in range(1, 25):
        upsert_station(repo, ORG, station("st_1", f"Press {number}"))
    now[0] += 7200
    assert repo.events.prune() == 0  # seq 2 onwards is owed to the subscription: the first segment holds it
    rules = DispatchRules(lambda types: None, 60)
    claim = repo.webhooks.claim(1, rules)[0]
    while claim.delivery.seq < 12:
        claim = repo.webhooks.finish(claim, AttemptOutcome(DeliveryState.SUCCEEDED, 204, None), rules)
    repo.webhooks.finish(claim, AttemptOutcome(DeliveryState.PENDING, 500, "HTTP 500", retry_in=60), rules,
                         claim_next=False)
    assert repo.events.prune() == 10  # the first segment; the second holds the retrying seq 12
    assert repo.events.bounds(ORG) == (11, 25)


@pytest.mark.exhaustive  # thousands of events written
def test_reading_the_newest_events_parses_only_them(repo, monkeypatch):
    for number in range(900):
        upsert_station(repo, ORG, station("st_1", f"Press {number}"))
    parsed = []
    monkeypatch.setattr(events_module, "_event", lambda line: parsed.append(line) or real_event(line))
    assert [event.seq for event in repo.events.read(ORG, 897, 10)] == [898, 899, 900]
    # The three read (the first twice: it checks the segment's layout) and the log's first and last lines (bounds),
    # not the 897 before them.
    assert len(parsed) <= 3 + 1 + 2
    parsed.clear()
    assert [event.seq for event in repo.events.read(ORG, 10, 1)] == [11]
    assert len(parsed) <= 1 + 1 + 2


def test_a_log_nobody_appended_to_since_is_not_read_again(repo, monkeypatch):
    """The log's end is checked under its lock before every batch and every read: when it did not change since this
    process last saw it, that is one stat, not a listing of its folder and a read of its last line."""
    upsert_station(repo, ORG, station("st_1", "Press"))
    tails = []
    real_tail_line = events_module._tail_line
    monkeypatch.setattr(events_module, "_tail_line", lambda path: tails.append(path) or real_tail_line(path))
    for _ in range(5):
        assert repo.events.bounds(ORG).latest == 1
    upsert_station(repo, ORG, station("st_2", "Press"))
    assert repo.events.bounds(ORG).latest == 2 and tails == []


def test_a_log_another_process_appended_to_is_read_again_even_past_a_full_segment(tmp_path, monkeypatch):
    """What a process knows of the log's end is checked against the file: another process (here another repository
    on the same folder) appending, even filling the segment and starting the next, is seen, and seqs go on."""
    monkeypatch.setattr(events_module, "SEGMENT_EVENTS", 4)
    one, other = FileRepository(tmp_path / "data"), FileRepository(tmp_path / "data")
    for number in range(3):
        upsert_station(one, ORG, station(f"st_{number}", "Press"))
    upsert_station(other, ORG, station("st_other_1", "Press"))
    assert one.events.bounds(ORG).latest == 4
    for number in range(2, 4):  # seq 5 starts the second segment, behind what `one` last saw
        upsert_station(other, ORG, station(f"st_other_{number}", "Press"))
    upsert_station(one, ORG, station("st_last", "Press"))
    assert [(seq, identifier) for seq, identifier, _, _ in seqs_and_changes(one)][-4:] == [
        (4, "st_other_1"), (5, "st_other_2"), (6, "st_other_3"), (7, "st_last")]


def test_a_writer_finding_the_lock_taken_waits_for_it_and_commits_in_the_next_batch(repo):
    """The events lock held (by a batch, or a look at the log's end): a writer queues its change and waits for the
    lock, however long it is held (no timeout: it is held only for disk operations), then commits."""
    upsert_station(repo, ORG, station("st_1", "Press"))
    held = repo.events.lock(ORG).acquire()
    writer = threading.Thread(target=upsert_station, args=(repo, ORG, station("st_2", "Press")))
    writer.start()
    time.sleep(0.3)
    assert writer.is_alive() and repo.documents.get(ORG, "stations", "st_2") is None
    held.release()
    writer.join(10)
    assert seqs_and_changes(repo) == [(1, "st_1", 1, "CREATED"), (2, "st_2", 1, "CREATED")]


def test_with_every_event_kept_nothing_is_pruned(tmp_path):
    repo = FileRepository(tmp_path / "data", clock=lambda: time.time() + 10 ** 9, events_retention_seconds=0)
    upsert_station(repo, ORG, station("st_1", "Press"))
    assert repo.events.prune() == 0 and repo.events.bounds(ORG) == (1, 1)


class SlowLogSync:
    """Stands in for `os` in the write-ahead log: counts its syncs (the commit points of the batches), and makes the
    first last a while, so that the writers arriving meanwhile queue behind it (as they do behind a busy disk); counts
    every other sync of the file backend's documents and events too."""

    def __init__(self, monkeypatch, first_sync_seconds=0.2):
        self.log_syncs, self.other_syncs = 0, []
        self._first = first_sync_seconds
        log = self

        class Os:
            def __getattr__(self, name):
                return getattr(os, name)

            @staticmethod
            def fdatasync(fd):
                log.log_syncs += 1
                if log.log_syncs == 1:
                    time.sleep(log._first)
                os.fdatasync(fd)

        class OtherOs:
            def __getattr__(self, name):
                return getattr(os, name)

            @staticmethod
            def fsync(fd):
                log.other_syncs.append(os.readlink(f"/proc/self/fd/{fd}"))
                os.fsync(fd)

            @staticmethod
            def fdatasync(fd):
                log.other_syncs.append(os.readlink(f"/proc/self/fd/{fd}"))
                os.fdatasync(fd)

        monkeypatch.setattr(write_ahead_module, "os", Os())
        for module in (events_module, group_commit_module, documents_module, disk_module):
            monkeypatch.setattr(module, "os", OtherOs())


def concurrently(functions):
    """Run the functions on threads of their own, started together; answer what each raised (None: nothing)."""
    errors, start = [None] * len(functions), threading.Barrier(len(functions))

    def run(index):
        start.wait()
        try:
            functions[index]()
        except Exception as error:  # noqa: BLE001 (answered to the test)
            errors[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(functions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return errors


def test_concurrent_writers_share_one_sync_a_batch_and_sync_nothing_else(repo, monkeypatch):
    """Group commit: 8 changes arriving while the write-ahead log syncs are committed by at most two more syncs, not
    8, each with its event, the seqs 1..8 without a gap; nothing else is synced on their way (a checkpoint syncs the
    file system later), but the name of the log's first segment."""
    upsert_station(repo, ORG, station("st_first", "Press"))  # (the log's first segment made)
    syncs = SlowLogSync(monkeypatch)
    writers = [lambda number=number: upsert_station(repo, ORG, station(f"st_{number}", "Press")) for number in range(8)]
    assert concurrently(writers) == [None] * 8
    assert syncs.log_syncs <= 3
    assert [path for path in syncs.other_syncs if path.startswith(str(repo.orgs_root))] == []
    events = seqs_and_changes(repo)[1:]
    assert [seq for seq, *_ in events] == list(range(2, 10))
    assert sorted(identifier for _, identifier, _, _ in events) == [f"st_{number}" for number in range(8)]
    assert all(repo.documents.get(ORG, "stations", f"st_{number}")["revision"] == 1 for number in range(8))


def test_a_change_failing_in_a_batch_has_no_event_and_the_others_commit_without_a_gap(repo, monkeypatch):
    for number in range(1, 4):
        upsert_station(repo, ORG, station(f"st_{number}", "Press"))
    SlowLogSync(monkeypatch)

    class Os:
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def replace(source, target):
            if "st_2" in str(target):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            os.replace(source, target)

    monkeypatch.setattr(disk_module, "os", Os())
    writers = [lambda number=number: upsert_station(repo, ORG, station(f"st_{number}", "Press 2"))
               for number in (1, 2, 3)]
    errors = concurrently(writers)
    assert errors[0] is None and errors[2] is None and isinstance(errors[1], StorageFailed)
    events = seqs_and_changes(repo)
    assert [seq for seq, *_ in events] == [1, 2, 3, 4, 5]
    assert sorted((identifier, revision) for _, identifier, revision, _ in events[3:]) == [("st_1", 2), ("st_3", 2)]
    assert repo.documents.get(ORG, "stations", "st_2")["name"] == "Press"
    monkeypatch.undo()
    upsert_station(repo, ORG, station("st_2", "Press 3"))
    assert seqs_and_changes(repo)[-1] == (6, "st_2", 2, "UPDATED")


def forked(child):
    """Run `child()` in a forked process (it ends there); its pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child()
            code = 0
        finally:
            os._exit(code)
    return pid


def test_writers_of_two_processes_commit_in_batches_of_their_own_without_a_gap(repo, monkeypatch):
    """Four writers in each of two worker processes: each process's writers share batches (fewer log syncs than
    changes), the processes' batches take the lock in turn, and the seqs are 1..8 without a gap."""
    syncs = SlowLogSync(monkeypatch, first_sync_seconds=0.3)
    reading, writing = os.pipe()

    def write_four(prefix):
        errors = concurrently([lambda number=number: upsert_station(repo, ORG, station(f"{prefix}_{number}", "Press"))
                               for number in range(4)])
        return errors, syncs.log_syncs

    def child():
        errors, log_syncs = write_four("st_child")
        os.write(writing, orjson.dumps({"errors": [repr(error) for error in errors if error], "syncs": log_syncs}))

    pid = forked(child)
    errors, parent_syncs = write_four("st_parent")
    os.waitpid(pid, 0)
    reported = orjson.loads(os.read(reading, 65536))
    assert errors == [None] * 4 and reported["errors"] == []
    assert parent_syncs < 4 and reported["syncs"] < 4
    events = seqs_and_changes(repo)
    assert [seq for seq, *_ in events] == list(range(1, 9))
    assert sorted(identifier for _, identifier, _, _ in events) == sorted(
        [f"st_child_{number}" for number in range(4)] + [f"st_parent_{number}" for number in range(4)])


def test_the_events_of_a_leader_killed_before_it_put_its_batch_in_place_are_cut(repo):
    """The worst instant for a batch: its leader killed after appending its events, before putting their changes in
    place. The next writer of the org cuts those events and commits its own change with the next seq."""
    upsert_station(repo, ORG, station("st_1", "Press"))

    def killed_leader():
        with repo.events.lock(ORG):
            latest = repo.events.recover(ORG)
            repo.events.append(ORG, latest + 1, orjson.dumps({"seq": latest + 1, **NewEvent(
                "2026-11-29T00:00:00Z", "stations", "st_1", 2, "UPDATED", "Killed", None, None)._asdict()}) + b"\n")
        # (the process ends here, as a kill would end it: nothing put in place, nobody told)

    os.waitpid(forked(killed_leader), 0)
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    assert repo.documents.get(ORG, "stations", "st_1")["name"] == "Press 2"
    assert seqs_and_changes(repo) == [(1, "st_1", 1, "CREATED"), (2, "st_1", 2, "UPDATED")]


def test_one_waiting_writer_of_a_process_waits_for_the_lock_and_commits_for_all(repo, monkeypatch):
    """Writers of one process finding the lock taken: one of them waits for it in the kernel (each release would wake
    every waiter there), the others for its batch, which commits all of their changes with one sync of the log."""
    blocked, most = [], []

    def waits(path, operation):
        return operation == fcntl.LOCK_EX and path.startswith(str(repo.orgs_root))

    def before(path, operation):
        if waits(path, operation):
            blocked.append(path)
            most.append(len(blocked))

    def after(path, operation):
        if waits(path, operation):
            blocked.remove(path)

    syncs = SlowLogSync(monkeypatch, first_sync_seconds=0)
    held = repo.events.lock(ORG).acquire()
    on_flock(monkeypatch, before, after)
    writers = [threading.Thread(target=upsert_station, args=(repo, ORG, station(f"st_{number}", "Press")))
               for number in range(4)]
    for writer in writers:
        writer.start()
    time.sleep(0.3)
    assert len(blocked) == 1 and all(writer.is_alive() for writer in writers)
    held.release()
    for writer in writers:
        writer.join(10)
    assert max(most) == 1 and syncs.log_syncs == 1
    assert [seq for seq, *_ in seqs_and_changes(repo)] == [1, 2, 3, 4]


def test_a_writer_killed_while_it_waits_for_the_lock_leaves_nothing(repo):
    """A process killed while its writer waits for the org's lock: its change never reaches the log (no event, no
    document), and the next writer commits with the next seq."""
    upsert_station(repo, ORG, station("st_1", "Press"))
    held = repo.events.lock(ORG).acquire()

    def killed_writer():  # waits for the lock and is killed (os._exit) meanwhile
        threading.Timer(0.3, lambda: os._exit(0)).start()
        upsert_station(repo, ORG, station("st_killed", "Press"))

    os.waitpid(forked(killed_writer), 0)
    held.release()
    upsert_station(repo, ORG, station("st_2", "Press"))
    assert seqs_and_changes(repo) == [(1, "st_1", 1, "CREATED"), (2, "st_2", 1, "CREATED")]
    assert repo.documents.get(ORG, "stations", "st_killed") is None


def test_a_process_forked_while_a_batch_forms_commits_on_its_own(repo):
    """A worker forked while a batch of its parent forms (a writer of it waiting for the lock) has none of its
    parent's threads: its own writer leads a batch of its own rather than waiting for one that no thread of it will
    commit."""
    group = repo.events._group
    group._forming[ORG] = []  # as a leader waiting for the lock leaves it
    reading, writing = os.pipe()

    def child():
        signal.alarm(10)  # a child waiting for its parent's batch would wait for ever
        upsert_station(repo, ORG, station("st_child", "Press"))
        os.write(writing, b"1")

    try:
        os.waitpid(forked(child), 0)
    finally:
        del group._forming[ORG]
    os.close(writing)
    assert os.read(reading, 1) == b"1"
    assert seqs_and_changes(repo) == [(1, "st_child", 1, "CREATED")]


def test_a_change_commits_at_its_write_ahead_record_s_sync_its_other_writes_unsynced(repo, monkeypatch):
    """What a replay after a power cut relies on (docs/events.md): a change's history entry is in place and its event
    appended before its write-ahead record is synced, the one sync on its way, and its document is renamed into place
    after that sync; nothing else is synced."""
    upsert_station(repo, ORG, station("st_1", "Press"))
    done = []
    real_fsync, real_fdatasync, real_replace, real_write = os.fsync, os.fdatasync, os.replace, os.write

    def fsync(fd):
        real_fsync(fd)
        done.append(("sync", os.readlink(f"/proc/self/fd/{fd}")))

    def fdatasync(fd):
        real_fdatasync(fd)
        done.append(("sync", os.readlink(f"/proc/self/fd/{fd}")))

    def replace(source, target):
        real_replace(source, target)
        done.append(("rename", str(target)))

    def write(fd, data):
        written = real_write(fd, data)
        if (path := os.readlink(f"/proc/self/fd/{fd}")).endswith(".jsonl"):
            done.append(("append", path))
        return written

    for name, function in (("fsync", fsync), ("fdatasync", fdatasync), ("replace", replace), ("write", write)):
        monkeypatch.setattr(os, name, function)
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    monkeypatch.undo()

    stations = repo.orgs_root / ORG / "stations"
    entry, document = str(stations / ".history" / "st_1" / "2.json"), str(stations / "st_1.json")
    [commit] = [step for step in done if step[0] == "sync" and step[1].startswith(str(repo.orgs_root))]
    assert commit[1].endswith(".wal")
    assert done.index(("rename", entry)) < done.index(commit) < done.index(("rename", document))
    assert [what for what, path in done[:done.index(commit)] if path.endswith(".jsonl")] == ["append"]


def test_a_full_disk_at_the_boot_note_fails_no_reader(tmp_path, monkeypatch):
    """The check after a reboot notes the boot it checked; when the disk is full that note is not written (the next
    process checks again), and the read goes on."""
    repo = FileRepository(tmp_path / "data")
    upsert_station(repo, ORG, station("st_1", "Press"))
    (repo.orgs_root / ORG / "events" / "boot").write_text("the boot before")

    def disk_full(path, data):
        raise StorageFull()

    monkeypatch.setattr(reboot_check_module, "write_unsynced", disk_full)
    after = FileRepository(tmp_path / "data")
    assert after.events.bounds(ORG).latest == 1
    assert (repo.orgs_root / ORG / "events" / "boot").read_text() == "the boot before"
