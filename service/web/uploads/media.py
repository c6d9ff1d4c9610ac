"""Serving published media (CONTRACT 5): the bytes, or the range asked for, with ETag, Last-Modified and nosniff."""
from flask import current_app, g, request
from werkzeug.wsgi import FileWrapper, wrap_file

from service.domain import uploads
from service.interface import KIND_BY_SEGMENT, MB, MEDIA_PATH_ROOT, media_path
from service.storage import get_repository
from service.web.auth import READ_OR_SESSION, requires
from service.web.uploads.blueprint import bp

# Media are sent in blocks of this size: a 500 MB video costs a worker one block of memory, and a read of the object
# store one ranged GET per response, not one per block.
MEDIA_BLOCK = MB


@bp.get(f"{MEDIA_PATH_ROOT}<any({', '.join(KIND_BY_SEGMENT)}):segment>/<path:name>")
# A page's <img> and <video> cannot send the token header: reading media also accepts a preview session's cookie
# (CONTRACT 11).
@requires(READ_OR_SESSION)
def media(segment, name):
    opened, content_type = uploads.media_file(get_repository(current_app), g.org,
                                              media_path(KIND_BY_SEGMENT[segment], name))
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
    if g.get("by_session"):
        # Read with a session's cookie: a cache keeps the answer apart from those to other cookies.
        response.vary.add("Cookie")
    response.make_conditional(request, accept_ranges=True, complete_length=opened.size)
    if request.method == "GET" and response.status_code in (200, 206):
        # Start reading where the body starts, now: a store that fails answers 503 before any header is sent. Once
        # they are, a failure can only cut the connection.
        opened.file.seek(response.content_range.start if response.status_code == 206 else 0)
    return response
