"""Change events as they commit (CONTRACT 14): the stream `GET /events` (view) and GraphQL subscriptions over
Server-Sent Events (subscriptions), both fed by this worker process's hub (hub, stream, hangups), opened and answered
the same way (answer) and written as Server-Sent Events (sse).
"""
from service.web.events.view import bp


def init_app(app):
    """Serve GET /events (the hub is made by the first stream)."""
    app.register_blueprint(bp)
