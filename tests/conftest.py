"""Shared fixtures: an isolated app per test, a real gunicorn server for end-to-end tests, and a real browser
(the system's headless Chromium, driven by Playwright) with a server of static pages on an origin of their own."""
import mimetypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import requests
from playwright.sync_api import sync_playwright
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

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
                # A refused connection fails at once; an accepted probe is waited for, not sent again, so tests
                # that count requests see exactly one /healthz from here even on a busy machine.
                if requests.get(self.url + "/healthz", timeout=(1, 30)).status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):
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


# -- a real browser ---------------------------------------------------------------------------------
# Chromium comes from the system (`apt-get install -y chromium`, or WIS_CHROMIUM=<path>); Playwright's own browser
# download is never used. Without Chromium the browser tests fail and say so: they must not pass by not running.

CHROMIUM = os.environ.get("WIS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
BROWSER_WAIT_MS = 20_000  # two shared cores: be patient, never endless


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for the tests of one module."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"the browser tests need Chromium, not found at {CHROMIUM}: install it "
                    "(apt-get install -y chromium) or set WIS_CHROMIUM to its path", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class PageServer:
    """Static files on an origin of their own (a free 127.0.0.1 port): pages that call the service from another
    origin, as a web app does. `files` maps URL paths to files or bytes; more may be added while it runs."""

    def __init__(self, files):
        self.files = dict(files)
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True)
        # The origin, exactly as Chromium sends it in the Origin header.
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"pages {self.url}", daemon=True)
        self._thread.start()

    @Request.application
    def _app(self, request):
        content = self.files.get(request.path)
        if content is None:
            return Response("not found", status=404, mimetype="text/plain")
        if isinstance(content, Path):
            content_type = mimetypes.guess_type(content.name)[0] or "application/octet-stream"
            content = content.read_bytes()
        else:
            content_type = mimetypes.guess_type(request.path)[0] or "application/octet-stream"
        return Response(content, content_type=content_type, headers={"Cache-Control": "no-store"})

    def stop(self):
        self._server.shutdown()
        self._thread.join(timeout=10)
        self._server.server_close()


@pytest.fixture(scope="module")
def serve_pages():
    """`serve_pages({"/page.html": path})` starts a PageServer; every one started is stopped after the module."""
    servers = []

    def start(files):
        servers.append(PageServer(files))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
