"""The request journal of test mode (CONTRACT 12): one entry for each request a node answers, so that a test can check
which calls the code under test made (`GET /_test/requests`, service.testing.api).

An entry is recorded once the answer is made, before it is sent, so a client that has its answer finds the request in
the journal. It holds what identifies the call and nothing a client would not want written down: no header (so never
the token), no query string, no body. A GraphQL request gets one entry for each root field it runs (an importer that
sends three aliased `processCreate` in one request made three calls); they share the request's `requestId`. A request
refused for its token (401) ran nothing and gets one entry, naming its first root field: a client without a token
cannot fill the journal faster than one entry a request. Requests to the test endpoints themselves (/_test/...) are
not recorded: reading the journal would fill it.
"""
import logging
import time
from datetime import datetime, timezone
from http import HTTPStatus

from flask import current_app, g, request
from werkzeug.exceptions import HTTPException

from service.web.graphql import endpoint_of
from service.web.graphql.http import BadGraphQLRequest, read_payload, read_url_parameters
from service.interface import GRAPHQL_PATHS, MAX_REQUEST_BODY, parse_media_path
from service.storage import get_repository

log = logging.getLogger(__name__)

TEST_PREFIX = "/_test/"
UPLOADS = "/uploads"
# A path longer than any the service serves (a media path is at most 270 characters) is cut to this length.
MAX_PATH_LENGTH = 1000


def record(response):
    """after_request: append this request's entries to the journal."""
    if request.path.startswith(TEST_PREFIX):
        return response
    try:
        get_repository(current_app).journal.append(_entries(response))
    except Exception:
        # The journal serves the test around the request; the request itself was answered and must stay so.
        log.exception("recording a request in the test-mode journal failed")
    return response


def _entries(response):
    status = None if g.get("connection_reset") else response.status_code
    started = g.get("request_started")
    duration_ms = round((time.perf_counter() - started) * 1000, 3) if started is not None else None
    common = {
        "at": _iso(time.time() - (duration_ms or 0) / 1000),
        "org": g.get("org"),
        "method": request.method,
        "path": request.path[:MAX_PATH_LENGTH],
        "status": status,
        "durationMs": duration_ms,
    }
    tail = {"requestId": g.get("request_id"), "fault": g.get("fault_id")}
    calls = _calls(response)
    if response.status_code == HTTPStatus.UNAUTHORIZED:
        calls = calls[:1]
    return [{**common, "operation": operation, "ids": ids, **tail} for operation, ids in calls]


def _calls(response):
    """[(operation, ids)] of the request: a GraphQL request's root fields, else one call without an operation."""
    parameters = _graphql_parameters() if request.path in GRAPHQL_PATHS else None
    if parameters is not None:
        calls = endpoint_of(current_app).root_calls(*parameters)
        if calls:
            return calls
    return [(None, _upload_ids(response) if request.path.startswith(UPLOADS) else _media_ids())]


def _graphql_parameters():
    """What a GraphQL request asked for: as its view read it, or, when no view read it (a fault or a missing token
    answered first), read from its URL or body now, so the journal names the call that was refused. Only a body of a
    known length within the request limit is read: one refused for its size, or still arriving chunked past the
    limit, is never waited for."""
    if "graphql_parameters" in g:
        return g.graphql_parameters
    if g.get("connection_reset"):
        return None
    try:
        if request.method == "GET":
            return read_url_parameters(request.args)
        length = request.content_length
        if request.method != "POST" or length is None or length > MAX_REQUEST_BODY:
            return None
        return read_payload(request.get_data(cache=False))
    except (BadGraphQLRequest, HTTPException, OSError):
        return None  # not a GraphQL request that could run: no operation to name


def _upload_ids(response):
    """The stream id and, once there is one, the media path of an upload request (from its URL and its answer)."""
    ids = []
    stream_id = (request.view_args or {}).get("stream_id")
    if stream_id is None and response.is_json and response.status_code == 201:
        stream_id = (response.get_json(silent=True) or {}).get("streamId")
    if stream_id is not None:
        ids.append(stream_id[:MAX_PATH_LENGTH])
    path = response.headers.get("Media-Path")
    if path is None and response.is_json and request.method in ("POST", "PATCH") and response.status_code in (200, 201):
        path = (response.get_json(silent=True) or {}).get("path")
    if isinstance(path, str):
        ids.append(path)
    return ids


def _media_ids():
    """The media path of a media request, else nothing."""
    return [request.path] if parse_media_path(request.path) else []


def _iso(timestamp):
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
