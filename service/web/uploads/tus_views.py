"""tus 1.0 on the upload resources (CONTRACT 7): discovery, creation (with upload), PATCH, HEAD, and the tus headers
of every tus answer. tus shares its URLs with the chunk API: the views of service.web.uploads.chunks hand a request that
speaks tus to the functions here."""
import contextlib

from flask import current_app, jsonify, request

from service.domain import tus_uploads
from service.domain import uploads
from service.errors import BodyCutOff, InvalidRequest
from service.interface import TUS_VERSION
from service.web.auth import PUBLIC, requires
from service.web.error_handlers import service_error_response
from service.web.observability import get_metrics
from service.storage.contract import Outcome
from service.web.uploads import tus_headers
from service.web.uploads.blueprint import bp
from service.web.uploads.request_body import RequestBody

# The endpoints tus shares with the chunk API.
SHARED_ENDPOINTS = {"uploads.create_upload", "uploads.send_chunk", "uploads.stream_status", "uploads.delete_stream"}


def speaks_tus():
    """Whether the request is a tus request on an endpoint tus shares with the chunk API."""
    if request.endpoint not in SHARED_ENDPOINTS:
        return False
    # HEAD on a stream exists only in tus: the chunk API reads a stream's status with GET.
    return request.method == "HEAD" or tus_headers.is_tus_request(request.headers, request.mimetype)


# OPTIONS /uploads is tus discovery, not Flask's automatic answer.
@bp.route("/uploads", methods=["OPTIONS"], provide_automatic_options=False)
@requires(PUBLIC)  # tus clients discover the server before they have anything to authenticate
def tus_options():
    return "", 204, tus_headers.OPTIONS_HEADERS


def create(repo, org):
    """POST /uploads speaking tus: create an upload, with the first bytes when a body comes along."""
    tus_headers.require_version(request.headers)
    length = tus_headers.creation_length(request.headers)
    raw_metadata = request.headers.get("Upload-Metadata", "")
    metadata = tus_headers.parse_metadata(raw_metadata)
    with_body = bool(request.content_length) or "Transfer-Encoding" in request.headers
    checksum = tus_headers.parse_checksum(request.headers.get("Upload-Checksum"))
    if with_body:
        tus_headers.require_body_type(request.mimetype)
    stream_id = tus_uploads.create_tus_upload(repo, org, length, metadata, raw_metadata)
    offset, path = 0, None
    if with_body:
        try:
            offset, path = _append(repo, org, stream_id, 0, checksum)
        except BodyCutOff as cut_off:
            if not cut_off.offset:
                _forget(repo, org, stream_id)
                raise InvalidRequest("the body ended before its Content-Length and none of it arrived; the upload "
                                     "was not created") from None
            # What arrived is committed (tus core keeps a cut-off body): the upload stays, and the error answer says
            # where it is and its offset, so that the client resumes it instead of sending the file again.
            response = service_error_response(cut_off)
            response.headers.update(_creation_headers(repo, stream_id, cut_off.offset))
            return response
        except Exception:
            # creation-with-upload: a body that cannot be stored leaves nothing behind, the upload included.
            _forget(repo, org, stream_id)
            raise
    # tus clients read Location; the body is the chunk API's creation answer, so that one description fits both.
    return jsonify(streamId=stream_id), 201, _creation_headers(repo, stream_id, offset if with_body else None, path)


def _creation_headers(repo, stream_id, offset, path=None):
    # The upload was active just now: it expires a whole TTL from now.
    headers = tus_headers.upload_headers(offset, tus_uploads.upload_expires(repo), path)
    headers["Location"] = f"/uploads/{stream_id}"
    return headers


def _forget(repo, org, stream_id):
    """Remove an upload whose creation failed; best effort (the expiry sweep removes what this cannot)."""
    with contextlib.suppress(Exception):
        uploads.delete_stream(repo, org, stream_id)


def patch(repo, org, stream_id):
    """PATCH /uploads/<id> speaking tus: append the body at its Upload-Offset."""
    tus_headers.require_version(request.headers)
    tus_headers.require_body_type(request.mimetype)
    offset = tus_headers.integer_header(request.headers, "Upload-Offset")
    checksum = tus_headers.parse_checksum(request.headers.get("Upload-Checksum"))
    offset, path = _append(repo, org, stream_id, offset, checksum)
    return "", 204, tus_headers.upload_headers(offset, tus_uploads.upload_expires(repo), path)


def head(repo, org, stream_id):
    """HEAD /uploads/<id>: the upload's offset, length and metadata, for a client to resume from."""
    tus_headers.require_version(request.headers)
    record, _, offset, expires = tus_uploads.tus_upload_state(repo, org, stream_id)
    headers = tus_headers.upload_headers(offset, expires, record.path)
    headers.update({"Upload-Length": str(record.file_size), "Cache-Control": "no-store"})
    if record.upload_metadata:
        headers["Upload-Metadata"] = record.upload_metadata
    return "", 200, headers


def _append(repo, org, stream_id, offset, checksum):
    body = RequestBody(request.environ, request.content_length)
    written = tus_uploads.append_tus(repo, org, stream_id, offset, body, request.content_length, checksum)
    if written.outcome is Outcome.COMPLETED:
        get_metrics(current_app).streams_completed.inc()
    return written.offset, written.path


@bp.after_request
def tus_answer_headers(response):
    """Every answer to a tus request says which tus version it speaks; a 412 also lists the versions spoken."""
    if speaks_tus():
        response.headers["Tus-Resumable"] = TUS_VERSION
        if response.status_code == 412:
            response.headers["Tus-Version"] = TUS_VERSION
    return response
