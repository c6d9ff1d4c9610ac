"""The upload API of SPEC 4.3-4.5 (CONTRACT 5): single-request uploads, chunked streams and their chunks, a stream's
status and its removal. Parse and validate, call one domain function, shape the response; a request on these URLs
that speaks tus goes to service.web.uploads.tus_views.

The views import their schemas (service.web.uploads.schemas, so marshmallow) when they first run: an app that loads on
first request (LOAD_ON_FIRST_REQUEST, the embedded test double) does not pay for marshmallow before an upload; any
other app has imported them in service.web.uploads.init_app."""
import contextlib

from flask import current_app, g, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from service.web.auth import WRITE_TOKEN, requires
from service.web.body_limits import body_too_large_message
from service.domain import uploads
from service.errors import BodyTooLarge, InvalidRequest, MalformedBody
from service.interface import FORM_FIELD_LIMIT, MAX_REQUEST_BODY, MB, REQUEST_FILE_LIMIT
from service.web.observability import get_metrics
from service.storage import get_repository
from service.storage.contract import Outcome
from service.web.uploads import multipart, tus_headers, tus_views
from service.web.uploads.blueprint import bp
from service.web.uploads.request_body import RequestBody


def _repo():
    return get_repository(current_app)


def _body():
    """The request body's blocks as `multipart.parse` takes them: received in place (RequestBody.in_place), up to the
    Content-Length (held to its limit by service.web.body_limits, which also gives a chunked body its length)."""
    return RequestBody(request.environ, request.content_length).in_place()


def _refuse_oversized_file(destination_limits):
    """For a multipart body over MAX_REQUEST_BODY (service.web.body_limits lets one through up to its FILE_FORM_READ_LIMIT),
    a 413 naming its file's size: the body is read, its file counted, not kept. `destination_limits(fields)` gives
    the limits of the destination the fields name, beside the per-request one. A body within the limit passes."""
    if (request.mimetype != "multipart/form-data" or request.content_length is None
            or request.content_length <= MAX_REQUEST_BODY):
        return
    try:
        fields, files = multipart.parse(_body(), request.content_type, lambda fields_so_far: multipart.ByteCounter())
    except (MalformedBody, BodyTooLarge):
        # Not a readable form: the body's own size is all there is to say.
        raise RequestEntityTooLarge() from None
    if multipart.FILE_PART in files:
        uploads.check_size(files[multipart.FILE_PART][1].size, REQUEST_FILE_LIMIT, *destination_limits(fields))
    # The file itself is within its limits; the form fields around it made the body too large.
    raise BodyTooLarge(body_too_large_message(
        request.content_length, MAX_REQUEST_BODY,
        f": at most {REQUEST_FILE_LIMIT // MB} MB of file and {FORM_FIELD_LIMIT // 1024} KB of form fields"))


@contextlib.contextmanager
def _multipart(new_file):
    """Parse the multipart body; yield (form fields, (file name, received file)). The file part goes straight to disk
    through `new_file(fields sent before the file)` and is removed afterwards unless a domain function moved it into
    place; any other part sent as a file is refused before anything of it is written (multipart.parse)."""
    if request.mimetype != "multipart/form-data":
        raise InvalidRequest("send the file as multipart/form-data")
    created = []

    def open_file(fields):
        created.append(new_file(fields))
        return created[-1]

    try:
        form, files = multipart.parse(_body(), request.content_type, open_file)
        if multipart.FILE_PART not in files:
            raise InvalidRequest(f"{multipart.FILE_PART}: is required, as a multipart file part with a filename")
        yield form, files[multipart.FILE_PART]
    finally:
        for incoming in created:
            incoming.discard()


# OPTIONS /uploads is tus discovery (service.web.uploads.tus_views), not Flask's automatic answer.
@bp.route("/uploads", methods=["POST"], provide_automatic_options=False)
@requires(WRITE_TOKEN)
def create_upload():
    """Single-request upload (multipart) or creation of a chunked stream (JSON)."""
    repo, org = _repo(), g.org
    if tus_views.speaks_tus():
        return tus_views.create(repo, org)
    from service.web.uploads.schemas import SingleUploadSchema, StreamCreateSchema, load, read_json

    if request.is_json:
        data = load(StreamCreateSchema(), read_json(request.get_data()))
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
@requires(WRITE_TOKEN)
def send_chunk(stream_id):
    repo, org = _repo(), g.org
    if tus_views.speaks_tus():
        return tus_views.patch(repo, org, stream_id)
    uploads.require_chunked(uploads.require_stream(repo, org, stream_id))
    _refuse_oversized_file(lambda fields: ())  # a chunk has no limit but the per-request one

    def new_file(fields):
        return uploads.new_chunk_file(repo, org, stream_id, fields.get("chunkIndex"))

    from service.web.uploads.schemas import ChunkSchema, load

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
@requires(WRITE_TOKEN)
def stream_status(stream_id):
    if request.method == "HEAD":
        return tus_views.head(_repo(), g.org, stream_id)
    return jsonify(uploads.stream_status(_repo(), g.org, stream_id))


@bp.delete("/uploads/<stream_id>")
@requires(WRITE_TOKEN)
def delete_stream(stream_id):
    """Ends a stream of either protocol (tus termination, or the chunk API's DELETE)."""
    if tus_views.speaks_tus():
        tus_headers.require_version(request.headers)
    uploads.delete_stream(_repo(), g.org, stream_id)
    return "", 204

