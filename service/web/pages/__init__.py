"""The preview pages (CONTRACT 11): one org's processes, products and stations as the operator will see them,
rendered on the server from the same domain reads as GraphQL, behind a browser session (service.web.sessions).

Modules: `blueprint` (the blueprint, the headers and errors every page shares), `auth` (login, logout, the
`login_required` of the views), `views` (one view per page: read, then render one template), `present` (how values
read: numbers, units, limits, styles), `graph` (where a product's processes go in its drawing). Templates are in
service/templates/pages/, the one stylesheet is service/static/pages.css.
"""
from flask import request
from werkzeug.exceptions import MethodNotAllowed, NotFound

from service.web.error_handlers import http_error_response
from service.web.pages import auth, views  # noqa: F401 (importing them puts their routes on the blueprint)
from service.web.pages.blueprint import bp, is_page_path, method_not_allowed_page, not_found_page


def _as_page(page):
    """An error handler that answers a page's path with `page(error)` and any other path as the API does (JSON)."""
    def handle(error):
        return page(error) if is_page_path(request.path) else http_error_response(error)

    return handle


def init_app(app):
    app.register_blueprint(bp)
    # An unknown path under /view/, or a method a page does not answer, is found before any view (so before the
    # blueprint's own handlers): the app's handlers of these two errors tell pages from the API by path.
    app.register_error_handler(NotFound, _as_page(not_found_page))
    app.register_error_handler(MethodNotAllowed, _as_page(method_not_allowed_page))
