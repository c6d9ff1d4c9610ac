"""The uploads blueprint that every upload and media route is on: each needs the token (but tus discovery), and an
answer of headers only names no body type."""
from flask import Blueprint, request

from service.web.auth import require_org
from service.web.sessions import require_org_or_session

bp = Blueprint("uploads", __name__)
MEDIA_ENDPOINT = "uploads.media"


@bp.before_request
def authenticate():
    # tus clients discover the server with OPTIONS /uploads before they have anything to authenticate.
    if request.endpoint == "uploads.tus_options":
        return
    # A page's <img> and <video> cannot send the token header: reading media also accepts a preview session's cookie
    # (CONTRACT 11).
    if request.endpoint == MEDIA_ENDPOINT and request.method in ("GET", "HEAD"):
        require_org_or_session()
        return
    require_org()


@bp.after_request
def headers_only_answers(response):
    """An answer of headers only (a tus HEAD or PATCH, OPTIONS, DELETE) has no body whose type to name: Flask's
    default `text/html` label is dropped."""
    if response.status_code in (200, 204) and not response.content_length and response.mimetype == "text/html":
        del response.headers["Content-Type"]
    return response
