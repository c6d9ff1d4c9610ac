"""Browser clients on other origins (CORS, CONTRACT 9): pages served from an origin in WIS_CORS_ORIGINS may call
every endpoint; other origins get no CORS headers, and with no origins configured nothing here is installed.

A module of its own rather than flask-cors: flask-cors answers a preflight after the view (in after_request), so the
token check of the blueprints (before_request) would refuse every preflight with 401, and it allows one configured
list of methods where a preflight here names the methods of the requested URL. What is left is a few lines.
"""
from flask import current_app, request

from service.interface import REQUEST_ID_HEADER, TOKEN_HEADER, TOKEN_HEADER_ALIAS

# The request headers a page may send (lower case, as browsers list them in Access-Control-Request-Headers).
ALLOWED_REQUEST_HEADERS = (TOKEN_HEADER, TOKEN_HEADER_ALIAS, "content-type", "tus-resumable", "upload-length",
                           "upload-offset", "upload-metadata", "upload-checksum", "last-event-id")
# The response headers a page may read besides the CORS-safelisted ones (Content-Type, Content-Length...).
EXPOSED_HEADERS = ("Location", "Upload-Offset", "Upload-Length", "Upload-Expires", "Tus-Resumable", "Tus-Version",
                   "Tus-Max-Size", "Tus-Extension", "Media-Path", "ETag", REQUEST_ID_HEADER)
# How long a browser may reuse a preflight's answer (Chromium caps it at 2 hours).
PREFLIGHT_MAX_AGE_SECONDS = 600


def _listed_origin():
    """The request's Origin when it is one of the configured origins, else None."""
    origin = request.headers.get("Origin")
    return origin if origin in current_app.extensions["cors"] else None


def _is_preflight():
    # A plain OPTIONS (tus discovery) has no Access-Control-Request-Method and goes on to its view.
    return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers


def answer_preflight():
    """before_request: answer a listed origin's preflight, before any token check (preflights carry no token)."""
    if not _is_preflight() or _listed_origin() is None:
        return None
    # Every rule on this path counts (a path may have rules on several blueprints).
    methods = current_app.create_url_adapter(request).allowed_methods()
    if not methods:
        return None  # no such path: its 404 goes out, with the CORS headers so a page can read it
    response = current_app.response_class(status=204)
    del response.headers["Content-Type"]  # no body, so no type (Flask's default would say text/html)
    response.headers["Access-Control-Allow-Methods"] = ", ".join(sorted(methods))
    response.headers["Access-Control-Allow-Headers"] = ", ".join(ALLOWED_REQUEST_HEADERS)
    response.headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE_SECONDS)
    return response


def add_cors_headers(response):
    """after_request: every response to a listed origin, errors included (so a page can read the JSON error)."""
    # Caches must keep apart the answers to different origins (and to no origin).
    response.vary.add("Origin")
    origin = _listed_origin()
    if origin is not None:
        response.headers["Access-Control-Allow-Origin"] = origin
        if not _is_preflight():
            response.headers["Access-Control-Expose-Headers"] = ", ".join(EXPOSED_HEADERS)
    return response


def init_app(app):
    """Install the CORS hooks when WIS_CORS_ORIGINS lists origins (app hooks run before the blueprints' token checks)."""
    origins = frozenset(app.config["CORS_ORIGINS"])
    if not origins:
        return
    app.extensions["cors"] = origins
    app.before_request(answer_preflight)
    app.after_request(add_cors_headers)
