"""Fault injection (POST/DELETE /_test/faults): status, delay, dropped responses, reset connections and faults that fire
by probability (seeded or not), on werkzeug and gunicorn."""
import contextlib
import time

import pytest
import requests

from service.storage.testmode import fault_paths
from service.storage.testmode import faults as faults_module
from service.storage.testmode.faults import FaultStore

from service.testing import ServiceSession, ThreadedServer, recorder
from support.media import SMALL_PNG
from support.over_http import upload_png
from support.tokens import TOKEN


@pytest.fixture(scope="module")
def server():
    with ThreadedServer() as server:
        yield server


@pytest.fixture
def session(server):
    server.reset()
    with server.session() as session:
        yield session


def add_fault(session, **fault):
    response = session.post("/_test/faults", json=fault, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()


def stored_media(session):
    return session.get("/_test/objects", timeout=10).json()["orgs"].get("default", {}).get("media", [])


def test_status_fault_answers_the_next_matching_requests_without_doing_the_work(session):
    add_fault(session, method="post", path="^/uploads$", status=503, error="maintenance", times=2)

    for _ in range(2):
        response = session.post("/uploads", files={"file": ("a.png", SMALL_PNG)}, data={"destinationId": "stepImage"})
        assert response.status_code == 503
        assert response.json() == {"error": "maintenance"}
    assert stored_media(session) == []
    upload_png(session)  # the fault is used up


def test_status_fault_only_hits_matching_method_and_path(session):
    add_fault(session, method="GET", path="^/api/v1/images/", status=500)
    assert session.get("/healthz").status_code == 200
    path = upload_png(session)
    assert session.get(path).status_code == 500
    assert session.get(path).content == SMALL_PNG


def test_delay_fault_lets_the_request_succeed(session):
    add_fault(session, path="^/uploads$", delay=0.2)
    path = upload_png(session)
    assert session.get("/_test/faults").json() == {"faults": []}
    assert stored_media(session) == [path] and session.get(path).content == SMALL_PNG


def test_dropped_response_after_the_work_is_done(session):
    add_fault(session, method="POST", path="^/uploads$", drop=True)
    with pytest.raises(requests.ConnectionError):
        session.post("/uploads", files={"file": ("a.png", SMALL_PNG)}, data={"destinationId": "stepImage"}, timeout=10)
    [path] = stored_media(session)
    assert session.get(path).content == SMALL_PNG


def test_delete_removes_pending_faults(session):
    add_fault(session, path="^/healthz$", status=503)
    assert session.delete("/_test/faults").status_code == 204
    assert session.get("/healthz").status_code == 200


def test_test_endpoints_are_never_faulted(session):
    add_fault(session, status=503)  # matches every path
    assert session.get("/_test/objects").status_code == 200
    assert session.get("/healthz").status_code == 503


@pytest.mark.parametrize("fault, field", [
    ({}, "request body"), ({"status": 503, "delay": 1}, "request body"), ({"status": 200}, "status"),
    ({"delay": 0}, "delay"), ({"delay": 61}, "delay"), ({"drop": False}, "drop"),
    ({"path": "(", "status": 500}, "path"), ({"status": 500, "times": 0}, "times"),
    ({"status": 500, "color": "red"}, "color"), ({"delay": 1, "error": "x"}, "error"),
    ({"status": 503, "rate": 1.5}, "rate"), ({"status": 503, "rate": -0.1}, "rate"),
    ({"status": 503, "rate": "0.5"}, "rate"), ({"status": 503, "rate": True}, "rate"),
    ({"status": 503, "rate": None}, "rate"), ({"status": 503, "rate": [0.5]}, "rate"),
    ({"reset": False}, "reset"), ({"reset": "yes please"}, "reset"), ({"reset": True, "drop": True}, "request body"),
    ({"path": "(a+)+$", "status": 500}, "path"), ({"path": ".*a.*a.*b", "status": 500}, "path"),
    ({"path": r"(a)\1", "status": 500}, "path"), ({"path": "x" * 1001, "status": 500}, "path"),
])
def test_malformed_faults_are_400_naming_the_field_and_store_nothing(session, fault, field):
    response = session.post("/_test/faults", json=fault)
    assert response.status_code == 400
    assert response.json()["error"].startswith(field)
    assert session.get("/_test/faults").json() == {"faults": []}


@pytest.mark.parametrize("pattern, why", [
    ("a{4294967295}", "the repetition number is too large"), ("a{1,4294967296}", "the repetition number is too large"),
    ("(?a)(?u)x", "ASCII and UNICODE flags are incompatible"),
    ("(" * 500 + ")" * 500, "its groups nest too deeply for Python's re to parse"),
    # A FutureWarning of re, which this suite's warnings filter (as many an integrator's) makes an error.
    ("[[a]", "Possible nested set at position 1"),
])
def test_a_path_re_refuses_with_another_exception_than_re_error_is_400_naming_path(session, pattern, why):
    """re raises OverflowError, ValueError or RecursionError for these, not re.error: each was a 500."""
    response = session.post("/_test/faults", json={"path": pattern, "status": 500})
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(f"path: not a regular expression: {why}")
    assert session.get("/_test/faults").json() == {"faults": []}
    add_fault(session, path="^/healthz$", status=503)  # the server is fine
    assert session.get("/healthz").status_code == 503


@pytest.mark.parametrize("pattern, why", [
    ("(a+)+$", "a group repeated a variable number of times ((a+)+, (ab)*, (x|y){1,5}) may backtrack without bound"),
    ("(x|y)*", "a group repeated a variable number of times"),
    (".*a.*a.*b", "its alternatives and quantifiers give more than 10,000,000 ways to match at one position"),
    ("/uploads/[0-9a-f]+/x", "its search may backtrack through about 13,026,013 steps on a path of 1000 characters"),
    ("(a|a){30}x", "a group of alternatives or quantifiers repeated 30 times gives more than 10,000,000 ways"),
    ("x(?=y)", "back-references, lookarounds"),
])
def test_a_path_whose_search_could_backtrack_without_bound_is_refused_with_why(session, pattern, why):
    """`(a+)+$` searched in `/aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!` took 6 s, under the lock every worker waits for."""
    response = session.post("/_test/faults", json={"path": pattern, "status": 503})
    assert response.status_code == 400
    assert response.json()["error"].startswith(f"path: not accepted: {why}")
    assert session.get("/_test/faults").json() == {"faults": []}


@pytest.mark.parametrize("pattern", [".*", "", "^/uploads$", "^/uploads/", "/graph", "^/healthz$", "^.*a.*b",
                                     "^/api/v1/(images|videos)/[^/]+\\.(png|jpg)$", "^/uploads/[0-9a-f]+/x", "a{999}b"])
def test_a_path_whose_search_is_bounded_is_accepted(session, pattern):
    add_fault(session, path=pattern, status=503)
    assert session.get("/_test/faults").json()["faults"][0]["path"] == pattern


def test_a_path_is_searched_in_the_first_1000_characters_of_the_request_path():
    """What the bound counts: a longer path (the embedded server takes request lines up to 64 KB) costs no more."""
    assert fault_paths.matches("x$", "/" + "a" * 998 + "x" + "a")
    assert not fault_paths.matches("x", "/" + "a" * 999 + "x")


def test_the_faults_lock_is_not_held_while_a_path_is_searched(tmp_path, monkeypatch):
    store = FaultStore(tmp_path)
    held, searched = [], []
    real_lock, real_matches = faults_module.lock, faults_module.matches

    @contextlib.contextmanager
    def watched_lock(path):
        with real_lock(path):
            held.append(path)
            try:
                yield
            finally:
                held.pop()

    def watched_matches(pattern, path):
        searched.append((pattern, bool(held)))
        return real_matches(pattern, path)

    monkeypatch.setattr(faults_module, "lock", watched_lock)
    monkeypatch.setattr(faults_module, "matches", watched_matches)
    for pattern in ("^/uploads$", "^/healthz$"):
        store.add({"id": pattern, "method": None, "path": pattern, "times": 2, "status": 503})
    assert store.take("GET", "/healthz")["id"] == "^/healthz$"
    assert store.take("GET", "/nothing") is None
    assert searched == [(pattern, False) for pattern in ("^/uploads$", "^/healthz$")] * 2
    assert [(fault["id"], fault["times"], fault["matched"]) for fault in store.list()] == [
        ("^/uploads$", 2, 0), ("^/healthz$", 1, 1)]


def test_at_most_100_faults_are_pending(session, monkeypatch):
    assert faults_module.MAX_FAULTS == 100
    monkeypatch.setattr(faults_module, "MAX_FAULTS", 5)  # the embedded server runs in this process
    for number in range(5):
        add_fault(session, path=f"^/nothing/{number}$", status=503)
    response = session.post("/_test/faults", json={"path": "^/healthz$", "status": 503})
    assert response.status_code == 400
    assert response.json()["error"] == ("5 faults are pending, the most a server keeps (each is searched in every "
                                        "request); DELETE /_test/faults clears them")
    assert len(session.get("/_test/faults").json()["faults"]) == 5
    assert session.get("/healthz").status_code == 200


def healthz_statuses(url, count):
    """The statuses of `count` GET /healthz, each on a new connection (so every worker of a server answers some)."""
    return [requests.get(url + "/healthz", timeout=10).status_code for _ in range(count)]


def test_a_rate_of_0_never_fires_and_a_rate_of_1_always_does(server, session):
    add_fault(session, path="^/healthz$", status=503, rate=0, times=5)
    assert healthz_statuses(server.url, 10) == [200] * 10
    [fault] = session.get("/_test/faults").json()["faults"]
    assert (fault["matched"], fault["times"]) == (10, 5)
    session.delete("/_test/faults")
    add_fault(session, path="^/healthz$", status=503, rate=1, times=3)
    assert healthz_statuses(server.url, 5) == [503] * 3 + [200] * 2


def test_a_rate_fires_on_about_that_share_of_the_matching_requests(server, session):
    add_fault(session, path="^/healthz$", status=503, rate=0.5, times=10_000)
    statuses = healthz_statuses(server.url, 200)
    # Binomial(200, 0.5) falls outside 50..150 with a probability near 1e-12.
    assert 50 <= statuses.count(503) <= 150 and statuses.count(503) + statuses.count(200) == 200
    assert session.get("/_test/faults").json()["faults"][0]["matched"] == 200


SEEDED_FAULT = {"path": "^/healthz$", "status": 503, "rate": 0.5, "times": 10_000}


def seeded_pattern(url, token=TOKEN):
    """The statuses of 30 /healthz under SEEDED_FAULT, added to a server whose seed is 3."""
    with ServiceSession(url, token) as session:
        session.post("/_test/reset").raise_for_status()
        add_fault(session, **SEEDED_FAULT)
        return healthz_statuses(url, 30)


def test_with_a_seed_the_draws_of_a_rate_are_the_same_on_every_run():
    with ThreadedServer(token=TOKEN, seed=3) as first, ThreadedServer(token=TOKEN, seed=3) as second:
        pattern = seeded_pattern(first.url)
        assert 503 in pattern and 200 in pattern
        assert seeded_pattern(second.url) == pattern
        assert seeded_pattern(first.url) == pattern  # after a reset, the fault added again draws the same
    with ThreadedServer(token=TOKEN, seed=4) as other:
        assert seeded_pattern(other.url) != pattern


def test_with_a_seed_every_gunicorn_worker_draws_the_same(tmp_path, backend, start_gunicorn):
    with ThreadedServer(token=TOKEN, seed=3) as reference:
        pattern = seeded_pattern(reference.url)
    server = start_gunicorn(tmp_path / "data", workers=2, backend=backend,
                            env={"WIS_TEST_MODE": "1", "WIS_TEST_SEED": "3"})
    try:
        assert seeded_pattern(server.url) == pattern
    finally:
        server.stop()


def test_a_reset_fault_cuts_the_connection_before_any_work(session):
    fault = add_fault(session, method="POST", path="^/uploads$", reset=True)
    with pytest.raises(requests.ConnectionError):
        session.post("/uploads", files={"file": ("a.png", SMALL_PNG)}, data={"destinationId": "stepImage"}, timeout=10)
    assert stored_media(session) == []
    [entry] = session.get("/_test/requests").json()["requests"]
    assert (entry["path"], entry["status"], entry["fault"]) == ("/uploads", None, fault["id"])
    upload_png(session)  # the fault is used up


def test_a_reset_request_is_in_the_journal_before_its_client_sees_the_cut(session, monkeypatch):
    # The journal's entry written slowly: a client asking for the journal as soon as it sees the cut still finds it.
    entries = recorder._entries
    monkeypatch.setattr(recorder, "_entries", lambda response: time.sleep(0.5) or entries(response))
    fault = add_fault(session, method="POST", path="^/uploads$", reset=True)
    with pytest.raises(requests.ConnectionError):
        session.post("/uploads", files={"file": ("a.png", SMALL_PNG)}, data={"destinationId": "stepImage"}, timeout=10)
    [entry] = session.get("/_test/requests").json()["requests"]
    assert (entry["path"], entry["status"], entry["fault"]) == ("/uploads", None, fault["id"])


def test_a_reset_fault_cuts_an_upload_whose_body_is_still_coming(session):
    add_fault(session, method="POST", path="^/uploads$", reset=True)
    body = SMALL_PNG + bytes(8 * 1024 * 1024)
    with pytest.raises(requests.ConnectionError):
        session.post("/uploads", files={"file": ("big.png", body)}, data={"destinationId": "stepImage"}, timeout=30)
    assert stored_media(session) == []


@pytest.mark.parametrize("extra_args", [(), ("-c", "python:service.gunicorn_config")], ids=["sync", "shipped"])
def test_faults_hold_across_gunicorn_workers_and_drop_works_there(tmp_path, extra_args, start_gunicorn):
    server = start_gunicorn(tmp_path / "data", workers=2, env={"WIS_TEST_MODE": "1"}, extra_args=extra_args)
    try:
        with ServiceSession(server.url, TOKEN) as session:
            add_fault(session, path="^/healthz$", status=503, times=3)
            # New connections land on either worker; every one of them sees the same pending fault.
            statuses = [requests.get(server.url + "/healthz", timeout=10).status_code for _ in range(4)]
            assert statuses == [503, 503, 503, 200]

            add_fault(session, method="POST", path="^/uploads$", drop=True)
            with pytest.raises(requests.ConnectionError):
                session.post("/uploads", files={"file": ("a.png", SMALL_PNG)}, data={"destinationId": "stepImage"},
                             timeout=10)
            [path] = stored_media(session)
            assert session.get(path).content == SMALL_PNG

            add_fault(session, method="POST", path="^/uploads$", reset=True)
            with pytest.raises(requests.ConnectionError):
                session.post("/uploads", files={"file": ("b.png", SMALL_PNG)}, data={"destinationId": "stepImage"},
                             timeout=10)
            assert stored_media(session) == [path]
    finally:
        server.stop()
