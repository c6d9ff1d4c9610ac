"""The uploads blueprint that every upload and media route is on; each view declares what it needs
(service.web.auth.requires): a write token for uploads, a read token or the pages' session for media, nothing for tus
discovery. An answer of headers only names no body type."""
from flask import Blueprint

bp = Blueprint("uploads", __name__)


@bp.after_request
def headers_only_answers(response):
    """An answer of headers only (a tus HEAD or PATCH, OPTIONS, DELETE) has no body whose type to name: Flask's
    default `text/html` label is dropped."""
    if response.status_code in (200, 204) and not response.content_length and response.mimetype == "text/html":
        del response.headers["Content-Type"]
    return response
