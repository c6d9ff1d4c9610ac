"""GET /events against real gunicorn with the shipped worker, both backends, read with `requests`: events in order with
their ids and types; an event committed on either of two workers reaching the streams of both within a second; the
cap's 503 with Retry-After; a client that hangs up freeing its place within 5 s; the keepalive; a stream that the
server drops (a SIGHUP's new workers, a max-requests restart) resumed with Last-Event-ID, nothing missed or repeated;
a graceful shutdown ending streams cleanly and at once; a test-mode reset telling its streams, then ending them."""
import json
import signal
import time

import pytest
import requests

from support.events import Follower, commit, follower, latest_seq
from support.servers import SHIPPED_WORKER_CLASS
from support.tokens import HEADERS, TOKEN_NAME

SHIPPED = ("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4", "--graceful-timeout", "60")
# What the contract promises: an event reaches every open stream within a second, a hung-up client frees its place
# within 5 s, a keepalive comes at least every 15 s.
DELIVERY_SECONDS = 1.0
HANG_UP_SECONDS = 5.0
KEEPALIVE_SECONDS = 15.0


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend, start_module_gunicorn):
    """Two workers, one stream each at most: two open streams are on the two workers."""
    return start_module_gunicorn(tmp_path_factory.mktemp("events") / "data", workers=2, backend=backend,
                                 extra_args=SHIPPED, env={"WIS_EVENT_STREAMS_PER_WORKER": "1"})


@pytest.fixture
def single(tmp_path, backend, start_gunicorn):
    """`single(*extra_args)`: one worker, one stream at most, test mode, for this test alone."""
    def start(*extra_args):
        return start_gunicorn(tmp_path / "data", workers=1, backend=backend, extra_args=SHIPPED + extra_args,
                              env={"WIS_EVENT_STREAMS_PER_WORKER": "1", "WIS_TEST_MODE": "1"})
    return start


def data_of(message):
    return json.loads(message["data"])


def test_events_come_in_order_with_their_ids_types_and_envelopes(server):
    start = latest_seq(server.url)
    with follower(server.url, headers={**HEADERS, "Last-Event-ID": str(start)}) as everything:
        with follower(server.url, params={"after": start, "types": "station.deleted"}) as deletions:
            for number in range(5):
                commit(server.url, "ev_order", f"Press {number}")
            requests.post(f"{server.url}/graph/v2", headers=HEADERS, timeout=30,
                          json={"query": 'mutation { stationDelete(id: "ev_order", comment: "line closed") }'})
            found = [message for _, message in everything.events(6)]
            [(_, deleted)] = deletions.events(1)
    assert [int(message["id"]) for message in found] == list(range(start + 1, start + 7))
    assert [message["event"] for message in found] == ["station.created"] + ["station.updated"] * 4 + [
        "station.deleted"]
    assert [data_of(message)["data"]["name"] for message in found] == [f"Press {n}" for n in range(5)] + [None]
    assert data_of(found[-1]) == {**data_of(deleted), "type": "station.deleted"}
    assert data_of(deleted)["data"] == {"seq": start + 6, "kind": "station", "id": "ev_order", "revision": 6,
                                        "change": "DELETED", "name": None, "author": TOKEN_NAME,
                                        "comment": "line closed"}


def test_an_event_committed_on_either_worker_reaches_the_streams_of_both_within_a_second(server):
    with follower(server.url) as one, follower(server.url) as other:  # one a worker: their cap is 1
        for number in range(4):
            committed = commit(server.url, "ev_workers", f"Line {number}")  # answered by one worker or the other
            for stream in (one, other):
                [(arrived, message)] = stream.events(1)
                assert data_of(message)["data"]["name"] == f"Line {number}"
                assert arrived - committed < DELIVERY_SECONDS


@pytest.mark.parametrize("path, headers, named", [
    ("/events", {"Last-Event-ID": "x7"}, "Last-Event-ID"),
    ("/events?after=-3", {}, "after"),
    ("/events?types=station.moved", {}, "types[0]"),
])
def test_a_bad_start_or_type_is_a_json_400_before_any_stream(server, path, headers, named):
    response = requests.get(server.url + path, headers={**HEADERS, **headers}, timeout=30)
    assert response.status_code == 400 and response.headers["Content-Type"] == "application/json"
    assert response.json()["error"].startswith(f"{named}: ")


def test_beyond_the_cap_503_with_retry_after_and_a_hang_up_frees_the_place_within_5_s(single):
    url = single().url
    first = Follower(url)
    assert first.status_code == 200
    refused = requests.get(f"{url}/events", headers=HEADERS, timeout=30)
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
    assert "WIS_EVENT_STREAMS_PER_WORKER" in refused.json()["error"]
    next(first.lines())  # the stream has started
    first.close()
    hung_up = time.monotonic()
    while True:
        again = Follower(url)
        if again.status_code == 200:
            break
        assert time.monotonic() - hung_up < HANG_UP_SECONDS, "the place was not freed"
        again.close()
        time.sleep(0.1)
    again.close()


def test_an_idle_stream_gets_a_keepalive_comment_within_15_s(single):
    url = single().url
    with Follower(url) as stream:
        opened = time.monotonic()
        lines = stream.lines()
        assert next(lines)[1] == "retry: 3000"
        when, line = next((when, line) for when, line in lines if line)
    assert line == ": keepalive"
    assert when - opened < KEEPALIVE_SECONDS, f"the first keepalive came after {when - opened:.1f} s"


def drop_by_sighup(server):
    server.process.send_signal(signal.SIGHUP)  # new workers; the old ones stop gracefully


def drop_by_max_requests(server):
    """Requests until the worker answers one with Connection: close, its last before it restarts (--max-requests 5):
    its 5th request, after the probe, the stream and the commit. No more are sent, so the rest of the test (3 commits
    and a stream) goes to the new worker and stays under its own limit. (A third request sent here went to the new
    worker, which made the resumed stream its 5th request: that worker then stopped, and the stream ended whenever
    the stop came before it had sent what it had to catch up, which a loaded CI run saw on the shared backend.)"""
    for _ in range(10):
        if requests.get(f"{server.url}/healthz", timeout=30).headers.get("Connection", "").lower() == "close":
            return
    raise AssertionError("no answer said Connection: close: the worker did not restart")


@pytest.mark.parametrize("drop, extra_args", [(drop_by_sighup, ()), (drop_by_max_requests, ("--max-requests", "5"))])
def test_a_stream_the_server_drops_resumes_with_last_event_id_missing_and_repeating_nothing(single, drop, extra_args):
    server = single(*extra_args)  # its readiness probe was request 1
    stream = follower(server.url, headers={**HEADERS, "Last-Event-ID": "0"})  # request 2
    commit(server.url, "ev_resume", "before the drop")  # request 3
    received = [int(message["id"]) for _, message in stream.events(1)]
    drop(server)
    received += [int(message["id"]) for _, message in stream.events(10)]  # until the server ends the stream
    stream.close()
    for number in range(3):
        commit(server.url, "ev_resume", f"after the drop {number}")  # a new worker answers
    with follower(server.url, headers={**HEADERS, "Last-Event-ID": str(received[-1])}) as resumed:
        received += [int(message["id"]) for _, message in resumed.events(4 - len(received))]
    assert received == [1, 2, 3, 4]


def test_a_graceful_shutdown_ends_open_streams_cleanly_and_at_once(single):
    server = single()
    stream = follower(server.url)
    lines = stream.lines()
    next(lines)
    server.process.send_signal(signal.SIGTERM)
    asked = time.monotonic()
    rest = [line for _, line in lines if line]  # ends without an error: the answer's last chunk came
    ended = time.monotonic()
    assert rest == [] and ended - asked < HANG_UP_SECONDS  # not graceful_timeout's 60 s
    server.process.wait(timeout=30)


def test_a_test_mode_reset_tells_the_org_s_streams_and_ends_them(single):
    server = single()
    commit(server.url, "ev_reset", "one")
    commit(server.url, "ev_reset", "two")
    with follower(server.url, headers={**HEADERS, "Last-Event-ID": "0"}) as stream:
        assert [int(message["id"]) for _, message in stream.events(2)] == [1, 2]
        assert requests.post(f"{server.url}/_test/reset", headers=HEADERS, timeout=30).status_code == 200
        [(_, reset)] = stream.events(1)
        assert (reset["event"], reset["id"], json.loads(reset["data"])) == ("reset", "0", {"oldest": 1})
        assert stream.events(1) == []  # and the stream ends
