"""An embeddable test double: the real service on a free 127.0.0.1 port, in a thread of your process.

    with ThreadedServer() as server:
        requests.get(server.url + "/healthz")
        server.session().post("/uploads", json={...})
        RequestJournal(server.session()).assert_called("processCreate", ids=["weld_1"], times=1)
        server.reset()
        server.restore("line.tar.gz")       # a snapshot as the whole state; server.snapshot(path) takes one
        server.deliver_due()                # webhook retries now, not on their schedule

Test mode is on (the /_test/ endpoints), the data directory is a fresh temporary one unless given, and
the token is known (`server.token`). `seed=<int>` makes the names the server makes up the same on every run. Webhooks
are delivered by the server itself, and may go to http receivers on 127.0.0.1 (service.testing.webhook_receiver).
No pytest import: any test framework, or none, can use it.
"""
import contextlib
import re
import secrets
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from werkzeug.serving import WSGIRequestHandler, make_server

from service import create_app
from service.interface import MEDIA_PATH_ROOT, TOKEN_HEADER
from service.storage import close_repository
from service.testing.change_log import ChangeLog  # noqa: F401 (the test double's reader of change events)
from service.web import webhooks

READY_TIMEOUT = 10
# A snapshot of hundreds of MB takes seconds to write or read back.
SNAPSHOT_TIMEOUT = 300
POLL_INTERVAL = 0.02
UPLOADS = "/uploads"


class _QuietHandler(WSGIRequestHandler):
    # One line per request on stderr would drown the output of the test suite that embeds us.
    def log_request(self, *args, **kwargs):
        pass


def __getattr__(name):
    # requests takes about a tenth of a second to import, a fifth of the double's start-up: ServiceSession (a
    # requests.Session) is imported when first asked for, by name or by `session()`.
    if name == "ServiceSession":
        from service.testing.session import ServiceSession
        return ServiceSession
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ThreadedServer:
    """The service in a background thread (werkzeug, threaded), test mode on; `start()`/`stop()` or `with`."""

    def __init__(self, token=None, data_dir=None, org="default", host="127.0.0.1", port=0, config=None, seed=None):
        self.token = token or "wis-test-" + secrets.token_urlsafe(16)
        self.org = org
        self._own_data_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="wis-test-data-")
        # LOAD_ON_FIRST_REQUEST: graphql-core, ariadne and the schema are loaded by the first GraphQL request (about
        # 0.3 s), marshmallow by the first request with a body to validate (an upload, a fault: 0.1 s), not before
        # /healthz answers: a suite that sends none never pays for them. start() does not warm them in a thread: the
        # imports hold the GIL, so a warm-up slows whatever the test does meanwhile by as much.
        # Webhooks may go to receivers on this machine (service.testing.webhook_receiver): http, to 127.0.0.1.
        settings = {"DATA_DIR": str(self.data_dir), "API_TOKENS": f"{org}:{self.token}", "TEST_MODE": True,
                    "QUIET_STARTUP": True, "LOAD_ON_FIRST_REQUEST": True, "WEBHOOK_ALLOW_HTTP": True,
                    "WEBHOOK_ALLOW_NETS": "127.0.0.1/32"}
        if seed is not None:
            settings["TEST_SEED"] = int(seed)
        self.app = create_app({**settings, **(config or {})})
        self._server = make_server(host, port, self.app, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://{host}:{self._server.server_port}"
        self._thread = None

    @property
    def headers(self):
        """The header that authenticates a request as `self.org`."""
        return {TOKEN_HEADER: self.token}

    def session(self):
        """A new ServiceSession for this server: `server.session().get("/_test/objects")`."""
        from service.testing.session import ServiceSession
        return ServiceSession(self.url, self.token)

    def reset(self):
        """Remove every stored document, media file, stream, event, webhook subscription and pending fault."""
        with self.session() as session:
            session.post("/_test/reset", timeout=30).raise_for_status()

    def deliver_due(self):
        """Make every pending webhook delivery due now (POST /_test/webhooks/due) instead of waiting for its retry;
        how many."""
        with self.session() as session:
            answer = session.post("/_test/webhooks/due", timeout=30)
        answer.raise_for_status()
        return answer.json()["due"]

    def snapshot(self, path=None):
        """The whole state, every org, as a snapshot archive (POST /_test/snapshot): its bytes, also written to `path`
        when given."""
        with self.session() as session:
            answer = session.post("/_test/snapshot", timeout=SNAPSHOT_TIMEOUT)
        _raise_for_answer(answer)
        if path is not None:
            Path(path).write_bytes(answer.content)
        return answer.content

    def restore(self, archive):
        """Replace the whole state with a snapshot (POST /_test/restore): `archive` is its path or its bytes. The orgs
        restored, with their counts; SnapshotRefused with the server's message when it cannot be restored."""
        with self.session() as session, contextlib.ExitStack() as opened:
            body = archive if isinstance(archive, bytes) else opened.enter_context(open(archive, "rb"))
            answer = session.post("/_test/restore", data=body, headers={"Content-Type": "application/gzip"},
                                  timeout=SNAPSHOT_TIMEOUT)
        _raise_for_answer(answer, f"{archive}: " if not isinstance(archive, bytes) else "")
        return answer.json()["orgs"]

    def start(self):
        """Serve in a daemon thread and return once /healthz answers."""
        if self._thread is None:
            # A short poll: stop() waits for the loop to notice, up to one interval (0.5 s by default).
            self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL_INTERVAL,),
                                            name="wis-test-server", daemon=True)
            self._thread.start()
            self._wait_ready()
            webhooks.start(self.app)
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
        """Stop serving, close the socket and the storage, and remove the data directory if this object made it."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
            webhooks.stop(self.app)
        self._server.server_close()
        # (the file backend's last checkpoint written now, not into the directory being removed)
        close_repository(self.app)
        if self._own_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()


class SnapshotRefused(Exception):
    """The server refused a snapshot request; the message is its answer's."""


def _raise_for_answer(answer, context=""):
    if answer.status_code != 200:
        try:
            message = answer.json()["error"]
        except (ValueError, KeyError, TypeError):
            message = answer.text
        raise SnapshotRefused(f"{context}{answer.status_code}: {message}")


class RequestJournal:
    """The server's request journal (GET /_test/requests) with helpers that read well in a test and, when they fail,
    say what the journal holds:

        journal = RequestJournal(server.session())
        journal.assert_called("processCreate", ids=["weld_1"], times=1)
        assert journal.ids("processCreate") == ["weld_1", "weld_2"]
        assert len(journal.uploads()) == 2

    Every helper reads the journal anew: it sees each request answered before the call. `mark()` makes the helpers
    see only the requests answered after it.
    """

    def __init__(self, session, since=0):
        self._session = session
        self.since = since

    def entries(self, operation=None, method=None, path=None):
        """The entries after the mark, oldest first; only those of an operation, method or path (a regular expression
        searched in the path) when given."""
        response = self._session.get("/_test/requests", params={"since": self.since}, timeout=30)
        response.raise_for_status()
        return [entry for entry in response.json()["requests"]
                if (operation is None or entry["operation"] == operation)
                and (method is None or entry["method"] == method.upper())
                and (path is None or re.search(path, entry["path"]))]

    def operations(self):
        """The GraphQL root fields called, in order: `["stationCreate", "processCreate", "process"]`."""
        return [entry["operation"] for entry in self.entries() if entry["operation"] is not None]

    def ids(self, operation):
        """The object ids the calls of one operation named, in order (once per call)."""
        return [identifier for entry in self.entries(operation) for identifier in entry["ids"]]

    def uploads(self):
        """The media paths uploads published, in the order they were answered, each once (a retried last chunk that
        is answered the same path again counts once, and so does the same file uploaded again under the same name,
        which is answered the first upload's path: CONTRACT 10)."""
        paths = []
        for entry in self.entries(path=f"^{UPLOADS}"):
            if entry["method"] in ("POST", "PATCH"):
                paths += [identifier for identifier in entry["ids"]
                          if identifier.startswith(MEDIA_PATH_ROOT) and identifier not in paths]
        return paths

    def mark(self):
        """From now on, the helpers see only requests answered after this call."""
        entries = self.entries()
        if entries:
            self.since = entries[-1]["seq"]

    def assert_called(self, operation, ids=None, times=None):
        """Fail unless `operation` was called `times` times (at least once when None); with `ids`, unless each of
        them was named by that many calls of it."""
        __tracebackhide__ = True  # pytest shows the failing line of the test, not this helper's
        entries = self.entries()
        calls = [entry for entry in entries if entry["operation"] == operation]
        for identifier in ids if ids is not None else [None]:
            seen = [entry for entry in calls if identifier is None or identifier in entry["ids"]]
            if len(seen) == times or (times is None and seen):
                continue
            what = operation if identifier is None else f"{operation} of `{identifier}`"
            expected = (f"no {what}" if times == 0 else
                        f"{what} {'at least once' if times is None else _count(times)}")
            shown, where = (seen, ":") if seen else (entries, "; the journal holds" + (":" if entries else " nothing"))
            raise AssertionError(f"expected {expected}, saw it {_count(len(seen))}{where}" + _listing(shown))

    def assert_not_called(self, operation, ids=None):
        """Fail if `operation` was called (with `ids`: if any call of it named one of them)."""
        __tracebackhide__ = True
        self.assert_called(operation, ids=ids, times=0)


SHOWN_ENTRIES = 50


def _count(number):
    return {1: "once", 2: "twice"}.get(number, f"{number} times")


def _listing(entries):
    """One line per journal entry, at most SHOWN_ENTRIES of them (the last)."""
    lines = [_describe(entry) for entry in entries[-SHOWN_ENTRIES:]]
    if len(entries) > SHOWN_ENTRIES:
        lines.insert(0, f"... {len(entries) - SHOWN_ENTRIES} earlier entries not shown")
    return "".join(f"\n  {line}" for line in lines)


def _describe(entry):
    line = f"#{entry['seq']} {entry['method']} {entry['path']} -> {entry['status'] or 'connection reset'}"
    if entry["operation"]:
        line += f" {entry['operation']}"
    if entry["ids"]:
        line += f" [{', '.join(entry['ids'])}]"
    if entry.get("fault"):
        line += f" (fault {entry['fault']})"
    return line
