"""CONTRACT 13 during the incidents an operator meets, on real engines: a node on a PostgreSQL of this module's own
(stopped for 20 s and then for 70 s, and its max_connections filled by other clients), with upserts sent all along.

While the database is known to be down every request is refused within 1 s (503 JSON or SERVICE_UNAVAILABLE), /readyz
says so and /metrics still answers, counting the refusals; within 5 s of its return everything is served again, whatever the outage's
length. A client following the event stream (Client.follow) all along gets, once the database is back, every event
committed after it started, once and in order (CONTRACT 14: it connects again with Last-Event-ID). A database whose max_connections other clients hold is not an outage: the node keeps serving and stays ready.

The outages are long because the issue measured them so (the pool's backoff made the 70 s one cost 37-47 s more):
they share one test, one server and one node, so the suite pays for them once."""
import json
import threading
import time

import psycopg
import pytest
import requests

from service.client import Client
from service.storage.shared.database import Database
from support.backends import SharedBackend
from support.engines import PostgresServer
from support.metrics import metric_value
from support.servers import SHIPPED_WORKER_CLASS
from support.tokens import HEADERS, TOKEN

pytestmark = pytest.mark.waits

GRAPH = "/graph/v2"
STATION_CREATE = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"
# CONTRACT 13's promises.
REFUSED_WITHIN_SECONDS = 1.0
RECOVERED_WITHIN_SECONDS = 5.0
# Connections the node may hold: 2 workers x the pool size below, and the database's limit for everyone.
POOL_SIZE = 3
MAX_CONNECTIONS = 20


@pytest.fixture(scope="module")
def own_postgres(postgres):
    """A PostgreSQL for this module alone: the test stops it and fills its connections. (After the session's
    `postgres`, which fails saying how to install PostgreSQL when it is missing, and marks the tests' tier.)"""
    server = PostgresServer(max_connections=MAX_CONNECTIONS)
    yield server
    server.remove()


@pytest.fixture
def node(tmp_path, own_postgres, seaweed, start_gunicorn):
    backend = SharedBackend(own_postgres, seaweed.create_bucket(f"wis-incidents-{int(time.time() * 1000)}"))
    return start_gunicorn(tmp_path / "data", workers=2, backend=backend,
                          env={**seaweed.env(), "WIS_DB_POOL_SIZE": str(POOL_SIZE), "WIS_NODE_NAME": "incident-node"},
                          extra_args=("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4"))


def upsert(url, number):
    """(started, seconds, outcome): outcome "ok", "refused" (503 JSON or SERVICE_UNAVAILABLE) or what else came."""
    started = time.monotonic()
    try:
        response = requests.post(url + GRAPH, headers=HEADERS, timeout=30, json={
            "query": STATION_CREATE, "variables": {"input": {"station": {"id": f"station_{number % 50}", "name": "x"}}}})
        answer = response.json()
        if response.status_code == 200 and answer.get("data") and not answer.get("errors"):
            outcome = "ok"
        elif [error["extensions"]["code"] for error in answer.get("errors") or ()] == ["SERVICE_UNAVAILABLE"]:
            outcome = "refused"
        else:
            outcome = f"{response.status_code} {response.text[:200]}"
    except (requests.RequestException, ValueError) as error:
        outcome = repr(error)
    return started, time.monotonic() - started, outcome


class Traffic:
    """Upserts sent one after another from two threads until stopped, each recorded."""

    def __init__(self, url):
        self.url = url
        self.samples = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(offset,)) for offset in (0, 1)]
        for thread in self._threads:
            thread.start()

    def _run(self, offset):
        number = offset
        while not self._stop.is_set():
            self.samples.append(upsert(self.url, number))
            number += 2
            time.sleep(0.05)

    def between(self, start, end):
        return [sample for sample in list(self.samples) if start <= sample[0] < end]

    def stop(self):
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def readiness(url):
    response = requests.get(url + "/readyz", timeout=30)
    return response.status_code, response.json()


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} not within {timeout} s"
        time.sleep(0.1)
    return time.monotonic()


def outage(url, postgres, traffic, seconds):
    """Stop the database for `seconds` under traffic; return (seconds until known down, the slowest refusal once
    known, seconds from its return until every request succeeds), asserting on the way what CONTRACT 13 says."""
    stopped = time.monotonic()
    postgres.stop()
    known = wait_until(lambda: readiness(url)[0] == 503, 10, "/readyz saying the database is down")
    status, answer = readiness(url)
    assert status == 503 and answer["checks"]["database"].startswith("down: "), answer
    assert answer["error"].startswith("not ready: database (") and answer["checks"]["objects"] == "ok", answer
    # Monitoring sees it: /metrics answers without the database, with the refusals counted.
    time.sleep(2)
    scraped = requests.get(url + "/metrics", timeout=30)
    assert scraped.status_code == 200, scraped.text[:300]
    assert metric_value(scraped.text, "wis_database_up") == 0
    assert metric_value(scraped.text, "wis_engine_errors_total", engine="database", kind="down") > 0
    assert metric_value(scraped.text, "wis_graphql_errors_total", code="SERVICE_UNAVAILABLE") > 0
    time.sleep(max(0.0, stopped + seconds - time.monotonic()))
    # A request sent while PostgreSQL starts may already be served: "during" ends when the start begins.
    restarting = time.monotonic()
    postgres.start()
    back = time.monotonic()
    during = traffic.between(known + 1.0, restarting)
    assert during and {outcome for _, _, outcome in during} == {"refused"}, during[:5]
    slowest_refusal = max(duration for _, duration, _ in during)
    assert slowest_refusal < REFUSED_WITHIN_SECONDS, sorted(duration for _, duration, _ in during)[-5:]
    # Served again: from some moment on, every request succeeds (wait a little past 5 s to see it).
    time.sleep(RECOVERED_WITHIN_SECONDS + 2)
    after = traffic.between(back, time.monotonic())
    failed = [sample for sample in after if sample[2] != "ok"]
    recovered = (failed[-1][0] + failed[-1][1] - back) if failed else 0.0
    assert recovered < RECOVERED_WITHIN_SECONDS, failed[-5:]
    assert readiness(url)[0] == 200
    scraped = requests.get(url + "/metrics", timeout=30).text
    assert metric_value(scraped, "wis_database_up") == 1
    assert metric_value(scraped, "wis_database_pool_connections", state="open") >= 1
    return round(known - stopped, 2), round(slowest_refusal, 3), round(recovered, 2)


class StreamFollower:
    """Client.follow() in a thread from the org's latest event, until it gets the station `the_end`."""

    def __init__(self, url):
        self.client = Client(url, TOKEN, timeout=30)
        self.start = self.client.latest_event_seq()
        self.received, self.failures = [], []
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self):
        try:
            for envelope in self.client.follow(after=self.start):
                self.received.append((envelope["type"], envelope["data"].get("seq"), envelope["data"].get("id")))
                if envelope["data"].get("id") == "the_end":
                    return
        except BaseException as error:  # an assertion in a thread must fail the test
            self.failures.append(error)

    def end(self, url):
        """Commit `the_end` and wait for the follower to get it; its events, and the feed's after its start."""
        assert upsert_station(url, "the_end") == "ok"
        self._thread.join(60)
        assert not self._thread.is_alive() and not self.failures, self.failures
        feed = self.client.events(after=self.start, first=1000)
        self.client.close()
        return self.received, [(event["type"], event["seq"], event["id"]) for event in feed]


def upsert_station(url, identifier):
    response = requests.post(url + GRAPH, headers=HEADERS, timeout=30, json={
        "query": STATION_CREATE, "variables": {"input": {"station": {"id": identifier, "name": identifier}}}})
    return "ok" if response.status_code == 200 and "errors" not in response.json() else response.text


def test_database_outages_of_20_and_70_seconds_fail_fast_and_recover_within_5_seconds(node, own_postgres):
    url = node.url
    traffic = Traffic(url)
    follower = StreamFollower(url)
    try:
        wait_until(lambda: len(traffic.samples) >= 10, 30, "ten upserts")
        assert {outcome for _, _, outcome in traffic.samples} == {"ok"}, traffic.samples[:5]
        figures = {}
        for length in (20, 70):
            figures[length] = outage(url, own_postgres, traffic, length)
            assert upsert_station(url, f"after_{length}_s") == "ok"
    finally:
        traffic.stop()
        own_postgres.start()
    print("\n(known down after s, slowest refusal s, recovered after s) by outage length:", figures)
    received, feed = follower.end(url)
    assert received == feed and {"after_20_s", "after_70_s", "the_end"} <= {event[2] for event in received}
    # The log stayed JSON, one object a line (the pool's warnings included), and said each outage once per worker,
    # not once per refused request. (Lines starting with "[" are gunicorn's own: this test server does not load
    # service.gunicorn_config, whose logger writes JSON too.)
    lines = [json.loads(line) for line in node.stderr_text.splitlines() if line.strip() and not line.startswith("[")]
    down = [line for line in lines if line["message"].startswith("the database (PostgreSQL) is unreachable")]
    assert 2 <= len(down) <= 2 * 2, [line["message"] for line in down]
    assert all(line["levelname"] == "ERROR" and line["name"] == "service.storage.shared.circuit" for line in down)


def test_max_connections_held_by_others_is_no_outage(node, own_postgres):
    url = node.url
    # Both workers have served (and so hold a pooled connection) before the others come.
    assert {upsert(url, number)[2] for number in range(30)} == {"ok"}
    others = []
    try:
        # Other clients take every connection the server will give.
        with pytest.raises(psycopg.OperationalError, match="too many clients|remaining connection slots"):
            while len(others) < 2 * MAX_CONNECTIONS:
                others.append(psycopg.connect(own_postgres.url(), connect_timeout=5))
        outcomes = [upsert(url, number)[2] for number in range(40)]
        probes = [readiness(url) for _ in range(10)]
    finally:
        for connection in others:
            connection.close()
    assert set(outcomes) == {"ok"}, outcomes
    assert {status for status, _ in probes} == {200}, probes
    assert all(answer["checks"]["database"] == "ok" for _, answer in probes), probes


def test_a_full_server_is_up_for_the_circuits_probe(own_postgres):
    """The circuit's probe (run by its watcher after any failed database call) connects anew: a server that answers
    "too many clients" is up, so the pool is kept; a stopped one is down."""
    database = Database(own_postgres.new_database())
    others = []
    try:
        with pytest.raises(psycopg.OperationalError, match="too many clients|remaining connection slots"):
            while len(others) < 2 * MAX_CONNECTIONS:
                others.append(psycopg.connect(own_postgres.url(), connect_timeout=5))
        database._probe()
    finally:
        for connection in others:
            connection.close()
    own_postgres.stop()
    try:
        with pytest.raises(psycopg.OperationalError):
            database._probe()
    finally:
        own_postgres.start()
