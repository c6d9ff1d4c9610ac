"""Noticing that a stream's client hung up, for every stream of the worker at once: one thread and one selector over
their connections (gunicorn hands a request its socket in `environ["gunicorn.socket"]`).

A stream writes only now and then (an event, a keepalive every few seconds), and a write into a connection whose
client has gone may still succeed (the kernel buffers it), so writing alone would notice a hang-up late. Here a
connection that becomes readable is looked at without reading (MSG_PEEK): the end of the stream or a reset means its
client hung up, and the stream ends at once. A client that sends bytes on an open stream (nothing a Server-Sent
Events client does) is no longer watched: its stream then ends when a write fails.
"""
import logging
import selectors
import socket
import threading

log = logging.getLogger(__name__)

# The selector's wait between looks at whether it still has connections to watch.
IDLE_SECONDS = 5.0


class HangupWatch:
    """Ends a stream (`on_hangup(stream)`) as soon as its client closes the connection."""

    def __init__(self, on_hangup):
        self._on_hangup = on_hangup
        self._lock = threading.Lock()
        self._selector = None
        self._thread = None

    def watch(self, connection, stream):
        with self._lock:
            if self._selector is None:
                self._selector = selectors.DefaultSelector()
            try:
                self._selector.register(connection, selectors.EVENT_READ, stream)
            except (ValueError, KeyError, OSError):
                return  # closed already, or watched already: a write notices the rest
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="event-stream hang-ups", daemon=True)
                self._thread.start()

    def unwatch(self, connection):
        """Stop watching `connection` (before it is closed: a closed descriptor's number is soon another's)."""
        with self._lock:
            if self._selector is not None:
                try:
                    self._selector.unregister(connection)
                except (KeyError, ValueError):
                    pass

    def _run(self):
        while True:
            with self._lock:
                selector = self._selector
                if not selector.get_map():
                    self._thread = None
                    selector.close()
                    self._selector = None
                    return
            for key, _ in selector.select(IDLE_SECONDS):
                self._look_at(key.fileobj, key.data)

    def _look_at(self, connection, stream):
        try:
            hung_up = connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return  # readable no more
        except OSError:
            hung_up = True  # reset, or closed meanwhile
        self.unwatch(connection)
        if hung_up:
            self._on_hangup(stream)
