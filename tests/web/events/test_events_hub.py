"""The event streams' hub in one process (service.web.events.hub, stream, hangups), on both backends' event stores: each
stream gets every event it wants once, in seq order, from where it starts; a slow stream holds a bounded number of
events; the cap; a stop, a hang-up and a renumbering (test-mode reset) end streams (of a reset, only those open
during it)."""
import socket
import time

import pytest

from service.domain.events import stream_start
from service.domain.stations import upsert_station
from service.errors import EventStreamsFull, StorageFailed
from service.storage import get_repository
from service.web.events import hub as hub_module
from service.web.events import stream as stream_module
from service.web.events.hub import StreamHub
from service.web.events.stream import Ending

ORG = "default"
WAIT = 10  # seconds; a commit reaches a stream in well under one


@pytest.fixture
def repo(app):
    return get_repository(app)


@pytest.fixture
def hub(repo):
    made = StreamHub(repo.events, limit=8)
    yield made
    made.stop()


def commit(repo, *names):
    for name in names:
        upsert_station(repo, ORG, {"id": "st_press", "name": name})


def opened(hub, position, wanted=None, connection=None):
    hub.reserve()
    return hub.open(ORG, wanted, position, connection)


def collect(stream, repo, count):
    """The stream's events until `count` arrived (or WAIT passed), as (seq, name)."""
    found, deadline = [], time.monotonic() + WAIT
    for batch in stream.batches(repo.events, 0.1):
        found += [(event.seq, event.name) for event in batch]
        if len(found) >= count or time.monotonic() > deadline:
            break
    return found


def test_a_stream_gets_the_events_after_its_start_then_each_new_one_once_in_order(hub, repo):
    commit(repo, "a", "b", "c")
    behind = opened(hub, 1)
    latest = opened(hub, stream_start(repo, ORG, None)[0])
    deletions = opened(hub, 0, wanted=frozenset({("stations", "DELETED")}))
    commit(repo, "d", "e")
    repo.documents.delete(ORG, "stations", "st_press")
    assert collect(behind, repo, 5) == [(2, "b"), (3, "c"), (4, "d"), (5, "e"), (6, None)]
    assert collect(latest, repo, 3) == [(4, "d"), (5, "e"), (6, None)]
    assert collect(deletions, repo, 1) == [(6, None)]
    assert hub.open_streams == 3
    for stream in (behind, latest, deletions):
        hub.close(stream)
    assert hub.open_streams == 0


def test_a_slow_stream_holds_at_most_its_limit_and_reads_the_rest_from_the_store(hub, repo, monkeypatch):
    monkeypatch.setattr(stream_module, "PENDING_LIMIT", 3)
    slow = opened(hub, 0)
    names = [f"n{number}" for number in range(12)]
    for name in names:
        commit(repo, name)
        time.sleep(0.05)  # the hub offers as they come; nobody reads the stream meanwhile
        assert slow.held <= 3
    assert collect(slow, repo, 12) == list(enumerate(names, 1))


def test_the_cap_refuses_at_once_and_a_closed_stream_frees_its_place(repo):
    hub = StreamHub(repo.events, limit=2)
    first, _ = opened(hub, 0), opened(hub, 0)
    with pytest.raises(EventStreamsFull) as full:
        hub.reserve()
    assert full.value.retry_after == 5 and "(2, WIS_EVENT_STREAMS_PER_WORKER)" in full.value.message
    hub.close(first)
    hub.close(first)  # twice: still one place
    opened(hub, 0)
    with pytest.raises(EventStreamsFull):
        hub.reserve()
    hub.stop()


def test_a_stop_ends_every_stream_and_opens_no_new_one(hub, repo):
    streams = [opened(hub, 0), opened(hub, 0)]
    hub.stop()
    for stream in streams:
        assert list(stream.batches(repo.events, WAIT)) == [] and stream.ending is Ending.STOPPING
    with pytest.raises(EventStreamsFull) as stopping:
        hub.reserve()
    assert "stopping" in stopping.value.message


def test_a_reset_ends_the_org_s_streams_saying_where_events_start(hub, repo):
    commit(repo, "a", "b")
    stream = opened(hub, 2)
    repo.reset()
    assert collect(stream, repo, 1) == [] and stream.ending is Ending.RENUMBERED and stream.oldest == 1


def test_a_reset_followed_by_as_many_events_is_seen_by_the_event_at_the_cursor(hub, repo):
    commit(repo, "a", "b")
    stream = opened(hub, 2)
    with hub._reading:  # the hub reads nothing until the new events outnumber the old
        repo.reset()
        commit(repo, "x", "y", "z")
    assert collect(stream, repo, 1) == [] and stream.ending is Ending.RENUMBERED and stream.oldest == 1


def test_a_stream_opened_after_a_reset_the_idle_hub_did_not_see_starts_in_the_new_numbering(hub, repo, monkeypatch):
    """The hub's thread ends with its last stream; a reset, then a new stream: it follows the new seqs, and is not
    taken for one open during the reset (it got `event: reset`, then ended, and never saw seq 3)."""
    monkeypatch.setattr(hub_module, "ACCESS_CHECK_SECONDS", 0.05)
    commit(repo, "a", "b", "c", "d")
    earlier = opened(hub, stream_start(repo, ORG, None)[0])
    commit(repo, "e")
    assert collect(earlier, repo, 1) == [(5, "e")]  # the thread has read: it is not starting while the stream closes
    hub.close(earlier)
    wait_until(lambda: hub._thread is None)
    repo.reset()
    commit(repo, "x", "y")
    stream = opened(hub, stream_start(repo, ORG, None)[0])
    commit(repo, "z")
    # Once the thread has read "z" (a stream behind reads the store itself, so its events alone do not tell).
    wait_until(lambda: stream.ending is not None or hub._cursors[ORG].seq == 3)
    assert stream.ending is None and collect(stream, repo, 1) == [(3, "z")]


def test_a_stream_opened_after_a_reset_the_hub_has_not_read_yet_ends_only_those_open_during_it(hub, repo,
                                                                                              monkeypatch):
    commit(repo, "a", "b", "c")
    during = opened(hub, 3)
    monkeypatch.setattr(hub, "_read_all", lambda: None)  # the thread reads nothing until the new stream is open
    repo.reset()
    commit(repo, "x", "y")
    after = opened(hub, stream_start(repo, ORG, None)[0])
    monkeypatch.undo()
    commit(repo, "z")
    wait_until(lambda: after.ending is not None or hub._cursors[ORG].seq == 3)
    assert collect(during, repo, 1) == [] and during.ending is Ending.RENUMBERED and during.oldest == 1
    assert after.ending is None and collect(after, repo, 1) == [(3, "z")]


def test_a_stream_whose_start_was_taken_before_a_reset_is_told_of_it_rather_than_missing_events(hub, repo):
    commit(repo, "a", "b", "c")
    position = stream_start(repo, ORG, None)[0]
    repo.reset()  # between where the stream starts and its opening
    commit(repo, "x")
    stream = opened(hub, position)
    assert collect(stream, repo, 1) == [] and stream.ending is Ending.RENUMBERED and stream.oldest == 1


def wait_until(condition):
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_client_that_hangs_up_ends_its_stream_and_one_that_talks_does_not(hub, repo):
    server_side, client_side = socket.socketpair()
    talking_server, talking_client = socket.socketpair()
    with server_side, client_side, talking_server, talking_client:
        stream = opened(hub, 0, connection=server_side)
        talking = opened(hub, 0, connection=talking_server)
        talking_client.sendall(b"x")
        client_side.close()
        assert collect(stream, repo, 1) == [] and stream.ending is Ending.HUNG_UP
        commit(repo, "a")
        assert collect(talking, repo, 1) == [(1, "a")] and talking.ending is None
        hub.close(stream)
        hub.close(talking)


@pytest.mark.parametrize("after, expected", [(None, (3, None)), (0, (0, None)), (2, (2, None)), (3, (3, None)),
                                             (4, (0, 1)), (99, (0, 1))])
def test_where_a_stream_starts(repo, after, expected):
    commit(repo, "a", "b", "c")
    assert stream_start(repo, ORG, after) == expected


class Failing:
    """An event store whose first watcher fails to wait and whose reads fail twice, as an engine's outage would."""

    def __init__(self, events):
        self._events, self.failures = events, ["wait", "read", "read"]

    def _fail(self, what):
        if what in self.failures:
            self.failures.remove(what)
            raise StorageFailed()

    def read(self, *args, **kwargs):
        self._fail("read")
        return self._events.read(*args, **kwargs)

    def bounds(self, org):
        return self._events.bounds(org)

    def watcher(self):
        watcher, fail = self._events.watcher(), self._fail

        class Watcher:
            def wait(self, timeout):
                fail("wait")
                return watcher.wait(timeout)

            def close(self):
                watcher.close()

        return Watcher()


def test_an_outage_of_the_store_delays_events_but_loses_none_and_is_logged_once(repo, caplog, monkeypatch):
    monkeypatch.setattr(hub_module, "FALLBACK_SECONDS", 0.2)
    failing = Failing(repo.events)
    hub = StreamHub(failing, limit=2)
    stream = opened(hub, 0)
    commit(repo, "a", "b")
    assert collect(stream, repo, 2) == [(1, "a"), (2, "b")]
    commit(repo, "c")
    assert collect(stream, repo, 1) == [(3, "c")] and failing.failures == []
    messages = [record.getMessage() for record in caplog.records if record.name == hub_module.__name__]
    assert len(messages) == 2 and "failed" in messages[0] and "works again" in messages[1]
    hub.stop()


def test_a_stream_whose_token_is_no_longer_valid_ends_at_the_next_look_and_the_others_go_on(repo, monkeypatch):
    """A revoked token (CONTRACT 16): the hub looks at its streams' tokens every ACCESS_CHECK_SECONDS, even while no
    event commits, and ends those whose token is revoked; the other streams, and those opened with nothing to check,
    get their events."""
    monkeypatch.setattr(hub_module, "ACCESS_CHECK_SECONDS", 0.1)
    revoked = set()
    hub = StreamHub(repo.events, limit=8, still_valid=lambda credential: credential not in revoked)
    try:
        streams = {}
        for credential in ("tablet", "pipeline", None):
            hub.reserve()
            streams[credential] = hub.open(ORG, None, 0, credential=credential)
        revoked.add("tablet")
        deadline = time.monotonic() + WAIT
        while streams["tablet"].ending is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert streams["tablet"].ending is Ending.REVOKED and collect(streams["tablet"], repo, 1) == []
        commit(repo, "a")
        assert collect(streams["pipeline"], repo, 1) == collect(streams[None], repo, 1) == [(1, "a")]
        assert streams["pipeline"].ending is None
    finally:
        hub.stop()
