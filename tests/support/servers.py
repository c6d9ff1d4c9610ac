"""Real servers and commands for end-to-end tests: gunicorn on a free port with a data directory of its own, the
installed `wis` command, static pages on an origin of their own for the browser, and where Chromium and tus-js-client
are. Tests start them through the fixtures of conftest.py (start_gunicorn, wis_process, browser, node, ...), which
also mark the test's tier."""
import mimetypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from service.config import load_server_config
from support.paths import JS
from support.ports import free_port
from support.tokens import TOKENS

WIS = Path(sys.executable).with_name("wis")
CHROMIUM = os.environ.get("WIS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
BROWSER_WAIT_MS = 20_000  # two shared cores: be patient, never endless


def run_wis(*args, env=None, replace_env=False, cwd=None):
    """Run the installed `wis` command; return the finished process (output captured as text)."""
    return subprocess.run([str(WIS), *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env=(env if replace_env else dict(os.environ, **(env or {}))))


def process_children(pid):
    """The ids of a process's children (from /proc/<pid>/task/*/children)."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            pass
    return children


def connections_held(pids, port, client_ports):
    """How many connections from the local ports `client_ports` to `port` the processes `pids` have accepted (from
    /proc): a connection still in the listen backlog is in no process's files."""
    sockets = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                sockets.add(os.readlink(fd))
            except OSError:
                pass  # closed meanwhile
    held = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port, remote_port = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
        held += local_port == port and remote_port in client_ports and f"socket:[{fields[9]}]" in sockets
    return held


def process_alive(pid):
    """True while `pid` runs (a zombie, dead but not yet reaped, is not alive)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


LIBRARIES_CONFIG = Path(__file__).with_name("gunicorn_libraries.py")


class GunicornServer:
    """Real gunicorn on a free 127.0.0.1 port with its own data directory (and its own shared stores when `backend`
    is the shared one)."""

    def __init__(self, data_dir, workers=2, env=None, extra_args=(), backend=None, settings=None):
        """`settings` (from backend.settings()) puts this server on stores another server uses too: two nodes of one
        deployment; without it the server gets stores of its own."""
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = dict(os.environ, WIS_DATA_DIR=str(data_dir), WIS_API_TOKENS=TOKENS)
        self.settings = {}
        if backend is not None:
            self.settings = settings if settings is not None else backend.settings()
            environment.update(backend.environment(self.settings))
        environment.update(env or {})
        # A file, not a pipe: a pipe nobody reads fills up and blocks a chatty server. Beside the data directory, so
        # it goes with the test's temporary directory; only the server keeps it open.
        self._stderr = Path(data_dir).parent / f"gunicorn-{self.port}.stderr"
        # Without the shipped config, the master still imports the libraries before it forks (LIBRARIES_CONFIG).
        config = () if "-c" in extra_args else ("-c", str(LIBRARIES_CONFIG))
        with open(self._stderr, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers),
                 "--timeout", "120", *config, *extra_args, "service:create_app()"],
                env=environment, stdout=subprocess.DEVNULL, stderr=stderr,
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

    def kill(self):
        """SIGKILL the master and its workers at once, as a machine crash would: no request in flight is finished."""
        master = self.process.pid
        workers = process_children(master)
        for pid in (master, *workers):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(process_alive(pid) for pid in workers):
            assert time.monotonic() < deadline, f"gunicorn workers {workers} outlived SIGKILL"
            time.sleep(0.05)

    @property
    def stderr_text(self):
        """What the server has written to stderr so far."""
        return self._stderr.read_bytes().decode(errors="replace")


# tus-js-client (its Node and browser builds), installed into tests/js by the `node` fixture.
JS_DIR = JS


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


# The worker class service.gunicorn_config uses unless WIS_WORKER_CLASS says otherwise.
SHIPPED_WORKER_CLASS = load_server_config({})["worker_class"]


def shipped_server(start_gunicorn, tmp_path, data_dir):
    """Gunicorn with the service's own config (`-c python:service.gunicorn_config`), two workers, started by a
    start_gunicorn fixture; access log in `tmp_path/access.log`."""
    metrics = tmp_path / "metrics"
    metrics.mkdir(exist_ok=True)
    env = {"WIS_WORKERS": "2", "WIS_LOG_LEVEL": "warning",
           "WIS_ACCESS_LOG": str(tmp_path / "access.log"),
           # A directory of the test's own, so a server killed with -9 leaves nothing in /tmp.
           "PROMETHEUS_MULTIPROC_DIR": str(metrics)}
    return start_gunicorn(data_dir, workers=2, env=env, extra_args=("-c", "python:service.gunicorn_config"))
