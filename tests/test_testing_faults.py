"""Fault injection (POST/DELETE /_test/faults): status, delay and dropped responses, on werkzeug and gunicorn."""
import pytest
import requests

from service.testing import ServiceSession, ThreadedServer
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
])
def test_malformed_faults_are_400_naming_the_field(session, fault, field):
    response = session.post("/_test/faults", json=fault)
    assert response.status_code == 400
    assert response.json()["error"].startswith(field)


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
    finally:
        server.stop()
