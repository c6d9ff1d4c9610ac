"""Gunicorn settings for this service: `gunicorn -c python:service.gunicorn_config` (see Procfile).

Every setting can be changed from the environment (WIS_*), and command-line flags still win.
Uploads are I/O- and hashing-bound and clients may be slow, so the default is a few `gthread`
workers with several threads each: a slow client holds a thread, not a whole process.
"""
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

# prometheus_client decides once, when first imported, whether it writes values to shared files, so
# multiprocess mode must be on before anything imports it (service/__init__ imports observability
# lazily for this reason).
if "prometheus_client" in sys.modules:
    raise RuntimeError("service.gunicorn_config must be loaded before prometheus_client is imported")
_METRICS_DIR_OWNED = "PROMETHEUS_MULTIPROC_DIR" not in os.environ
if _METRICS_DIR_OWNED:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="wis-metrics-")
# Absolute from here on: gunicorn applies --chdir after loading this file, and the workers would then read a
# relative directory against another base than the master that wipes it.
_METRICS_DIR = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).absolute()
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_METRICS_DIR)

from gunicorn.glogging import Logger  # noqa: E402 (after the environment is set)

from service import auth, cycle_collector, observability  # noqa: E402
from service.config import load_config  # noqa: E402


def _env(name, parse, default):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise SystemExit(f"invalid value for {name}: {raw!r} ({exc})") from None


def _cpu_count():
    # The CPUs this process may run on (container CPU sets), not every CPU of the host.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


wsgi_app = "service:create_app()"
# Gunicorn's own rule for PORT (Procfile hosting), else loopback: never exposed by accident.
bind = [_env("WIS_BIND", str, f"0.0.0.0:{os.environ['PORT']}" if os.environ.get("PORT") else "127.0.0.1:8000")]
worker_class = _env("WIS_WORKER_CLASS", str, "gthread")
workers = _env("WIS_WORKERS", int, _cpu_count() + 1)
# A client that sends its request slowly holds a thread until the request is whole (gthread has no
# deadline for request headers or bodies): 32 per worker keep the service answering while dozens of
# such clients trickle. Past workers x threads of them it stalls; on an untrusted network put a
# buffering reverse proxy in front.
threads = _env("WIS_THREADS", int, 32)
# A 10 MB chunk at 1 Mbit/s takes about 80 s; with sync workers this is also the longest request.
timeout = _env("WIS_TIMEOUT", int, 120)
# On restart or SIGTERM, workers finish the uploads in flight for this long before they are killed.
graceful_timeout = _env("WIS_GRACEFUL_TIMEOUT", int, 60)
keepalive = _env("WIS_KEEPALIVE", int, 5)
loglevel = _env("WIS_LOG_LEVEL", str, "info")
accesslog = _env("WIS_ACCESS_LOG", lambda value: None if value.lower() == "off" else value, "-")
errorlog = _env("WIS_ERROR_LOG", str, "-")
logger_class = "service.gunicorn_config.JsonLogger"
# Gunicorn's control socket has one default path per user: off unless a path is given, so several
# instances (and test runs) on one host do not fight over it.
control_socket = _env("WIS_CONTROL_SOCKET", str, None)
control_socket_disable = control_socket is None
# Worker heartbeats on tmpfs: a slow or full disk must not get healthy workers killed.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None


class JsonLogger(Logger):
    """Gunicorn's logger with JSON lines, an access line per request, and the service's logs beside it."""

    def setup(self, cfg):
        super().setup(cfg)
        formatter = observability.json_formatter()
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(formatter)
        # The service's records go where gunicorn's error log goes (stderr or --error-logfile).
        service_log = logging.getLogger("service")
        service_log.handlers = list(self.error_log.handlers)
        for handler in service_log.handlers:
            handler.addFilter(observability.RequestIdFilter())
        service_log.setLevel(self.loglevel)
        service_log.propagate = False

    def access(self, resp, req, environ, request_time):
        # Method, path and status only: never headers (the API token) nor query strings.
        if not self.access_log_enabled:
            return
        status = resp.status.split(None, 1)[0] if isinstance(resp.status, str) else resp.status
        response_headers = {name.lower(): value for name, value in resp.headers}
        method, path = environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")
        self.access_log.info("%s %s %s", method, path, status, extra={
            "request_id": response_headers.get("x-request-id"),
            "remote_addr": environ.get("REMOTE_ADDR"),
            "method": method,
            "path": path,
            "status": int(status),
            "response_bytes": getattr(resp, "sent", None),
            "duration_ms": round(request_time.total_seconds() * 1000, 3),
            "user_agent": environ.get("HTTP_USER_AGENT"),
        })


def on_starting(server):
    # Values left by a previous run would otherwise be added to this run's.
    for stale in _METRICS_DIR.glob("*.db"):
        stale.unlink()
    auth.announce_default_token(load_config())


def post_worker_init(worker):
    # After the worker has loaded the app, so that what start-up built is frozen with it.
    cycle_collector.tune()


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _METRICS_DIR_OWNED:
        shutil.rmtree(_METRICS_DIR, ignore_errors=True)
