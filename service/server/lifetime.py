"""What the worker tells the application about itself, for answers that last as long as the client wants (event
streams): how many threads serve requests, and that the worker is stopping (gunicorn's graceful shutdown: SIGTERM,
SIGHUP's new workers, a max-requests restart), so that they end at once instead of holding the shutdown for
`graceful_timeout`. Handed to every request in its WSGI environ under service.interface.WORKER_ENVIRON; nothing here
knows what a stream is."""
import logging
import threading

log = logging.getLogger(__name__)


class WorkerLifetime:
    """One worker process's threads and stop, as long answers see them."""

    def __init__(self, threads):
        self.threads = threads
        self._lock = threading.Lock()
        self._callbacks = []
        self.stopping = False

    def on_stop(self, callback):
        """Call `callback()` once when the worker stops (at once when it has stopped already)."""
        with self._lock:
            if not self.stopping:
                self._callbacks.append(callback)
                return
        callback()

    def stop(self):
        """The worker stops taking requests: tell every callback, once (called by the worker's event loop)."""
        with self._lock:
            if self.stopping:
                return
            self.stopping = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 (the event loop must outlive what an application asked for)
                log.exception("a stop callback failed")
