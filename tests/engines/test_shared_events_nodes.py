"""Zero events lost across nodes (CONTRACT 14 on CONTRACT 8): two real gunicorn nodes on one PostgreSQL and one
bucket, writers on both to one org, one node killed with SIGKILL mid-burst and started again. Every acknowledged
change has exactly one event, the org's seqs are 1..N without a gap, a follower that polls `events(after: N)` on the
other node all along gets every event after N once, in order, and so does a client of the stream (GET /events) of the
killed node, which connects to the other with `Last-Event-ID` when its node dies."""
import json
import threading
import time

import pytest
import requests

from service.client.events import messages
from support.over_http import upsert_over_http
from support.servers import SHIPPED_WORKER_CLASS
from support.tokens import HEADERS

THREADED = ("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4")
EVENTS = """query($after: Int) { latestEventSeq events(after: $after, first: 500) {
    seq type id revision change name process { name } } }"""
WRITERS_PER_NODE = 3


def events_after(url, after):
    """(latestEventSeq, the events after `after`, at most 500) as the node answers."""
    response = requests.post(url + "/graph/v2", headers=HEADERS, timeout=30,
                             json={"query": EVENTS, "variables": {"after": after}})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "errors" not in answer, answer
    return answer["data"]["latestEventSeq"], answer["data"]["events"]


def without_object(event):
    """The event without its object, which is null once the history has pruned that revision."""
    return {key: value for key, value in event.items() if key != "process"}


def every_event(url):
    found = []
    while True:
        _latest, page = events_after(url, found[-1]["seq"] if found else 0)
        if not page:
            return found
        found += page


class Writers:
    """Threads that each write processes to one org through one node until stopped or their node dies: alternately a
    process of their own and one every writer shares, each write with a name of its own. `acknowledged` holds the
    names the service answered for; `in_flight` those sent without an answer (their node died)."""

    def __init__(self, url, label):
        self.acknowledged, self.in_flight, self.failures = set(), set(), []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(url, f"{label}_{number}"))
                         for number in range(WRITERS_PER_NODE)]
        for thread in self._threads:
            thread.start()

    def _run(self, url, writer):
        number = 0
        while not self._stop.is_set():
            identifier = ("shared_line", f"line_{writer}")[number % 2]
            name = f"{writer}-{number}"
            try:
                result = upsert_over_http(url, identifier, name)
            except requests.RequestException:
                with self._lock:
                    self.in_flight.add(name)
                return  # the node is gone
            with self._lock:
                if result in ("CREATED", "UPDATED"):
                    self.acknowledged.add(name)
                else:
                    self.failures.append((name, result))
            number += 1

    def count(self):
        with self._lock:
            return len(self.acknowledged)

    def stop(self):
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in self._threads)
        assert not self.failures, self.failures


class Follower:
    """A client of one node that reads `events(after: <the last seq it got>)` over and over until stopped."""

    def __init__(self, url, after):
        self.received, self.failures = [], []
        self._after = after
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url,))
        self._thread.start()

    def _run(self, url):
        try:
            while True:
                stopping = self._stop.is_set()  # one more read after the stop: it gets what committed last
                _latest, page = events_after(url, self._after)
                self.received += page
                if page:
                    self._after = page[-1]["seq"]
                elif stopping:
                    return
                else:
                    time.sleep(0.02)
        except BaseException as error:  # an assertion in a thread must fail the test
            self.failures.append(error)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=60)
        assert not self.failures, self.failures


class StreamFollower:
    """A client of the stream of one node that, when that node's connection breaks, connects to the next node with
    `Last-Event-ID`, as an SSE client behind a load balancer does; it records every event it gets and each reconnect."""

    def __init__(self, urls, after):
        self.received, self.failures, self.connections = [], [], []
        self._last = after
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(urls,))
        self._thread.start()

    def _run(self, urls):
        try:
            for url in urls:
                self.connections.append(url)
                if self._read(url):
                    return
            raise AssertionError("every node's stream broke")
        except BaseException as error:  # an assertion in a thread must fail the test
            self.failures.append(error)

    def _read(self, url):
        """Follow `url` from the last seq; True when stopped, False when the connection broke."""
        headers = {**HEADERS, "Last-Event-ID": str(self._last)}
        try:
            with requests.get(f"{url}/events", headers=headers, stream=True, timeout=(10, 30)) as response:
                assert response.status_code == 200, response.text
                self._response = response
                for message in messages(response.iter_lines(decode_unicode=True)):
                    if "data" in message and message["event"] != "reset":
                        event = json.loads(message["data"])["data"]
                        self.received.append(event)
                        self._last = event["seq"]
        except (requests.RequestException, AttributeError):  # AttributeError: urllib3, its response closed under it
            pass
        return self._stop.is_set()

    def stop(self, latest):
        """Stop (hang up) once every event up to `latest` has come."""
        wait_for(lambda: self._last >= latest or self.failures, seconds=30)
        self._stop.set()
        self._response.close()
        self._thread.join(timeout=60)
        assert not self.failures, self.failures


def wait_for(condition, seconds=60):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the writers did not get that far"
        time.sleep(0.05)


@pytest.fixture
def settings(shared_backend):
    return shared_backend.settings()


def start_node(start_gunicorn, data_dir, shared_backend, settings):
    return start_gunicorn(data_dir, workers=2, extra_args=THREADED, backend=shared_backend, settings=settings)


def test_no_event_is_lost_or_doubled_when_a_node_is_killed_mid_burst(tmp_path, shared_backend, settings,
                                                                     start_gunicorn):
    doomed, survivor = (start_node(start_gunicorn, tmp_path / name, shared_backend, settings)
                        for name in ("doomed", "survivor"))
    on_doomed, on_survivor = Writers(doomed.url, "a"), Writers(survivor.url, "b")
    wait_for(lambda: on_doomed.count() + on_survivor.count() >= 30)
    after, _ = events_after(survivor.url, 0)
    follower = Follower(survivor.url, after)
    streamed = StreamFollower([doomed.url, survivor.url], after)
    on_restarted = None
    try:
        wait_for(lambda: on_doomed.count() >= 60)
        doomed.kill()
        restarted = start_node(start_gunicorn, doomed.data_dir, shared_backend, settings)
        on_restarted = Writers(restarted.url, "c")
        wait_for(lambda: on_restarted.count() >= 30)
    finally:
        for writers in (on_doomed, on_survivor, on_restarted):
            if writers is not None:
                writers.stop()
        follower.stop()
    assert on_doomed.in_flight, "the node was killed between writes: kill it mid-burst"

    events = every_event(restarted.url)
    latest, _ = events_after(survivor.url, 0)
    streamed.stop(latest)
    assert [event["seq"] for event in events] == list(range(1, latest + 1))
    names = [event["name"] for event in events]
    assert len(set(names)) == len(names)  # no change has two events
    acknowledged = on_doomed.acknowledged | on_survivor.acknowledged | on_restarted.acknowledged
    assert acknowledged <= set(names)  # every acknowledged change has its event
    assert set(names) - acknowledged <= on_doomed.in_flight  # and any other is a change its killed node committed
    for identifier in {event["id"] for event in events}:  # each object's events are its revisions, in commit order
        assert [event["revision"] for event in events if event["id"] == identifier] == list(
            range(1, 1 + sum(event["id"] == identifier for event in events)))
    assert all(event["process"] is None or event["process"]["name"] == event["name"] for event in events)

    # The follower on the other node got every event after the seq it started from, once, in order.
    assert [event["seq"] for event in follower.received] == list(range(after + 1, latest + 1))
    assert [without_object(event) for event in follower.received] == [without_object(event) for event in events[after:]]

    # The stream's client of the killed node went on from the other node where it left off: every event once, in order.
    assert streamed.connections == [doomed.url, survivor.url]
    assert [event["seq"] for event in streamed.received] == list(range(after + 1, latest + 1))
    assert [event["name"] for event in streamed.received] == [event["name"] for event in events[after:]]
