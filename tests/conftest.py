"""Shared fixtures: an isolated app per test, and a real gunicorn server for end-to-end tests."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import requests

from service import create_app

TOKEN = "test-token-default"
OTHER_TOKEN = "test-token-other"
TOKENS = f"default:{TOKEN},other:{OTHER_TOKEN}"


@pytest.fixture
def app(tmp_path):
    return create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "TESTING": True})


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def auth():
    return {"x-service-api-org": TOKEN}


@pytest.fixture
def other_auth():
    return {"x-service-api-org": OTHER_TOKEN}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class GunicornServer:
    """Real gunicorn on a free 127.0.0.1 port with its own data directory."""

    def __init__(self, data_dir, workers=2, env=None, extra_args=()):
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = dict(os.environ, WIS_DATA_DIR=str(data_dir), WIS_API_TOKENS=TOKENS)
        environment.update(env or {})
        # A file, not a pipe: a pipe nobody reads fills up and blocks a chatty server.
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers),
             "--timeout", "120", *extra_args, "service:create_app()"],
            env=environment, stdout=subprocess.DEVNULL, stderr=self._stderr,
        )
        self._wait_ready()

    def _wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("gunicorn exited: " + self.stderr_text)
            try:
                # Once connected, wait for the answer: a probe given up and sent again is served (and counted,
                # and logged) twice, which tests of metrics and access logs would see.
                if requests.get(self.url + "/healthz", timeout=(1, max(1, deadline - time.monotonic()))).status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):  # a busy machine may be slow to answer
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("gunicorn did not become ready")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @property
    def stderr_text(self):
        """What the server has written to stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")


@pytest.fixture
def gunicorn_server(tmp_path):
    server = GunicornServer(tmp_path / "gunicorn-data")
    yield server
    server.stop()
