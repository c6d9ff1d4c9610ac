"""One open event stream: the events the hub hands it, read by the thread that answers its client, in seq order, each
once, until it ends.

The hub reads each new event once for all the streams of its org and offers it to each (`offer`); a stream keeps what
it wants of them until its thread writes them out. A stream that is behind (it started from an older seq, or its
client reads more slowly than events come and PENDING_LIMIT filled up) reads from the store itself, up to the seq the
hub had reached, then takes the hub's events again: what a slow client costs is bounded, and no event is missed or
sent twice (`position` is the last seq sent or passed over).
"""
import enum
import threading
import time
from collections import deque

# Events a stream holds for its client; past this it drops them and reads them from the store when its client is ready.
PENDING_LIMIT = 1000
# Events read from the store at once by a stream that is behind.
READ_PAGE = 100


class Ending(enum.Enum):
    """Why a stream ends."""
    HUNG_UP = "the client closed the connection"
    STOPPING = "the worker is stopping"
    RENUMBERED = "the org's events were numbered again (a test-mode reset or restore)"
    REVOKED = "the token it was opened with (or its session's) is no longer accepted"


class EventStream:
    """One client's stream of one org's events (those of `wanted`, a set of (kind, change); None: every event), opened
    with `credential` (service.domain.tokens.Credential; None: nothing to check)."""

    def __init__(self, org, wanted, position, connection=None, credential=None):
        self.org, self.wanted, self.connection, self.credential = org, wanted, connection, credential
        self.position = position  # the last seq sent or passed over (the stream's thread alone moves it)
        self.ending = None  # an Ending, once the stream ends
        self.oldest = None  # with Ending.RENUMBERED: the oldest seq now kept
        self._condition = threading.Condition()
        self._pending = deque()
        self._read_to = None  # while set, the events up to this seq are read from the store, not taken from the hub

    # -- the hub's side ------------------------------------------------------------------------------------------------

    def read_from_store_to(self, seq):
        """The hub has handed out the events up to `seq` already: this stream reads those it still needs itself."""
        with self._condition:
            self._read_to = seq
            self._condition.notify()

    def offer(self, events, cursor):
        """The org's next events (oldest first), the hub having read up to `cursor`."""
        with self._condition:
            if self._read_to is not None:
                self._read_to = cursor
            else:
                before = len(self._pending)
                self._pending.extend(event for event in events if self._wants(event))
                if len(self._pending) > PENDING_LIMIT:
                    self._pending.clear()
                    self._read_to = cursor
                elif len(self._pending) == before:
                    return  # nothing for this stream: its thread sleeps on
            self._condition.notify()

    def end(self, ending, oldest=None):
        with self._condition:
            if self.ending is None:
                self.ending, self.oldest = ending, oldest
            self._condition.notify()

    @property
    def held(self):
        """How many events the stream holds for its client."""
        with self._condition:
            return len(self._pending)

    def _wants(self, event):
        return self.wanted is None or (event.kind, event.change) in self.wanted

    # -- the stream's thread -------------------------------------------------------------------------------------------

    def batches(self, events_store, idle_seconds):
        """Yield the stream's next events (a list, oldest first) as they come, or [] once `idle_seconds` pass without
        any (time for a keepalive); return when the stream ends (`ending` says why)."""
        while True:
            batch, read_to = self._next(idle_seconds)
            if self.ending is not None:
                return
            if not batch and read_to is None:
                yield []  # idle
                continue
            passed = 0
            if read_to is not None:
                batch, passed = self._read(events_store, read_to)
            fresh = [event for event in batch if event.seq > self.position]
            self.position = max(self.position, passed, fresh[-1].seq if fresh else 0)
            if fresh:  # what the store or the hub gave may all have been sent already
                yield fresh

    def _next(self, idle_seconds):
        """(events taken from the hub, None), or ([], the seq to read the store up to), or ([], None) when idle or
        ended."""
        deadline = time.monotonic() + idle_seconds
        with self._condition:
            while self.ending is None:
                if self._read_to is not None:
                    if self.position < self._read_to:
                        return [], self._read_to
                    self._read_to = None
                if self._pending:
                    batch = list(self._pending)
                    self._pending.clear()
                    return batch, None
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._condition.wait(left)
        return [], None

    def _read(self, events_store, read_to):
        """(a page of the wanted events after `position` from the store, the seq the read went through: `read_to` when
        it reached the end of what the store had, as the hub read no further; else nothing more than the page)."""
        found = events_store.read(self.org, self.position, READ_PAGE, self.wanted)
        return found, (read_to if len(found) < READ_PAGE else 0)
