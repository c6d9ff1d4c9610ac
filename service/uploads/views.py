"""Upload endpoints and media serving: parse and validate, call one domain function, shape the response."""
import contextlib
import logging

from flask import Blueprint, current_app, g, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wsgi import FileWrapper, wrap_file

from service.auth import require_org
from service.domain import tus as tus_uploads
from service.domain import uploads
from service.errors import BodyTooLarge, InvalidRequest, MalformedBody
from service.interface import (
    FORM_FIELD_LIMIT, KIND_BY_SEGMENT, MB, MEDIA_PATH_ROOT, REQUEST_FILE_LIMIT, TUS_VERSION, media_path,
)
from service.observability import get_metrics
from service.storage import get_repository
from service.storage.contract import Outcome
from service.uploads import multipart, tus
from service.uploads.schemas import ChunkSchema, SingleUploadSchema, StreamCreateSchema, load

log = logging.getLogger(__name__)
# A multipart upload body over MAX_CONTENT_LENGTH but not over this is read to nowhere, counting its file's bytes, so
# the 413 gives the file's own size and the smallest limit it breaks (a 10.45 MB PNG breaks stepImage's 8 MB). A
# larger body is refused before it is read: its size then stands in for the file's.
OVERSIZED_BODY_READ_LIMIT = 32 * MB
# Media are sent in blocks of this size: a 500 MB video costs a worker one block of memory, and a read of the object
# store one ranged GET per response, not one per block.
MEDIA_BLOCK = MB

bp = Blueprint("uploads", __name__)


@bp.before_request
def authenticate():
    # tus clients discover the server with OPTIONS /uploads before they have anything to authenticate.
    if request.endpoint != "uploads.tus_options":
        require_org()


# The endpoints tus shares with the chunk API.
TUS_ENDPOINTS = {"uploads.create_upload", "uploads.send_chunk", "uploads.stream_status", "uploads.delete_stream"}


def _is_tus():
    if request.endpoint not in TUS_ENDPOINTS:
        return False
    # HEAD on a stream exists only in tus: the chunk API reads a stream's status with GET.
    return request.method == "HEAD" or tus.is_tus_request(request.headers, request.mimetype)


def reads_raw_body(view):
    """Mark a view that reads an application/offset+octet-stream body itself, bounded by the upload's Upload-Length
    rather than by MAX_CONTENT_LENGTH."""
    view.reads_raw_body = True
    return view


def _repo():
    return get_repository(current_app)


def _body():
    """The request body to parse. With a Content-Length (already held to MAX_CONTENT_LENGTH), the server's own input:
    the parser reads no more than that, and werkzeug's limiting wrapper would copy every read once more."""
    if request.content_length is not None:
        return request.environ["wsgi.input"]
    return request.stream


def measures_oversized_files(view):
    """Mark a multipart upload view that reads a body up to OVERSIZED_BODY_READ_LIMIT to name its file's size in a 413
    (the app-wide check of MAX_CONTENT_LENGTH lets such bodies through to it)."""
    view.oversized_body_read_limit = OVERSIZED_BODY_READ_LIMIT
    return view


def _refuse_oversized_file(destination_limits):
    """For a multipart body over MAX_CONTENT_LENGTH, a 413 naming its file's size: the body is read, its file counted,
    not kept. `destination_limits(fields)` gives the limits of the destination the fields name, beside the
    per-request one. A body within the limit passes."""
    if (request.mimetype != "multipart/form-data" or request.content_length is None
            or request.content_length <= current_app.config["MAX_CONTENT_LENGTH"]):
        return
    try:
        fields, files = multipart.parse(_body(), request.content_type, request.content_length,
                                        lambda fields_so_far: multipart.ByteCounter())
    except (MalformedBody, BodyTooLarge):
        # Not a readable form: the body's own size is all there is to say.
        raise RequestEntityTooLarge() from None
    if "file" in files:
        uploads.check_size(files["file"][1].size, REQUEST_FILE_LIMIT, *destination_limits(fields))
    # The file itself is within its limits; the form fields around it made the body too large.
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    raise BodyTooLarge(f"request body is larger than the limit of {limit} bytes: at most "
                       f"{REQUEST_FILE_LIMIT // MB} MB of file and {FORM_FIELD_LIMIT // 1024} KB of form fields")


@contextlib.contextmanager
def _multipart(new_file):
    """Parse the multipart body; yield (form fields, (file name, received file)). File parts go straight to disk
    through `new_file(fields sent before the file)` and are removed afterwards unless a domain function moved them
    into place."""
    if request.mimetype != "multipart/form-data":
        raise InvalidRequest("send the file as multipart/form-data")
    created = []

    def open_file(fields):
        created.append(new_file(fields))
        return created[-1]

    try:
        form, files = multipart.parse(_body(), request.content_type, request.content_length, open_file)
        if "file" not in files:
            raise InvalidRequest("file: is required, as a multipart file part with a filename")
        yield form, files["file"]
    finally:
        for incoming in created:
            incoming.discard()


# OPTIONS /uploads is tus discovery (tus_options), not Flask's automatic answer.
@bp.route("/uploads", methods=["POST"], provide_automatic_options=False)
@measures_oversized_files
@reads_raw_body
def create_upload():
    """Single-request upload (multipart) or creation of a chunked stream (JSON)."""
    repo, org = _repo(), g.org
    if _is_tus():
        return _tus_create(repo, org)
    if request.is_json:
        data = load(StreamCreateSchema(), request.get_json(silent=True))
        stream_id = uploads.create_stream(repo, org, data["destinationId"], data["fileName"], data["fileSize"],
                                          data["sha"])
        return jsonify(streamId=stream_id), 201
    if request.mimetype != "multipart/form-data":
        raise InvalidRequest("send multipart/form-data to upload a file, or application/json to create a chunked stream")
    _refuse_oversized_file(lambda fields: uploads.destination_limits(fields.get("destinationId")))
    with _multipart(lambda fields: uploads.new_upload_file(repo, org)) as (form, (file_name, incoming)):
        data = load(SingleUploadSchema(), form)
        path = uploads.upload_single(repo, org, data["destinationId"], file_name, incoming, data["sha"])
    return jsonify(path=path), 201


@bp.patch("/uploads/<stream_id>")
@measures_oversized_files
@reads_raw_body
def send_chunk(stream_id):
    repo, org = _repo(), g.org
    if _is_tus():
        return _tus_patch(repo, org, stream_id)
    uploads.require_chunked(uploads.require_stream(repo, org, stream_id))
    _refuse_oversized_file(lambda fields: ())  # a chunk has no limit but the per-request one

    def new_file(fields):
        return uploads.new_chunk_file(repo, org, stream_id, fields.get("chunkIndex"))

    with _multipart(new_file) as (form, (_, incoming)):
        data = load(ChunkSchema(), form)
        written = uploads.receive_chunk(repo, org, stream_id, data["chunkIndex"], data["totalChunks"], incoming,
                                        data["sha"])
    if written.outcome is Outcome.COMPLETED:
        get_metrics(current_app).streams_completed.inc()
    if written.outcome is Outcome.STORED:
        return jsonify(streamId=stream_id, chunkIndex=data["chunkIndex"]), 200
    return jsonify(path=written.path), 201


@bp.get("/uploads/<stream_id>")
def stream_status(stream_id):
    if request.method == "HEAD":
        return _tus_head(_repo(), g.org, stream_id)
    return jsonify(uploads.stream_status(_repo(), g.org, stream_id))


@bp.delete("/uploads/<stream_id>")
def delete_stream(stream_id):
    """Ends a stream of either protocol (tus termination, or the chunk API's DELETE)."""
    if _is_tus():
        tus.require_version(request.headers)
    uploads.delete_stream(_repo(), g.org, stream_id)
    return "", 204


# -- tus 1.0 (CONTRACT 7) --------------------------------------------------------------------------

@bp.route("/uploads", methods=["OPTIONS"], provide_automatic_options=False)
def tus_options():
    return "", 204, tus.OPTIONS_HEADERS


def _tus_create(repo, org):
    tus.require_version(request.headers)
    length = tus.creation_length(request.headers)
    raw_metadata = request.headers.get("Upload-Metadata", "")
    metadata = tus.parse_metadata(raw_metadata)
    with_body = bool(request.content_length) or "Transfer-Encoding" in request.headers
    checksum = tus.parse_checksum(request.headers.get("Upload-Checksum"))
    if with_body:
        tus.require_body_type(request.mimetype)
    stream_id = tus_uploads.create_tus_upload(repo, org, length, metadata, raw_metadata)
    offset, path = 0, None
    if with_body:
        # creation-with-upload: a body that cannot be stored leaves nothing behind, the upload included.
        try:
            offset, path = _tus_append(repo, org, stream_id, 0, checksum)
        except Exception:
            with contextlib.suppress(Exception):
                uploads.delete_stream(repo, org, stream_id)
            raise
    # The upload was active just now: it expires a whole TTL from now.
    headers = tus.upload_headers(offset if with_body else None, tus_uploads.upload_expires(repo), path)
    headers["Location"] = f"/uploads/{stream_id}"
    # tus clients read Location; the body is the chunk API's creation answer, so that one description fits both.
    return jsonify(streamId=stream_id), 201, headers


def _tus_append(repo, org, stream_id, offset, checksum):
    body = tus.RequestBody(request.environ, request.content_length)
    written = tus_uploads.append_tus(repo, org, stream_id, offset, body, request.content_length, checksum)
    if written.outcome is Outcome.COMPLETED:
        get_metrics(current_app).streams_completed.inc()
    return written.offset, written.path


def _tus_patch(repo, org, stream_id):
    tus.require_version(request.headers)
    tus.require_body_type(request.mimetype)
    offset = tus.integer_header(request.headers, "Upload-Offset")
    checksum = tus.parse_checksum(request.headers.get("Upload-Checksum"))
    offset, path = _tus_append(repo, org, stream_id, offset, checksum)
    return "", 204, tus.upload_headers(offset, tus_uploads.upload_expires(repo), path)


def _tus_head(repo, org, stream_id):
    tus.require_version(request.headers)
    record, _, offset, expires = tus_uploads.tus_upload_state(repo, org, stream_id)
    headers = tus.upload_headers(offset, expires, record.path)
    headers.update({"Upload-Length": str(record.file_size), "Cache-Control": "no-store"})
    if record.upload_metadata:
        headers["Upload-Metadata"] = record.upload_metadata
    return "", 200, headers


@bp.after_request
def tus_answer_headers(response):
    """Every answer to a tus request says which tus version it speaks; a 412 also lists the versions spoken."""
    if _is_tus():
        response.headers["Tus-Resumable"] = TUS_VERSION
        if response.status_code == 412:
            response.headers["Tus-Version"] = TUS_VERSION
    return response


@bp.after_request
def headers_only_answers(response):
    """An answer of headers only (a tus HEAD or PATCH, OPTIONS, DELETE) has no body whose type to name: Flask's
    default `text/html` label is dropped."""
    if response.status_code in (200, 204) and not response.content_length and response.mimetype == "text/html":
        del response.headers["Content-Type"]
    return response


@bp.get(f"{MEDIA_PATH_ROOT}<any({', '.join(KIND_BY_SEGMENT)}):segment>/<path:name>")
def media(segment, name):
    opened, content_type = uploads.media_file(_repo(), g.org, media_path(KIND_BY_SEGMENT[segment], name))
    try:
        return _media_response(opened, content_type, name)
    except BaseException:
        opened.file.close()
        raise


def _media_response(opened, content_type, name):
    """The bytes of an opened media file, or the part a Range asks for, streamed in blocks: 200, 206, 304, or 416
    (raised), with the headers of CONTRACT 5. Closing the response closes the file."""
    if "HTTP_RANGE" in request.environ:
        # A range starts with a seek, which the server's own file wrapper (gunicorn's) cannot do: it would read up to it.
        body = FileWrapper(opened.file, MEDIA_BLOCK)
    else:
        # The server's wrapper, which can send a file on disk with sendfile(2).
        body = wrap_file(request.environ, opened.file, MEDIA_BLOCK)
    response = current_app.response_class(body, mimetype=content_type, direct_passthrough=True)
    response.content_length = opened.size
    response.set_etag(opened.etag)
    response.last_modified = opened.last_modified
    response.cache_control.no_cache = True
    response.headers["Content-Disposition"] = f"inline; filename={name}"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.make_conditional(request, accept_ranges=True, complete_length=opened.size)
    if request.method == "GET" and response.status_code in (200, 206):
        # Start reading where the body starts, now: a store that fails answers 503 before any header is sent. Once
        # they are, a failure can only cut the connection.
        opened.file.seek(response.content_range.start if response.status_code == 206 else 0)
    return response


@bp.errorhandler(RequestEntityTooLarge)
def body_too_large(error):
    # A body over OVERSIZED_BODY_READ_LIMIT (or sent without a Content-Length) is refused before it is read, so the
    # file's own size is not known: the body's size stands in.
    return jsonify(error=uploads.too_large_message(request.content_length, REQUEST_FILE_LIMIT)), 413


@bp.after_app_request
def sweep_when_due(response):
    """After the first response a worker sends, and then at most every few minutes (the repository keeps the time),
    sweep expired streams once the response has gone out: no request waits for it."""
    repo = _repo()
    if repo.sweep_due():
        response.call_on_close(_sweeper(repo))
    return response


def _sweeper(repo):
    expired = get_metrics(current_app).streams_expired

    def sweep():
        try:
            expired.inc(repo.sweep())
        except Exception:
            log.exception("sweeping expired upload streams failed")
    return sweep


def init_app(app):
    app.register_blueprint(bp)
