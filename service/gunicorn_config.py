"""Gunicorn settings for this service: `gunicorn -c python:service.gunicorn_config` (see Procfile).

Every setting can be changed from the environment (WIS_*), and command-line flags still win.
Uploads are I/O- and hashing-bound and clients may be slow, so the default is a few threaded workers
(service.server.worker: gthread whose event loop receives each request until a thread can serve it):
a client that sends slowly, or stops, holds a file descriptor and a small buffer, not a thread.
"""
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from service.storage.common.process_ids import process_gone

# prometheus_client decides once, when first imported, whether it writes values to shared files, so
# multiprocess mode must be on before anything imports it (service/__init__ imports observability
# lazily for this reason).
if "prometheus_client" in sys.modules:
    raise RuntimeError("service.gunicorn_config must be loaded before prometheus_client is imported")
_METRICS_DIR_OWNED = "PROMETHEUS_MULTIPROC_DIR" not in os.environ
# Our metrics directories are named after the master's pid, so a start can remove those of masters that were killed.
_METRICS_DIR_PREFIX = "wis-metrics-"


def _remove_dead_masters_metrics():
    for directory in Path(tempfile.gettempdir()).glob(f"{_METRICS_DIR_PREFIX}*-*"):
        pid = directory.name[len(_METRICS_DIR_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and process_gone(pid) and directory.stat().st_uid == os.getuid():
            shutil.rmtree(directory, ignore_errors=True)


if _METRICS_DIR_OWNED:
    _remove_dead_masters_metrics()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=f"{_METRICS_DIR_PREFIX}{os.getpid()}-")
# Absolute from here on: gunicorn applies --chdir after loading this file, and the workers would then read a
# relative directory against another base than the master that wipes it.
_METRICS_DIR = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).absolute()
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_METRICS_DIR)

from gunicorn.glogging import Logger  # noqa: E402 (after the environment is set)

from service import storage  # noqa: E402
from service.server import cycle_collector  # noqa: E402
from service.web import auth, observability, webhooks  # noqa: E402
from service.config import load_config, load_server_config, uses_shared_backend  # noqa: E402
from service.domain.tokens import parse_api_tokens  # noqa: E402
from service.errors import ConfigurationError, StorageFailed  # noqa: E402
from service.web.graphql import load_schema  # noqa: E402
from service.web.openapi import load_document  # noqa: E402


def _settings():
    """Gunicorn's settings and the service's, checked before anything starts: a malformed setting, a data directory
    that cannot be made or written, a broken schema or OpenAPI file, or a shared backend whose database or bucket is
    out of reach or not ready is one line naming it and exit status 1, not a traceback from every worker."""
    try:
        server = load_server_config()
        service = load_config()
        parse_api_tokens(service["API_TOKENS"])
        storage.check_data_dir(service)
        load_schema()
        load_document()
        if uses_shared_backend(service):
            storage.open_repository(service).check_start()
    # StorageFailed: the shared backend's database or object store does not answer; the message names its setting.
    except (ConfigurationError, StorageFailed) as error:
        if _METRICS_DIR_OWNED:
            shutil.rmtree(_METRICS_DIR, ignore_errors=True)
        raise SystemExit(f"work-instruction service: {error}") from None
    return server


_SERVER = _settings()
wsgi_app = "service:create_app()"
bind = [_SERVER["bind"]]
worker_class = _SERVER["worker_class"]
workers = _SERVER["workers"]
threads = _SERVER["threads"]
worker_connections = _SERVER["worker_connections"]
timeout = _SERVER["timeout"]
graceful_timeout = _SERVER["graceful_timeout"]
keepalive = _SERVER["keepalive"]
loglevel = _SERVER["loglevel"]
accesslog = _SERVER["accesslog"]
errorlog = _SERVER["errorlog"]
control_socket = _SERVER["control_socket"]
control_socket_disable = control_socket is None
# Worker heartbeats on tmpfs: a slow or full disk must not get healthy workers killed.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
logger_class = "service.gunicorn_config.JsonLogger"


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
        observability.route_engine_logs(service_log.handlers)

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
    # Each worker delivers webhooks from the start, not from its first request (a node restarted with retries due
    # and no traffic); the shipped worker stops claiming as soon as it stops taking requests.
    webhooks.start(worker.app.wsgi(), getattr(worker, "lifetime", None))


def worker_exit(server, worker):
    # The graceful shutdown is over: the webhook attempts in flight finish (their timeout at most), then the storage is
    # closed (the file backend's checkpoint of what this worker committed is made now, not left to a replay), then the
    # worker ends.
    app = worker.app.wsgi()
    webhooks.stop(app)
    storage.close_repository(app)


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _METRICS_DIR_OWNED:
        shutil.rmtree(_METRICS_DIR, ignore_errors=True)
