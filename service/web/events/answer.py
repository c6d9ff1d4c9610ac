"""Opening a stream in this worker's hub and answering with it: what GET /events and GraphQL subscriptions share.

The hub is made by the first stream a worker process serves, sized by the worker's threads, and told when the worker
stops (service.server.lifetime, handed in the WSGI environ).
"""
import threading

from flask import Response, current_app, request

from service.config import load_server_config
from service.interface import WORKER_ENVIRON
from service.storage import get_repository
from service.web.events import sse
from service.web.auth import token_directory
from service.web.events.hub import StreamHub
from service.web.observability import get_metrics

# The key of the app's hub in app.extensions.
HUB = "event_streams"
# One for all apps: making a hub is a few objects, made once per process and app.
_making = threading.Lock()


def hub_of(app, environ):
    """The app's StreamHub in this process, made by the first stream."""
    hub = app.extensions.get(HUB)
    if hub is None:
        with _making:
            hub = app.extensions.get(HUB)
            if hub is None:
                lifetime = environ.get(WORKER_ENVIRON)
                # Under another server than the service's worker (gthread, the embedded test double), the threads
                # it is configured with: WIS_THREADS.
                threads = lifetime.threads if lifetime is not None else load_server_config()["threads"]
                limit = app.config["EVENT_STREAMS_PER_WORKER"] or max(1, threads // 2)
                hub = app.extensions[HUB] = StreamHub(get_repository(app).events, limit,
                                                      get_metrics(app).event_streams,
                                                      token_directory(app).is_valid)
                if lifetime is not None:
                    lifetime.on_stop(hub.stop)
    return hub


def stream_answer(credential, wanted, position, frames_of):
    """The 200 answer of a new stream of the events of the credential's org after `position` (those of `wanted`) in
    this worker's hub, whose bytes the generator `frames_of(stream)` makes; EventStreamsFull (a 503) at once when the
    hub is full. The stream ends when the credential's token is no longer accepted (revoked)."""
    hub = hub_of(current_app, request.environ)
    hub.reserve()
    try:
        stream = hub.open(credential.org, wanted, position, request.environ.get("gunicorn.socket"), credential)
    except BaseException:
        hub.release()
        raise
    return sse_response(StreamBody(hub, stream, frames_of(stream)))


class StreamBody:
    """A stream's body for the WSGI server: the bytes its frames yield, then its place in the hub given back, also
    when the server closes the body before its first byte (a generator's own close would then run nothing)."""

    def __init__(self, hub, stream, frames):
        self._hub, self._stream, self._frames = hub, stream, frames

    def __iter__(self):
        return self._frames

    def close(self):
        try:
            self._frames.close()
        finally:
            self._hub.close(self._stream)


def sse_response(body):
    """A 200 answer of Server-Sent Events whose bytes `body` yields."""
    return Response(body, status=200, content_type=sse.CONTENT_TYPE, headers=sse.HEADERS)
