"""Observability: JSON logs stamped with a request id, and Prometheus metrics at `GET /metrics`.

Metrics work in one process (test client, threaded server) and across gunicorn workers: when
PROMETHEUS_MULTIPROC_DIR is set (service.gunicorn_config does it), every worker writes its values to
files there and a scrape adds them up, whichever worker answers it.
"""
import logging
import os
import re
import sys
import time
import uuid

from flask import Blueprint, Response, current_app, g, has_request_context, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from pythonjsonlogger.json import JsonFormatter

from service import auth, storage
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


class OpenStreamsCollector:
    """The open streams as the stream store's last sweep counted them: read from the store, so the same whatever
    worker scrapes, and as cheap with a million streams as with none."""

    def __init__(self, streams):
        self.streams = streams

    def collect(self):
        gauge = GaugeMetricFamily("wis_upload_streams_open", "Upload streams open (chunked and tus) at the last sweep "
                                  "of expired streams (every few minutes while requests come, and `wis gc`)")
        gauge.add_metric([], self.streams.open_count())
        yield gauge


class Metrics:
    """The service's metrics, one set per app (kept in app.extensions["metrics"])."""

    def __init__(self, streams, multiprocess):
        self.multiprocess = multiprocess
        self.open_streams = OpenStreamsCollector(streams)
        self.registry = CollectorRegistry()
        self.registry.register(self.open_streams)
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

    def exposition(self):
        """The Prometheus text of every metric, summed over all worker processes in multiprocess mode."""
        if not self.multiprocess:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        registry.register(self.open_streams)
        return generate_latest(registry)


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
    return response


@bp.get("/metrics")
def metrics_view():
    if current_app.config["METRICS_REQUIRE_TOKEN"]:
        auth.require_org()
    return Response(get_metrics(current_app).exposition(), content_type=CONTENT_TYPE_LATEST)


def init_app(app):
    """Request ids, JSON logs and metrics for every request; `GET /metrics` (token only if configured)."""
    configure_logging()
    streams = storage.get_repository(app).streams
    app.extensions["metrics"] = Metrics(streams, multiprocess=bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR")))
    app.before_request(_start_request)
    app.after_request(_finish_request)
    app.register_blueprint(bp)
