"""Observability: JSON logs stamped with a request id, and Prometheus metrics at `GET /metrics`.

Metrics work in one process (test client, threaded server) and across gunicorn workers: when
PROMETHEUS_MULTIPROC_DIR is set (service.gunicorn_config does it), every worker writes its values to
files there and a scrape adds them up, whichever worker answers it. A scrape never calls an engine (CONTRACT 13):
every value is in memory or in those files, so /metrics answers while the database or the object store is down.
"""
import importlib.metadata
import logging
import os
import re
import sys
import time
import uuid

from flask import Blueprint, Response, current_app, g, has_request_context, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from pythonjsonlogger.json import JsonFormatter

from service import storage
from service.domain.tokens import READ
from service.web import auth
from service.errors import StorageFailed
from service.interface import REQUEST_ID_HEADER

# A client's id is kept when it is short visible ASCII (no spaces, no control characters), so it can
# neither forge log lines nor bloat them; anything else is replaced by a generated id.
VALID_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")
UNMATCHED_ROUTE = "<unmatched>"
# Label values must come from a fixed set, or every new value a client sends is a new series kept for the
# life of the worker (and in the multiprocess files): a route is the URL rule, never the raw path, and a
# method outside these (HTTP allows any token) is counted as OTHER_METHOD.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER_METHOD = "<other>"
UPLOAD_ROUTE_PREFIX = "/uploads"
# Upload requests take up to a 10 MB body over slow links, so the buckets reach into minutes.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Libraries whose warnings belong in the service's JSON log: the database pool's reconnects, the S3 client's retries.
ENGINE_LOGGERS = ("psycopg", "psycopg_pool", "botocore", "boto3", "urllib3")
# GraphQL error codes are the server's own (service.errors and the GraphQL layer); anything else is counted as this.
GRAPHQL_CODE = re.compile(r"[A-Z_]{1,40}")
OTHER_CODE = "OTHER"


class RequestIdFilter(logging.Filter):
    """Add `request_id` to records logged while a request is served."""

    def filter(self, record):
        if has_request_context() and "request_id" in g and not hasattr(record, "request_id"):
            record.request_id = g.request_id
        return True


def json_formatter():
    """The one log line format: a JSON object with timestamp, level, logger, process, message and extras."""
    return JsonFormatter(["levelname", "name", "process", "message"], timestamp=True)


class StderrHandler(logging.StreamHandler):
    """Writes to sys.stderr as it is at each record: test runners swap it while they capture output."""

    def __init__(self):
        super().__init__(sys.stderr)

    def emit(self, record):
        self.stream = sys.stderr  # emit runs under the handler's lock
        super().emit(record)


def json_handler(stream=None):
    """A handler writing JSON lines (stderr by default) with the request id of the current request."""
    handler = logging.StreamHandler(stream) if stream is not None else StderrHandler()
    handler.setFormatter(json_formatter())
    handler.addFilter(RequestIdFilter())
    return handler


def configure_logging():
    """Route the service's own logs as JSON to stderr, unless the host (e.g. gunicorn) already routes them."""
    logger = logging.getLogger("service")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if not logger.handlers:
        logger.addHandler(json_handler())
    route_engine_logs(logger.handlers)


def route_engine_logs(handlers):
    """Send the warnings of the engines' client libraries to `handlers` (the service's JSON lines), not to Python's
    last-resort plain text on stderr."""
    for name in ENGINE_LOGGERS:
        engine_logger = logging.getLogger(name)
        engine_logger.handlers = list(handlers)
        engine_logger.setLevel(logging.WARNING)
        engine_logger.propagate = False


class OpenStreamsCollector:
    """The open streams of the whole storage (every node's) as this process's last sweep counted them: from memory,
    never an engine call. The same for every node, so it carries scope="cluster": take max(), never sum()."""

    def __init__(self, streams):
        self.streams = streams

    def collect(self):
        gauge = GaugeMetricFamily("wis_upload_streams_open", "Upload streams open (chunked and tus) at the last sweep "
                                  "of expired streams (every few minutes while requests come, and `wis gc`); the same "
                                  "on every node: aggregate with max()", labels=["scope"])
        count = self.streams.open_count()
        if count is not None:
            gauge.add_metric(["cluster"], count)
        yield gauge


class BuildInfoCollector:
    """wis_build_info{version, backend} 1: what runs where."""

    def __init__(self, backend):
        try:
            self.version = importlib.metadata.version("work-instruction-service")
        except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
            self.version = "unknown"
        self.backend = backend

    def collect(self):
        gauge = GaugeMetricFamily("wis_build_info", "The service's version and storage backend (always 1)",
                                  labels=["version", "backend"])
        gauge.add_metric([self.version, self.backend], 1)
        yield gauge


# Commit-to-2xx of a webhook: within a second normally, up to the days of the retry schedule.
WEBHOOK_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 86400, 259200)


class WebhookMetrics:
    """What the webhook dispatcher (service.delivery.dispatcher) counts, by the names it calls."""

    def __init__(self, registry):
        self._emitted = Counter("wis_webhook_events_emitted", "Events sent to a webhook subscription for the first time "
                                "(one per subscription and event)", registry=registry)
        self._attempts = Counter("wis_webhook_attempts", "Webhook delivery attempts, by outcome (succeeded, http_error, "
                                 "rate_limited, gone, redirect, timeout, connection, malformed, refused_address, "
                                 "expired, internal)", ["outcome"], registry=registry)
        self._latency = Histogram("wis_webhook_delivery_seconds", "From an event's commit to its webhook's 2xx answer "
                                  "(retries included)", buckets=WEBHOOK_LATENCY_BUCKETS, registry=registry)
        self._disabled = Counter("wis_webhook_subscriptions_disabled", "Webhook subscriptions disabled, by reason (GONE: "
                                 "410; FAILING: every attempt failed for 5 days)", ["reason"], registry=registry)
        self._pending = Gauge("wis_webhook_deliveries_pending", "Webhook deliveries PENDING in the whole storage (every "
                              "node's), as last counted (every 10 s): aggregate with max()", registry=registry,
                              multiprocess_mode="livemostrecent")

    def emitted(self):
        self._emitted.inc()

    def attempted(self, kind):
        self._attempts.labels(kind).inc()

    def delivered_after(self, seconds):
        self._latency.observe(seconds)

    def disabled(self, reason):
        self._disabled.labels(reason).inc()

    def pending(self, count):
        self._pending.set(count)


class Metrics:
    """The service's metrics, one set per app (kept in app.extensions["metrics"])."""

    def __init__(self, repository, backend, multiprocess):
        self.multiprocess = multiprocess
        self.repository = repository
        self.collectors = (OpenStreamsCollector(repository.streams), BuildInfoCollector(backend))
        self.registry = CollectorRegistry()
        for collector in self.collectors:
            self.registry.register(collector)
        self.requests = Counter(
            "wis_http_requests_total", "HTTP requests answered, by method, route (URL rule) and status",
            ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram(
            "wis_http_request_duration_seconds", "Time to produce a response, by method, route and status",
            ["method", "route", "status"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.upload_bytes = Counter(
            "wis_upload_received_bytes", "Request body bytes received on the upload routes (Content-Length)",
            ["method", "route", "status"], registry=self.registry)
        self.streams_completed = Counter(
            "wis_upload_streams_completed", "Chunked upload streams completed and verified (once per stream, retries not counted)",
            registry=self.registry)
        self.streams_expired = Counter(
            "wis_upload_streams_expired", "Chunked upload streams removed by the expiry sweep",
            registry=self.registry)
        self.graphql_errors = Counter(
            "wis_graphql_errors", "Errors in GraphQL answers, by extensions.code (the HTTP status of those answers is "
            "usually 200: alert on this)", ["code"], registry=self.registry)
        self.engine_errors = Counter(
            "wis_engine_errors", "Requests refused because an engine failed, by engine (database, objects, disk) and "
            "kind (database: down, lost, busy; objects: unreachable, failed)", ["engine", "kind"],
            registry=self.registry)
        # Each worker process writes its own pool's state; a scrape adds the live workers up (or takes the lowest).
        self.pool_connections = Gauge(
            "wis_database_pool_connections", "Pooled database connections of this node's live workers, by state "
            "(open: held by the pools; idle: free for a request)", ["state"], registry=self.registry,
            multiprocess_mode="livesum")
        self.pool_waiting = Gauge(
            "wis_database_pool_waiting", "Requests of this node waiting for a pooled database connection",
            registry=self.registry, multiprocess_mode="livesum")
        self.database_up = Gauge(
            "wis_database_up", "0 while a worker of this node knows the database to be down, else 1",
            registry=self.registry, multiprocess_mode="livemin")
        self.webhooks = WebhookMetrics(self.registry)
        self.event_streams = Gauge(
            "wis_event_streams_open", "Event streams (GET /events, GraphQL subscriptions) open in this node's live "
            "workers, each holding a thread", registry=self.registry, multiprocess_mode="livesum")

    def record_engine_state(self):
        """This process's pool and circuit into the gauges (in memory; called as each response goes out)."""
        stats = self.repository.engine_stats()
        if "pool_size" in stats:
            self.pool_connections.labels("open").set(stats["pool_size"])
            self.pool_connections.labels("idle").set(stats["pool_available"])
            self.pool_waiting.set(stats["requests_waiting"])
            self.database_up.set(1 - stats["down"])

    def exposition(self):
        """The Prometheus text of every metric, summed over all worker processes in multiprocess mode."""
        self.record_engine_state()
        if not self.multiprocess:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        for collector in self.collectors:
            registry.register(collector)
        return generate_latest(registry)


def count_engine_error(error):
    """Count a request refused because an engine failed (the HTTP and GraphQL error paths call this)."""
    if isinstance(error, StorageFailed):
        get_metrics(current_app).engine_errors.labels(error.engine, error.kind).inc()


def count_graphql_errors(errors):
    """Count the errors of a GraphQL answer by extensions.code."""
    metrics = get_metrics(current_app)
    for error in errors or ():
        code = str((error.get("extensions") or {}).get("code") or OTHER_CODE)
        metrics.graphql_errors.labels(code if GRAPHQL_CODE.fullmatch(code) else OTHER_CODE).inc()


def get_metrics(app):
    """The Metrics of an app, for code that counts events of its own (e.g. the expiry sweep)."""
    return app.extensions["metrics"]


bp = Blueprint("observability", __name__)


def _start_request():
    g.request_started = time.perf_counter()
    offered = request.headers.get(REQUEST_ID_HEADER, "")
    g.request_id = offered if VALID_REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex


def _finish_request(response):
    metrics = get_metrics(current_app)
    response.headers[REQUEST_ID_HEADER] = g.get("request_id") or uuid.uuid4().hex
    route = request.url_rule.rule if request.url_rule is not None else UNMATCHED_ROUTE
    method = request.method if request.method in KNOWN_METHODS else OTHER_METHOD
    labels = (method, route, str(response.status_code))
    metrics.requests.labels(*labels).inc()
    if "request_started" in g:
        metrics.latency.labels(*labels).observe(time.perf_counter() - g.request_started)
    if route.startswith(UPLOAD_ROUTE_PREFIX) and request.content_length:
        metrics.upload_bytes.labels(*labels).inc(request.content_length)
    metrics.record_engine_state()
    return response


@bp.get("/metrics")
@auth.requires(auth.Access(READ, exempt=lambda: not current_app.config["METRICS_REQUIRE_TOKEN"]))
def metrics_view():
    return Response(get_metrics(current_app).exposition(), content_type=CONTENT_TYPE_LATEST)


def init_app(app):
    """Request ids, JSON logs and metrics for every request; `GET /metrics` (token only if configured)."""
    configure_logging()
    backend = "shared" if app.config.get("DATABASE_URL") else "file"
    app.extensions["metrics"] = Metrics(storage.get_repository(app), backend,
                                        multiprocess=bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR")))
    app.before_request(_start_request)
    app.after_request(_finish_request)
    app.register_blueprint(bp)
