"""The webhook dispatcher of an app (CONTRACT 15; service.delivery.dispatcher): made with the app, started in each
process that serves it: by gunicorn's worker once it has loaded the app (service.gunicorn_config), by the test double
(service.testing.ThreadedServer), and otherwise by the first request a process serves, so that any WSGI server
delivers. An app made for tests of its own (TESTING) starts none unless told to."""
from flask import Flask, current_app

from service.delivery.dispatcher import DispatchSettings, WebhookDispatcher
from service.storage import get_repository
from service.web.observability import get_metrics


def init_app(app):
    repo = get_repository(app)

    def render(subscription, event):
        # Imported here: the GraphQL stack loads with the first fragment rendered, not with the app.
        from service.web.graphql import load_schema
        from service.web.graphql.webhook_fragments import fragment_body

        return fragment_body(load_schema(), repo, subscription, event)

    app.extensions["webhooks"] = WebhookDispatcher(repo, DispatchSettings.of(app.config), render,
                                                   get_metrics(app).webhooks)
    if not app.testing:
        app.before_request(_start_in_this_process)


def _start_in_this_process():
    current_app.extensions["webhooks"].start()


def _dispatcher_of(app):
    """The dispatcher of an app made by service.create_app, or None for another WSGI app (ours wrapped in a middleware,
    or an app of its own served with the shipped gunicorn config): ours then starts with its first request."""
    return app.extensions.get("webhooks") if isinstance(app, Flask) else None


def start(app, lifetime=None):
    """Start the app's dispatcher in this process; with the worker's `lifetime`, it claims nothing more once the
    worker stops (service.server.lifetime)."""
    dispatcher = _dispatcher_of(app)
    if dispatcher is None:
        return
    dispatcher.start()
    if lifetime is not None:
        lifetime.on_stop(lambda: dispatcher.stop(wait=False))


def stop(app):
    """Stop the app's dispatcher: nothing more is claimed, the attempts in flight finish (their timeout at most)."""
    dispatcher = _dispatcher_of(app)
    if dispatcher is not None:
        dispatcher.stop()
