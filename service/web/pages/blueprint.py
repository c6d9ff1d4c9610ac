"""The pages' blueprint and what every page shares: its security headers, its errors as pages, the templates'
filters, and the paths that count as pages."""
import logging
import secrets

from flask import Blueprint, g, make_response, render_template, request

from werkzeug.exceptions import HTTPException, NotFound

from service.errors import ServiceError, http_status
from service.web.pages.present import FILTERS

log = logging.getLogger(__name__)

bp = Blueprint("pages", __name__)
for _name, _function in FILTERS.items():
    bp.add_app_template_filter(_function, _name)

VIEW_ROOT = "/view/"


def is_page_path(path):
    """True for the paths of the pages: `/` and everything under `/view/`."""
    return path == "/" or path == VIEW_ROOT.rstrip("/") or path.startswith(VIEW_ROOT)


def page_route(rule, **options):
    """A page's route: GET only (Flask adds HEAD), no automatic OPTIONS answer."""
    return bp.route(rule, methods=options.pop("methods", ["GET"]), provide_automatic_options=False, **options)


def style_nonce():
    """The nonce of this page's one inline <style> element (the colours of styled texts), made when first asked."""
    if "style_nonce" not in g:
        g.style_nonce = secrets.token_urlsafe(16)
    return g.style_nonce


bp.add_app_template_global(style_nonce)


@bp.after_request
def page_headers(response):
    """Only this service's own stylesheet, images, videos and event stream; no script at all, no framing; nothing
    kept by caches (a page shows one org's data, and a shared tablet's back button after logout must not show it
    again). `connect-src 'self'` lets an EventSource opened in a page (an extension, a user script, a page of ours to
    come) follow GET /events with the session's cookie."""
    styles = "'self'" + (f" 'nonce-{g.style_nonce}'" if "style_nonce" in g else "")
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; style-src {styles}; img-src 'self'; media-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Cache-Control"] = "no-store"
    response.vary.add("Cookie")
    return response


class DeletedObject(NotFound):
    """A 404 for an object that existed and was deleted: its page links to its history, where it can be restored."""

    def __init__(self, description, history_url):
        super().__init__(description)
        self.history_url = history_url


def error_page(status, title, message, link=None):
    """An error answered as a page, with the pages' headers; `link` (url, words) leads on from it."""
    return page_headers(make_response(
        render_template("pages/error.html", title=title, message=message, link=link), status))


@bp.errorhandler(ServiceError)
def service_error_page(error):
    # The store's own conditions (503 while the database is out of reach, 507 when the disk is full...), as a page.
    return error_page(http_status(error), "The service cannot answer now", error.message)


@bp.errorhandler(HTTPException)
def http_error_page(error):
    # A request a view refuses (a form it cannot read, say): werkzeug's status and words, as a page.
    return error_page(error.code, error.name, error.description)


@bp.errorhandler(Exception)
def unexpected_error_page(error):
    # Logged in full on the server, never shown.
    log.exception("unhandled error on a page")
    return error_page(500, "Something went wrong", "The service failed to show this page; the error is logged.")


def not_found_page(error):
    """A 404 as a page; a view's own NotFound says what was not found (an unknown id, or another org's)."""
    said = error.description if error.description != NotFound.description else "There is no such page."
    history_url = getattr(error, "history_url", None)
    return error_page(404, "Not found", said, (history_url, "Its history") if history_url else None)


def method_not_allowed_page(error):
    response = error_page(405, "Not allowed", f"{request.method} is not allowed here: pages are only read.")
    response.headers["Allow"] = ", ".join(sorted(error.valid_methods or ["GET", "HEAD"]))
    return response
