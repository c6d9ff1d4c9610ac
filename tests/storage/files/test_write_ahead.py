"""The file backend's write-ahead log (service.storage.files.write_ahead), its checkpoints and its replay after a power
cut (service.storage.files.checkpoints, reboot_check): a change is committed by its record's sync alone, so what a
power cut may take is everything else written since the last checkpoint; the first look at the org after the reboot
puts it all back, and a kill leaves no record of a change that did not commit."""
import errno
import os
import threading
import time

import orjson
import pytest

from service.domain.stations import upsert_station
from service.storage.contract import NewEvent
from service.storage.files import FileRepository
from service.storage.files import checkpoints as checkpoints_module
from service.storage.files import events as events_module
from service.storage.files import write_ahead as write_ahead_module
from support.power_cut import power_cut

ORG = "default"


def station(identifier, name):
    return {"id": identifier, "name": name}


def seqs_and_changes(repo):
    return [(event.seq, event.id, event.revision, event.change) for event in repo.events.read(ORG, 0, 1000)]


def org_folder(repo):
    return repo.orgs_root / ORG


def wait_for_checkpoint(repo, seq):
    """The checkpoint's seq once it reaches `seq` (a bounded wait: the checkpoint thread runs on its own)."""
    for _ in range(200):
        if (repo.events.wal.checkpoint(ORG) or 0) >= seq:
            return repo.events.wal.checkpoint(ORG)
        time.sleep(0.02)
    raise AssertionError(f"no checkpoint reached seq {seq}")


@pytest.fixture
def quick_checkpoints(monkeypatch):
    monkeypatch.setattr(checkpoints_module, "CHECKPOINT_SECONDS", 0.01)


@pytest.fixture
def no_checkpoints(monkeypatch):
    """No checkpoint: everything written in a test is after the last one (the suite's default, said here)."""
    monkeypatch.setattr(checkpoints_module, "CHECKPOINT_SECONDS", None)


def writes(repo):
    upsert_station(repo, ORG, station("st_1", "Press"))
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    upsert_station(repo, ORG, station("st_3", "Drill"))
    repo.documents.delete(ORG, "stations", "st_3")
    upsert_station(repo, ORG, station("st_2", "Saw"))


EXPECTED = [(1, "st_1", 1, "CREATED"), (2, "st_1", 2, "UPDATED"), (3, "st_3", 1, "CREATED"), (4, "st_3", 2, "DELETED"),
            (5, "st_2", 1, "CREATED")]


@pytest.mark.parametrize("segments", ["one segment", "a segment a change"])
@pytest.mark.parametrize("first_after", ["a writer", "a reader of events", "a reader of documents"])
def test_after_a_power_cut_the_first_look_puts_back_every_change_since_the_checkpoint(tmp_path, no_checkpoints,
                                                                                       monkeypatch, first_after,
                                                                                       segments):
    if segments == "a segment a change":  # the replay reads records across segments, appends events across them
        monkeypatch.setattr(write_ahead_module, "SEGMENT_BYTES", 100)
        monkeypatch.setattr(events_module, "SEGMENT_EVENTS", 2)
    repo = FileRepository(tmp_path / "data")
    writes(repo)
    power_cut(repo, 0)

    after = FileRepository(tmp_path / "data")  # a worker of the new boot
    if first_after == "a writer":
        upsert_station(after, ORG, station("st_1", "Press 3"))
        assert after.documents.get(ORG, "stations", "st_1")["revision"] == 3
    elif first_after == "a reader of events":
        assert after.events.bounds(ORG).latest == 5
    else:
        assert after.documents.get(ORG, "stations", "st_1")["name"] == "Press 2"
    assert after.documents.get(ORG, "stations", "st_3") is None
    assert after.documents.get(ORG, "stations", "st_2")["name"] == "Saw"
    assert seqs_and_changes(after)[:5] == EXPECTED
    assert [(entry.revision, entry.change) for entry in after.documents.history(ORG, "stations", "st_3", 10)] == [
        (2, "DELETED"), (1, "CREATED")]
    assert after.documents.revision(ORG, "stations", "st_1", 1)["name"] == "Press"
    # The replay is durable and noted: the next boot has nothing to put back.
    assert after.events.wal.checkpoint(ORG) >= 5


def test_a_checkpoint_notes_what_it_made_durable_and_a_replay_starts_there(tmp_path, quick_checkpoints,
                                                                            monkeypatch):
    monkeypatch.setattr(write_ahead_module, "SEGMENT_BYTES", 100)  # a segment a batch: old ones to remove
    repo = FileRepository(tmp_path / "data")
    upsert_station(repo, ORG, station("st_1", "Press"))
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    assert wait_for_checkpoint(repo, 2) == 2
    assert repo.events.wal.segments(ORG) == [2]  # the segment of seq 1 removed; the last kept
    monkeypatch.setattr(checkpoints_module, "sync_filesystem", failing_sync)  # no checkpoint from now on
    upsert_station(repo, ORG, station("st_3", "Drill"))
    time.sleep(0.05)
    assert repo.events.wal.checkpoint(ORG) == 2
    assert [record.seq for record in repo.events.wal.records_after(ORG, 2)] == [3]
    power_cut(repo, 2)

    after = FileRepository(tmp_path / "data")
    assert seqs_and_changes(after) == [(1, "st_1", 1, "CREATED"), (2, "st_1", 2, "UPDATED"),
                                       (3, "st_3", 1, "CREATED")]
    assert after.documents.get(ORG, "stations", "st_3")["name"] == "Drill"
    assert after.documents.get(ORG, "stations", "st_1")["name"] == "Press 2"


def test_closing_the_repository_makes_the_checkpoint_due_at_once_and_no_later_one(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints_module, "CHECKPOINT_SECONDS", 60)
    repo = FileRepository(tmp_path / "data")
    upsert_station(repo, ORG, station("st_1", "Press"))
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    repo.close()
    assert repo.events.wal.checkpoint(ORG) == 2
    assert "wis-checkpoints" not in [thread.name for thread in threading.enumerate()]
    upsert_station(repo, ORG, station("st_2", "Saw"))  # (its record waits for a replay: no thread after close)
    assert "wis-checkpoints" not in [thread.name for thread in threading.enumerate()]
    assert [record.seq for record in repo.events.wal.records_after(ORG, 2)] == [3]


def failing_sync(path):
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_a_checkpoint_whose_sync_fails_notes_nothing_and_keeps_the_records(tmp_path, quick_checkpoints,
                                                                           monkeypatch):
    monkeypatch.setattr(checkpoints_module, "sync_filesystem", failing_sync)
    repo = FileRepository(tmp_path / "data")
    upsert_station(repo, ORG, station("st_1", "Press"))
    time.sleep(0.1)
    assert repo.events.wal.checkpoint(ORG) is None
    assert [record.seq for record in repo.events.wal.records_after(ORG, 0)] == [1]
    monkeypatch.undo()
    monkeypatch.setattr(checkpoints_module, "CHECKPOINT_SECONDS", 0.01)
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    assert wait_for_checkpoint(repo, 2) == 2


def test_the_record_of_a_change_whose_leader_was_killed_before_its_rename_is_cut(tmp_path, no_checkpoints):
    """A leader killed after its record's sync, before its rename: nobody was told, so the next look at the log cuts
    the event and the record, and the next change takes their seq; a power cut after that does not bring them back."""
    repo = FileRepository(tmp_path / "data")
    upsert_station(repo, ORG, station("st_1", "Press"))
    pid = os.fork()
    if pid == 0:
        try:
            with repo.events.lock(ORG):
                latest = repo.events.recover(ORG)
                line = orjson.dumps({"seq": latest + 1, **NewEvent(
                    "2026-11-29T00:00:00Z", "stations", "st_1", 2, "UPDATED", "Killed", None, None)._asdict()}) + b"\n"
                repo.events.append(ORG, latest + 1, line)
                entry = b'{"change":"UPDATED","savedAt":"2026-11-29T00:00:00Z","document":{"name":"Killed"}}'
                repo.events.wal.append(ORG, latest + 1, [line], [entry])
        finally:
            os._exit(0)  # as a kill would end it: nothing put in place, nobody told
    os.waitpid(pid, 0)
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    assert seqs_and_changes(repo) == [(1, "st_1", 1, "CREATED"), (2, "st_1", 2, "UPDATED")]
    assert [orjson.loads(record.entry)["document"]["name"] for record in repo.events.wal.records_after(ORG, 0)] == [
        "Press", "Press 2"]
    power_cut(repo, 0)
    after = FileRepository(tmp_path / "data")
    assert after.documents.get(ORG, "stations", "st_1")["name"] == "Press 2"
    assert seqs_and_changes(after) == [(1, "st_1", 1, "CREATED"), (2, "st_1", 2, "UPDATED")]


def lose_a_rename(path, bytes_before):
    """What a power cut left of a change whose folder was not synced yet, before the write-ahead log: its rename (or
    unlink) undone."""
    if bytes_before is None:
        path.unlink()
    else:
        path.write_bytes(bytes_before)


def test_a_log_written_before_the_write_ahead_log_is_checked_as_it_was(tmp_path, no_checkpoints):
    """A data directory whose log has no write-ahead records (written by an earlier version): after a reboot, a change
    whose event is in the log but whose rename a power cut lost is put in place from its history entry."""
    repo = FileRepository(tmp_path / "data")
    stations = org_folder(repo) / "stations"
    upsert_station(repo, ORG, station("st_1", "Press"))
    press = (stations / "st_1.json").read_bytes()
    upsert_station(repo, ORG, station("st_1", "Press 2"))
    upsert_station(repo, ORG, station("st_2", "Saw"))
    for segment in repo.events.wal.segments(ORG):
        (repo.events.wal.directory(ORG) / f"{segment:010d}.wal").unlink()
    lose_a_rename(stations / "st_1.json", press)
    (org_folder(repo) / "events" / "boot").write_text("the boot before")

    after = FileRepository(tmp_path / "data")
    assert after.documents.get(ORG, "stations", "st_1")["name"] == "Press 2"
    assert seqs_and_changes(after) == [(1, "st_1", 1, "CREATED"), (2, "st_1", 2, "UPDATED"), (3, "st_2", 1, "CREATED")]
    upsert_station(after, ORG, station("st_1", "Press 3"))
    assert seqs_and_changes(after)[-1] == (4, "st_1", 3, "UPDATED")
