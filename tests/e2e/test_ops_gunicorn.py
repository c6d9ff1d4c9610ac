"""The gunicorn configuration: metrics summed over worker processes, JSON access logs without secrets."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest
import requests

from service.config import load_server_config
from support.metrics import metric_value
from support.ports import free_port
from support.tokens import HEADERS, TOKEN


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
def logged_server(tmp_path, start_gunicorn):
    """Gunicorn with the service's config (threaded workers, 2 of them), access and error logs in files."""
    logs = tmp_path / "access.log", tmp_path / "error.log"
    server = start_gunicorn(tmp_path / "data", workers=2, extra_args=(
        *CONFIG, "--access-logfile", str(logs[0]), "--error-logfile", str(logs[1])))
    return server, logs


def test_metrics_are_summed_over_both_workers(tmp_path, start_gunicorn):
    # Sync workers make the split certain: the worker that accepts a half-sent request is stuck reading
    # it, so the other worker serves every request that follows. (More than one thread would make
    # gunicorn switch to gthread.)
    access_log = tmp_path / "access.log"
    server = start_gunicorn(tmp_path / "data", workers=2,
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
    headers = {**HEADERS, "X-Request-Id": "ops-check-1"}
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


def test_metrics_files_of_a_previous_run_are_wiped_at_start(tmp_path, start_gunicorn):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    for expected in (3, 2):
        server = start_gunicorn(tmp_path / "data", workers=2, env=env, extra_args=CONFIG)
        try:
            # The readiness probe of GunicornServer already counted one /healthz.
            for _ in range(expected - 1):
                requests.get(server.url + "/healthz", timeout=5)
            assert wait_for_healthz_count(server, expected) == expected
        finally:
            server.stop()


def gunicorn_settings(tmp_path, **env):
    """The settings service.gunicorn_config produces under `env`, read in a fresh interpreter."""
    script = ("import json, service.gunicorn_config as c; print(json.dumps({k: getattr(c, k) for k in ("
              "'bind', 'worker_class', 'workers', 'threads', 'worker_connections', 'timeout', 'graceful_timeout', "
              "'keepalive', 'accesslog', 'wsgi_app', 'control_socket_disable')}))")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WIS_") and k != "PORT"}
    environment.update(PROMETHEUS_MULTIPROC_DIR=str(tmp_path), **env)
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True)
    return result.returncode, (json.loads(result.stdout) if result.returncode == 0 else result.stderr)


def test_config_defaults_suit_slow_uploads_on_loopback(tmp_path):
    status, settings = gunicorn_settings(tmp_path)
    assert status == 0
    assert settings["bind"] == ["127.0.0.1:8000"]
    assert settings["worker_class"] == "service.server.worker.ReadAheadWorker"
    assert settings["threads"] >= 2 and settings["workers"] >= 2 and settings["worker_connections"] >= 1000
    assert settings["timeout"] >= 120 and settings["graceful_timeout"] > 0
    assert settings["accesslog"] == "-" and settings["wsgi_app"] == "service:create_app()"
    assert settings["control_socket_disable"] is True


def test_config_reads_the_environment(tmp_path):
    status, settings = gunicorn_settings(
        tmp_path, PORT="5000", WIS_WORKERS="3", WIS_THREADS="8", WIS_TIMEOUT="300", WIS_GRACEFUL_TIMEOUT="90",
        WIS_KEEPALIVE="10", WIS_WORKER_CLASS="sync", WIS_ACCESS_LOG="off")
    assert status == 0
    assert settings["bind"] == ["0.0.0.0:5000"]
    assert [settings[key] for key in ("workers", "threads", "timeout", "graceful_timeout")] == [3, 8, 300, 90]
    assert (settings["keepalive"], settings["worker_class"], settings["accesslog"]) == (10, "sync", None)
    assert gunicorn_settings(tmp_path, PORT="5000", WIS_BIND="127.0.0.1:9000")[1]["bind"] == ["127.0.0.1:9000"]
    assert gunicorn_settings(tmp_path, WIS_WORKER_CONNECTIONS="4000")[1]["worker_connections"] == 4000


def test_the_worker_deadlines_come_from_the_environment():
    # Read by the worker itself (gunicorn has no such settings), through the same parser as gunicorn's.
    assert load_server_config({})["request_start_timeout"] == 30
    assert load_server_config({})["request_body_timeout"] == 60
    assert load_server_config({})["request_body_min_rate"] == 1000
    settings = load_server_config({"WIS_REQUEST_START_TIMEOUT": "2.5", "WIS_REQUEST_BODY_TIMEOUT": "300",
                                   "WIS_REQUEST_BODY_MIN_RATE": "100"})
    assert [settings[key] for key in ("request_start_timeout", "request_body_timeout", "request_body_min_rate")] \
        == [2.5, 300, 100]


@pytest.mark.parametrize("variable, value", [
    ("WIS_REQUEST_START_TIMEOUT", "0"), ("WIS_REQUEST_BODY_TIMEOUT", "-5"), ("WIS_REQUEST_BODY_TIMEOUT", "soon"),
    ("WIS_REQUEST_START_TIMEOUT", "inf"), ("WIS_WORKER_CONNECTIONS", "many"), ("WIS_REQUEST_BODY_MIN_RATE", "0"),
    ("WIS_REQUEST_BODY_MIN_RATE", "1.5"),
])
def test_a_malformed_worker_setting_stops_start_up_naming_it(tmp_path, variable, value):
    status, message = gunicorn_settings(tmp_path, **{variable: value})
    assert status == 1
    assert message.startswith(f"work-instruction service: invalid value for {variable}: {value!r} (")


def test_workers_tune_the_cycle_collector_once_after_start_up(tmp_path):
    # Not per request (that paused it for every thread of the worker), and not in create_app (an embedding
    # process keeps its own settings).
    # The worker is a stand-in holding the app (post_worker_init also starts the app's webhook dispatcher).
    script = ("import gc, json, types, service.gunicorn_config as c; from service import create_app; "
              f"app = create_app({{'DATA_DIR': {str(tmp_path / 'data')!r}, 'API_TOKENS': 'default:abcdefgh12'}}); "
              "worker = types.SimpleNamespace(app=types.SimpleNamespace(wsgi=lambda: app)); "
              "untouched = gc.get_threshold(), gc.get_freeze_count(); c.post_worker_init(worker); "
              "print(json.dumps([untouched, [gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()]]))")
    environment = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    (threshold, frozen), (tuned, frozen_after, enabled) = json.loads(result.stdout)
    assert threshold == [700, 10, 10] and frozen == 0
    assert tuned == [50_000, 10, 10] and frozen_after > 10_000 and enabled


def test_config_refuses_a_malformed_setting_naming_it(tmp_path):
    status, stderr = gunicorn_settings(tmp_path, WIS_WORKERS="many")
    assert status != 0
    assert "invalid value for WIS_WORKERS: 'many'" in stderr


# Apps an integrator may serve with the shipped config, and a request each answers: ours behind werkzeug's ProxyFix, and
# another WSGI app with an `extensions` attribute of its own (Ariadne's GraphQL app has one: None).
OTHER_APPS = {
    "ours wrapped": ("from werkzeug.middleware.proxy_fix import ProxyFix\nfrom service import create_app\n"
                     "app = ProxyFix(create_app())\n",
                     "/graph/v2", {"data": {"webhookSubscriptions": []}}),
    "another app": ("class App:\n    extensions = None\n\n    def __call__(self, environ, start_response):\n"
                    "        start_response('200 OK', [('Content-Type', 'application/json')])\n"
                    "        return [b'{\"data\": \"theirs\"}']\n\n\napp = App()\n",
                    "/", {"data": "theirs"}),
}


@pytest.mark.parametrize("name", sorted(OTHER_APPS))
def test_the_shipped_config_serves_other_wsgi_apps(tmp_path, server_process, name):
    """The shipped gunicorn config around an app create_app did not return: the workers boot (post_worker_init looked
    for a webhook dispatcher on it and failed every boot before; ours starts with its first request), answer, and
    stop cleanly."""
    source, path, answer = OTHER_APPS[name]
    (tmp_path / "wrapped.py").write_text(source)
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WIS_") and k != "PORT"}
    environment.update(WIS_DATA_DIR=str(tmp_path / "data"), WIS_API_TOKENS=f"default:{TOKEN}",
                       PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    process = server_process([sys.executable, "-m", "gunicorn", "-c", "python:service.gunicorn_config", "--bind",
                              f"127.0.0.1:{port}", "--workers", "2", "--chdir", str(tmp_path), "wrapped:app"],
                             env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            response = requests.post(f"http://127.0.0.1:{port}{path}", headers=HEADERS, timeout=10,
                                     json={"query": "{ webhookSubscriptions { subscriptionID } }"})
            break
        except requests.ConnectionError:
            assert process.poll() is None and time.monotonic() < deadline, "the workers did not boot"
            time.sleep(0.1)
    assert response.json() == answer
    process.terminate()
    assert process.wait(timeout=30) == 0
