"""What one process knows about its database: up, or down since when and why (CONTRACT 13).

While the database is known to be down, requests that need it are refused at once instead of each waiting for the
connection pool; a watcher thread tries a connection of its own every PROBE_INTERVAL_SECONDS and, the moment one
succeeds, says the database is back. The watcher runs only between a suspicion (a connection lost or refused) and
the database's return: a healthy process has no thread and opens no connection for it.
"""
import logging
import os
import threading
import time

log = logging.getLogger(__name__)

# How often a process whose database is down tries to connect: the time from the database's return to requests served
# again is at most this plus one connection.
PROBE_INTERVAL_SECONDS = 1.0


class Circuit:
    """`probe()` raises when the database does not answer; `went_down(cause)` and `came_back()` are called by the
    watcher thread, once per outage each (they drop and reopen the connection pool)."""

    def __init__(self, probe, went_down, came_back, interval=PROBE_INTERVAL_SECONDS, clock=time.monotonic):
        self._probe = probe
        self._went_down = went_down
        self._came_back = came_back
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._cause = None
        self._down_since = None
        self._watcher = None
        self._closed = threading.Event()
        self.outages = 0

    @property
    def cause(self):
        """Why the database is down (libpq's message), or None while it is not known to be."""
        return self._cause

    def suspect(self):
        """Something suggests the database is gone (a connection refused or lost): find out now, in the background."""
        with self._lock:
            if self._closed.is_set() or (self._watcher is not None and self._watcher.is_alive()):
                return
            self._watcher = threading.Thread(target=self._watch, name="wis-database-watcher", daemon=True)
            self._watcher.start()

    def settle(self, timeout):
        """Wait up to `timeout` seconds while a suspicion is being checked and nothing is known yet."""
        watcher = self._watcher
        if watcher is not None and self._cause is None:
            watcher.join(timeout)

    def close(self):
        """Stop watching (the process is done with the database)."""
        self._closed.set()

    def _watch(self):
        while not self._closed.is_set():
            try:
                self._probe()
            except Exception as error:  # the probe says why in libpq's words: that is the cause to report
                cause = " ".join(str(error).split())
                if self._cause is None:
                    self._down_since = self._clock()
                    self.outages += 1
                    self._cause = cause
                    # Once per outage, not per attempt.
                    log.error("the database (PostgreSQL) is unreachable: %s; requests that need it answer 503 until "
                              "it is back (process %s tries again every %s s)", cause, os.getpid(), self._interval)
                    self._went_down(cause)
                self._cause = cause
                self._closed.wait(self._interval)
                continue
            if self._cause is not None:
                self._came_back()
                log.warning("the database (PostgreSQL) answers again after %.1f s down",
                            self._clock() - self._down_since)
                self._cause = None
            return
