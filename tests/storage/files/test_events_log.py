"""The file backend's event log (service.storage.files.events), what is its own: a torn or uncommitted end cut off, a
full disk at the event storing neither the change nor its event, pruning by whole segments. The behaviour both backends
share (one event per change, seqs under concurrent writers, reads, resets, watchers) is tests/storage/test_events.py."""
import errno
import time

import pytest

from service.domain.events import list_events
from service.domain.stations import upsert_station
from service.errors import StorageFull
from service.storage.files import FileRepository
from service.storage.contract import (
    AttemptOutcome, DeliveryState, DispatchRules, NewEvent, SubscriptionSettings)
from service.storage.files import events as events_module
from support.disk import FaultyDisk

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


def test_pruning_keeps_the_segments_a_webhook_subscription_may_still_send(tmp_path, monkeypatch):
    monkeypatch.setattr(events_module, "SEGMENT_EVENTS", 10)
    now = [time.time()]
    repo = FileRepository(tmp_path / "data", clock=lambda: now[0], events_retention_seconds=3600)
    upsert_station(repo, ORG, station("st_1", "Press 0"))
    repo.webhooks.subscribe(ORG, SubscriptionSettings("mes", "https://93.184.216.34/", {}, None, None, None),
                            "whsec_" + "A" * 43 + "=", 86400)
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


def test_with_every_event_kept_nothing_is_pruned(tmp_path):
    repo = FileRepository(tmp_path / "data", clock=lambda: time.time() + 10 ** 9, events_retention_seconds=0)
    upsert_station(repo, ORG, station("st_1", "Press"))
    assert repo.events.prune() == 0 and repo.events.bounds(ORG) == (1, 1)
