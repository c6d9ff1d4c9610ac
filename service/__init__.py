"""The work-instruction service: `create_app()` is the WSGI entry (gunicorn "service:create_app()").

Nothing is imported here until an app is built: importing any module of the package (the pytest plugin, which pytest
loads in every project that has the package installed, or the client) must not pay for Flask and the rest.
"""


def create_app(config_overrides=None):
    """Build the app: config -> storage -> observability -> CORS -> error handlers -> body limits -> auth and sessions
    -> blueprints.

    What only some requests need (the GraphQL endpoint: graphql-core, ariadne and the schema; marshmallow for the
    request schemas of uploads and test mode) is loaded here, so that no request waits for it and a broken schema stops
    the start, unless the override LOAD_ON_FIRST_REQUEST is true: then the first request that needs it loads it (the
    embedded test double, service.testing, which must answer /healthz fast).
    """
    from flask import Flask

    from service import storage
    from service.web import auth, body_limits, cors, error_handlers, health, sessions
    from service.config import load_config

    app = Flask(__name__)
    app.config.update(load_config(config_overrides))
    app.json.sort_keys = False

    storage.init_app(app)
    # Imported here, not at the top: service.gunicorn_config sets PROMETHEUS_MULTIPROC_DIR first,
    # and prometheus_client reads it once, when it is imported.
    from service.web import observability

    observability.init_app(app)
    cors.init_app(app)
    error_handlers.init_app(app)
    body_limits.init_app(app)
    # After the body limits (a body is held to its limit first), before anything else a request does: its scope.
    auth.init_app(app)
    sessions.init_app(app)

    # These import observability too, hence the same late import.
    from service.web import events, graphql, openapi, pages, uploads, webhooks

    graphql.init_app(app)
    uploads.init_app(app)
    events.init_app(app)
    pages.init_app(app)
    openapi.init_app(app)
    health.init_app(app)
    webhooks.init_app(app)
    if app.config["TEST_MODE"]:
        from service.testing import api as testing_api

        testing_api.init_app(app)
    return app

