"""The work-instruction service: `create_app()` is the WSGI entry (gunicorn "service:create_app()")."""
from flask import Flask, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from service import auth, cors, error_handlers, health, storage
from service.config import load_config
from service.interface import TUS_CONTENT_TYPE


def create_app(config_overrides=None):
    """Build the app: config -> storage -> observability -> CORS -> auth -> error handlers -> blueprints."""
    app = Flask(__name__)
    app.config.update(load_config(config_overrides))
    app.json.sort_keys = False

    storage.init_app(app)
    # Imported here, not at the top: service.gunicorn_config sets PROMETHEUS_MULTIPROC_DIR first,
    # and prometheus_client reads it once, when it is imported.
    from service import observability

    observability.init_app(app)
    cors.init_app(app)
    auth.init_app(app)
    error_handlers.init_app(app)
    app.before_request(refuse_oversized_bodies)

    # These import observability too, hence the same late import.
    from service import graphql, openapi, uploads

    graphql.init_app(app)
    uploads.init_app(app)
    openapi.init_app(app)
    health.init_app(app)
    if app.config["TEST_MODE"]:
        from service import testing_api

        testing_api.init_app(app)
    return app


def refuse_oversized_bodies():
    """413 on every route for a body over MAX_CONTENT_LENGTH, before any work is done.

    Werkzeug refuses such a body only when a view reads it (a view that answers without reading would
    not), and cuts a chunked body (no Content-Length) at the limit without a word, so a JSON view would
    see a truncated document and answer 400.
    """
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    view = current_app.view_functions.get(request.endpoint)
    if request.mimetype == TUS_CONTENT_TYPE and getattr(view, "reads_raw_body", False):
        # A tus body is bounded by its upload's Upload-Length, which the view checks before reading it.
        return
    if request.content_length is not None:
        if request.mimetype == "multipart/form-data":
            # An upload view reads a body somewhat over the limit itself, to name its file's size in the 413.
            limit = max(limit, getattr(view, "oversized_body_read_limit", limit))
        if request.content_length > limit:
            raise RequestEntityTooLarge()
    elif request.is_json and len(request.get_data()) >= limit:  # kept: the view reads the same bytes
        raise RequestEntityTooLarge()
