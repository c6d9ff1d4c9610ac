"""The gunicorn configuration: metrics summed over worker processes, JSON access logs without secrets."""
import json
import socket
import time

import pytest
import requests

from conftest import TOKEN, GunicornServer
from test_ops_observability import metric_value

CONFIG = ("-c", "python:service.gunicorn_config")


def healthz_count(server):
    text = requests.get(server.url + "/metrics", timeout=5).text
    return metric_value(text, "wis_http_requests_total", method="GET", route="/healthz", status="200")


def wait_for_healthz_count(server, expected, attempts=50):
    """Scrape until the count reaches `expected` (bounded); return the last value seen."""
    count = healthz_count(server)
    for _ in range(attempts):
        if count >= expected:
            break
        time.sleep(0.1)
        count = healthz_count(server)
    return count


def read_json_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def logged_server(tmp_path):
    """Gunicorn with the service's config (gthread, 2 workers), access and error logs in files."""
    logs = tmp_path / "access.log", tmp_path / "error.log"
    server = GunicornServer(tmp_path / "data", workers=2, extra_args=(
        *CONFIG, "--access-logfile", str(logs[0]), "--error-logfile", str(logs[1])))
    yield server, logs
    server.stop()


def test_metrics_are_summed_over_both_workers(tmp_path):
    # Sync workers make the split certain: the worker that accepts a half-sent request is stuck reading
    # it, so the other worker serves every request that follows. (More than one thread would make
    # gunicorn switch to gthread.)
    access_log = tmp_path / "access.log"
    server = GunicornServer(tmp_path / "data", workers=2,
                            extra_args=(*CONFIG, "--worker-class", "sync", "--threads", "1",
                                        "--access-logfile", str(access_log)))
    try:
        stalled = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        stalled.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        requests_sent = 10
        for _ in range(requests_sent):
            assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
        stalled.sendall(b"Connection: close\r\n\r\n")
        assert stalled.recv(1024).startswith(b"HTTP/1.1 200")
        stalled.close()

        # Plus one for the stalled request and one for GunicornServer's readiness probe.
        assert wait_for_healthz_count(server, requests_sent + 2) == requests_sent + 2
    finally:
        server.stop()
    served_by = {line["process"] for line in read_json_lines(access_log) if line["path"] == "/healthz"}
    assert len(served_by) == 2


def test_access_log_is_json_with_request_id_and_never_the_token(logged_server):
    server, (access_log, error_log) = logged_server
    headers = {"x-service-api-org": TOKEN, "X-Request-Id": "ops-check-1"}
    requests.get(server.url + "/healthz", headers=headers, timeout=5)
    requests.get(server.url + f"/no-such-route?token={TOKEN}", headers=headers, timeout=5)
    requests.get(server.url + "/healthz", timeout=5)
    server.stop()

    lines = read_json_lines(access_log)[1:]  # after GunicornServer's readiness probe
    assert [(line["method"], line["path"], line["status"]) for line in lines] == [
        ("GET", "/healthz", 200), ("GET", "/no-such-route", 404), ("GET", "/healthz", 200)]
    assert [line["request_id"] for line in lines[:2]] == ["ops-check-1", "ops-check-1"]
    assert len(lines[2]["request_id"]) == 32
    assert all(line["duration_ms"] >= 0 for line in lines)
    read_json_lines(error_log)  # every line of the error log is JSON too
    for log in (access_log, error_log):
        assert TOKEN not in log.read_text()


def test_metrics_files_of_a_previous_run_are_wiped_at_start(tmp_path):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    for expected in (3, 2):
        server = GunicornServer(tmp_path / "data", workers=2, env=env, extra_args=CONFIG)
        try:
            # The readiness probe of GunicornServer already counted one /healthz.
            for _ in range(expected - 1):
                requests.get(server.url + "/healthz", timeout=5)
            assert wait_for_healthz_count(server, expected) == expected
        finally:
            server.stop()
