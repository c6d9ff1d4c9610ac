"""The request-body policy of every route, in one place: which limit a route's body has, how a body sent without a
Content-Length is measured, and the one 413 answer.

- Any route's body (GraphQL, a JSON stream creation, the test-mode endpoints, every other route) is at most
  MAX_REQUEST_BODY; its 413 says "request body of <n> bytes is larger than the limit of <m> bytes".
- An upload form (multipart/form-data on POST /uploads or PATCH /uploads/<id>) is at most FILE_FORM_READ_LIMIT; its
  413 names a file (CONTRACT 5): one over MAX_REQUEST_BODY reaches its view, which reads it to nowhere, counting its
  file, to name the file's own size and the smallest limit it breaks (service.web.uploads.chunks); past
  FILE_FORM_READ_LIMIT the body's size stands in for the file's.
- A preview page's form (the login, the logout) is at most FORM_FIELD_LIMIT. A multipart one of more than werkzeug's
  max_form_parts is refused by werkzeug with the same exception as a body too large; its answer is a 400 that says so.
- A snapshot sent to test mode's POST /_test/restore is at most MAX_SNAPSHOT_BYTES.
- A tus body (application/offset+octet-stream on the same routes) is bounded by its upload's Upload-Length, checked as
  it is appended (service.domain.tus_uploads), not here; a tus creation without an Upload-Length has the first limit.

Every body is held to its limit before any view runs, whether or not the view reads it, and before the token is
checked: by its Content-Length when it has one; else (Transfer-Encoding: chunked) by receiving it, up to one byte past
its limit, into a spool that then stands in for it with its Content-Length, so that every view reads a body of known
length, whatever its type. Werkzeug's `request.max_content_length` (set here per request, as Flask 3.1 allows) is not
enough by itself: it is checked only when a view reads the body, and a chunked body is cut at the limit without a word
(`LimitedStream.readall` stops there), so a view would parse a truncated document and answer 400.
"""
from tempfile import SpooledTemporaryFile
from typing import NamedTuple, Optional

from flask import g, request
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wsgi import get_content_length, get_input_stream

from service.domain.uploads import too_large_message
from service.web.error_handlers import service_error_response
from service.errors import BodyTooLarge, FileTooLarge, MalformedBody, disk_errors
from service.interface import (
    FORM_FIELD_LIMIT, MAX_REQUEST_BODY, MAX_SNAPSHOT_BYTES, MB, REQUEST_FILE_LIMIT, TUS_CONTENT_TYPE)


# An upload form up to this size is let through to its view, which names its file's size in a 413; a larger one is
# refused unread.
FILE_FORM_READ_LIMIT = 32 * MB
# A chunked body is received this much at a time, and kept in memory up to SPOOL_IN_MEMORY (beyond, in a temporary
# file): a worker holds at most that much of it, whatever the route's limit.
RECEIVE_SIZE = MB
SPOOL_IN_MEMORY = MB
# The routes whose body may be an upload form or a tus body.
UPLOAD_ENDPOINTS = ("uploads.create_upload", "uploads.send_chunk")
TUS_CREATION_ENDPOINT = "uploads.create_upload"
MALFORMED_CHUNKED_BODY = ("the request body is not valid chunked transfer coding, or ended before its last chunk: each "
                          "chunk is its size in hexadecimal on a line of its own, then that many bytes, then a line "
                          "break, and a chunk of size 0 ends the body")


class BodyRule(NamedTuple):
    """What a request's body may be: at most `limit` bytes (None: not bounded here), and whether it carries a file
    (its 413 then names a file size, CONTRACT 5)."""

    limit: Optional[int]
    carries_file: bool = False


ANY_BODY = BodyRule(MAX_REQUEST_BODY)
FILE_FORM = BodyRule(FILE_FORM_READ_LIMIT, carries_file=True)
TUS_BODY = BodyRule(None)
# The forms of the preview pages (the login's token; the logout's nothing) are a few short fields, and werkzeug's own
# form limit (500 KB) must never be the one a body meets first: its 413 would name this rule's limit.
PAGE_FORM = BodyRule(FORM_FIELD_LIMIT)
PAGE_FORM_ENDPOINTS = ("pages.login_submit", "pages.logout")
# Test mode's restore takes a whole snapshot (CONTRACT 12).
SNAPSHOT = BodyRule(MAX_SNAPSHOT_BYTES)
SNAPSHOT_ENDPOINT = "testing_api.restore"


def body_rule():
    """The body rule of the request, from its route and, on the upload routes, its content type."""
    if request.endpoint in UPLOAD_ENDPOINTS:
        # A tus body always has this type: the tus views refuse any other before reading it.
        if request.mimetype == TUS_CONTENT_TYPE:
            creating = request.endpoint == TUS_CREATION_ENDPOINT
            return ANY_BODY if creating and "Upload-Length" not in request.headers else TUS_BODY
        if request.mimetype == "multipart/form-data":
            return FILE_FORM
    if request.endpoint in PAGE_FORM_ENDPOINTS:
        return PAGE_FORM
    if request.endpoint == SNAPSHOT_ENDPOINT:
        return SNAPSHOT
    return ANY_BODY


def too_large(rule, size):
    """The error that answers a body of `size` bytes over its rule's limit (`size` None: a chunked body, received
    one byte past the limit and no further)."""
    if rule.carries_file:
        # The body is refused unread, so its size stands in for its file's.
        return FileTooLarge(too_large_message(size, REQUEST_FILE_LIMIT))
    return BodyTooLarge(body_too_large_message(size, rule.limit))


def body_too_large_message(size, limit, why=""):
    """'request body of <size> bytes is larger than the limit of <limit> bytes', then `why` when given."""
    body = "request body" if size is None else f"request body of {size} bytes"
    return f"{body} is larger than the limit of {limit} bytes{why}"


def hold_body_to_its_limit():
    """before_request: refuse a body over its route's limit before any view runs; a chunked one is received first."""
    rule = body_rule()
    request.max_content_length = rule.limit
    if rule.limit is None:
        return
    # From the environ, not request.content_length: that is cached, and a chunked body gets its length only below
    # (this hook runs before any other reads the body or its length: the app's earlier hooks do not).
    length = get_content_length(request.environ)
    if length is not None:
        if length > rule.limit:
            raise RequestEntityTooLarge()
    elif "Transfer-Encoding" in request.headers:
        _receive_chunked_body(rule.limit)


def _receive_chunked_body(limit):
    """Receive a body sent without a Content-Length, up to one byte past `limit` (then 413), into a spool that stands
    in for it from now on, with its Content-Length."""
    environ = request.environ
    # Empty unless the server ends the input at the end of the body (gunicorn and werkzeug do), as werkzeug reads it.
    source = get_input_stream(environ)
    g.body_spool = spool = SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
    size = 0
    while size <= limit:
        try:
            block = source.read(min(RECEIVE_SIZE, limit + 1 - size))
        except Exception:
            # The server's own error for a body it cannot de-chunk (gunicorn raises its ParseException subclasses,
            # not OSError) or a connection that broke: the client is answered, not the log.
            raise MalformedBody(MALFORMED_CHUNKED_BODY) from None
        if not block:
            break
        with disk_errors():
            spool.write(block)
        size += len(block)
    if size > limit:
        raise RequestEntityTooLarge()
    spool.seek(0)
    environ["wsgi.input"] = spool
    environ["CONTENT_LENGTH"] = str(size)
    del environ["HTTP_TRANSFER_ENCODING"]


def _close_spool(error):
    spool = g.pop("body_spool", None)
    if spool is not None:
        spool.close()


def answer_too_large(error):
    """The one 413 answer to a body over its limit, refused here or by werkzeug as a view read it; a 400 to a form
    within its limit that werkzeug refused for its number of parts."""
    rule, size = body_rule(), request.content_length
    if _form_of_too_many_parts(rule, size):
        return service_error_response(MalformedBody(too_many_parts_message(request.max_form_parts)))
    return service_error_response(too_large(rule, size))


def _form_of_too_many_parts(rule, size):
    """True when werkzeug's 413 can only be its limit of a multipart form's parts (max_form_parts): werkzeug raises the
    same error for the body's length and a part's size. The body is within its route's limit (a chunked one has its
    length by now), so the read limit did not stop it, and within max_form_memory_size, so no part of it is larger.
    The upload forms are parsed by service.web.uploads.multipart, which names its own limit of parts."""
    memory_limit = request.max_form_memory_size
    return (request.mimetype == "multipart/form-data" and not rule.carries_file and size is not None
            and rule.limit is not None and size <= rule.limit and (memory_limit is None or size <= memory_limit))


def too_many_parts_message(limit):
    """What a form of more than `limit` parts is told."""
    return f"the form has more than {limit} parts (fields and files); at most {limit} are accepted"


def init_app(app):
    app.before_request(hold_body_to_its_limit)
    app.teardown_request(_close_spool)
    app.register_error_handler(RequestEntityTooLarge, answer_too_large)
