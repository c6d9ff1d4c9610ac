"""An embeddable test double: the real service on a free 127.0.0.1 port, in a thread of your process.

    with ThreadedServer() as server:
        requests.get(server.url + "/healthz")
        server.session().post("/uploads", json={...})
        server.reset()

Test mode is on (the /_test/ endpoints), the data directory is a fresh temporary one unless given, and
the token is known (`server.token`). No pytest import: any test framework, or none, can use it.
"""
import secrets
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request

import requests
from werkzeug.serving import WSGIRequestHandler, make_server

from service import create_app
from service.interface import TOKEN_HEADER

READY_TIMEOUT = 10


class _QuietHandler(WSGIRequestHandler):
    # One line per request on stderr would drown the output of the test suite that embeds us.
    def log_request(self, *args, **kwargs):
        pass


class ServiceSession(requests.Session):
    """A requests.Session bound to one service: relative paths ('/uploads') go to its base URL, with the token."""

    def __init__(self, base_url, token):
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.headers[TOKEN_HEADER] = token

    def request(self, method, url, *args, **kwargs):
        if url.startswith("/"):
            url = self.base_url + url
        return super().request(method, url, *args, **kwargs)


class ThreadedServer:
    """The service in a background thread (werkzeug, threaded), test mode on; `start()`/`stop()` or `with`."""

    def __init__(self, token=None, data_dir=None, org="default", host="127.0.0.1", port=0, config=None):
        self.token = token or "wis-test-" + secrets.token_urlsafe(16)
        self.org = org
        self._own_data_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="wis-test-data-")
        self.app = create_app({
            "DATA_DIR": str(self.data_dir), "API_TOKENS": f"{org}:{self.token}", "TEST_MODE": True,
            "QUIET_STARTUP": True, **(config or {}),
        })
        self._server = make_server(host, port, self.app, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://{host}:{self._server.server_port}"
        self._thread = None

    @property
    def headers(self):
        """The header that authenticates a request as `self.org`."""
        return {TOKEN_HEADER: self.token}

    def session(self):
        """A new ServiceSession for this server: `server.session().get("/_test/objects")`."""
        return ServiceSession(self.url, self.token)

    def reset(self):
        """Remove every stored document, media file, stream and pending fault."""
        with self.session() as session:
            session.post("/_test/reset", timeout=30).raise_for_status()

    def start(self):
        """Serve in a daemon thread and return once /healthz answers."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, name="wis-test-server", daemon=True)
            self._thread.start()
            self._wait_ready()
        return self

    def _wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the test server at {self.url} did not become ready") from None
                time.sleep(0.05)

    def stop(self):
        """Stop serving, close the socket, and remove the data directory if this object made it."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
        if self._own_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()
