"""The event streams of one worker process and the one thread that feeds them (CONTRACT 14, "Stream").

The thread waits on the store's commit watcher (`repo.events.watcher()`: woken by a commit of any worker or node, at
no CPU cost while nothing commits; FALLBACK_SECONDS bound the wait in case a wake is lost), then reads the new events
of each org that has open streams here once, and offers them to those streams. Streams block without CPU until
something is offered, their client hangs up (service.web.events.hangups), or the worker stops. The thread runs only
while streams are open.

The hub also holds the cap: at most `limit` streams at once in this worker (WIS_EVENT_STREAMS_PER_WORKER, by default
half the worker's threads), each of which holds a thread while its client follows.

A test-mode reset or restore numbers an org's events again from 1: the hub sees the latest seq go below the one it
read, or the event at that seq become another, and ends the org's streams with Ending.RENUMBERED. Only those open
during the reset end: a stream that opens makes the same check first (the thread may not have read since the reset),
a stream whose start was taken before the reset ends with them, and the hub forgets its cursors when its thread ends.

The thread also ends the streams whose token is no longer accepted (Ending.REVOKED: CONTRACT 16 wants them ended within
5 s): it looks at least every ACCESS_CHECK_SECONDS, and a revocation reaches this process's token directory within
about a second (service.domain.token_directory), so a stream ends about 3 s after its token is revoked at the latest.
Between the looks the thread waits on the watcher as before; it reads the orgs' events when the watcher wakes it, and
otherwise every FALLBACK_SECONDS.
"""
import contextlib
import logging
import threading
import time
from typing import NamedTuple

from service.errors import EventStreamsFull
from service.web.events.hangups import HangupWatch
from service.web.events.stream import Ending, EventStream

log = logging.getLogger(__name__)

# The longest the thread waits for the watcher before it reads the orgs' bounds anyway.
FALLBACK_SECONDS = 3.0
# The longest a stream whose token was revoked goes on before the thread looks (CONTRACT 16: within 5 s in all).
ACCESS_CHECK_SECONDS = 2.0
# Events read from the store at once and offered to the streams.
OFFER_PAGE = 1000


class Cursor(NamedTuple):
    """How far the hub has read an org's events: the seq, and the event of that seq (None when not read)."""
    seq: int
    event: object = None


class Trouble:
    """Logs the first failure of the hub's thread until a pass succeeds again, and then that it did: an engine's
    outage is a line when it starts and one when it ends, not one every FALLBACK_SECONDS."""

    def __init__(self):
        self._failing = False

    def failed(self, doing, error):
        if not self._failing:
            log.warning("event streams: %s failed (%s); trying again every %g s", doing, error, FALLBACK_SECONDS)
            self._failing = True

    def passed(self):
        if self._failing:
            log.warning("event streams: reading events works again")
            self._failing = False


class StreamHub:
    """This process's open streams, their cap, and the thread that feeds them."""

    def __init__(self, events_store, limit, gauge=None, still_valid=None):
        """`gauge`: a metric (inc, dec) of the streams open, if any; `still_valid(credential)`: whether a stream's
        token is still accepted (service.domain.token_directory.TokenDirectory.is_valid), if streams are to end when
        it is not."""
        self._events = events_store
        self.limit = limit
        self._gauge = gauge
        self._still_valid = still_valid
        self._lock = threading.Lock()  # the streams and the thread
        self._streams = {}  # org -> set of EventStream
        self._count = 0
        self._stopping = False
        self._thread = None
        self._reading = threading.Lock()  # one pass over the orgs at a time
        self._cursors = {}  # org -> Cursor, for the orgs followed (under _reading)
        self._hangups = HangupWatch(lambda stream: stream.end(Ending.HUNG_UP))
        self._trouble = Trouble()

    def reserve(self):
        """Take a place for a new stream, or raise EventStreamsFull (at once, whatever the thread is doing)."""
        with self._lock:
            if self._stopping or self._count >= self.limit:
                raise EventStreamsFull(self.limit, self._stopping)
            self._count += 1
        if self._gauge is not None:
            self._gauge.inc()

    def release(self):
        """Give back a place reserved for a stream that did not open."""
        with self._lock:
            self._count -= 1
        if self._gauge is not None:
            self._gauge.dec()

    def open(self, org, wanted, position, connection=None, credential=None):
        """A stream (in a place `reserve` took) of the org's events after `position`, those of `wanted`, opened with
        `credential` (ended when it is no longer accepted)."""
        stream = EventStream(org, wanted, position, connection, credential)
        with self._reading:
            bounds = self._events.bounds(org)
            cursor = self._cursor_of(org, bounds.latest)
            if position > bounds.latest:
                # Its start was taken in the numbering a test-mode reset has just replaced: it is told, as the streams
                # open during the reset are, rather than passing over the new events up to its old seq.
                stream.end(Ending.RENUMBERED, bounds.oldest)
            stream.read_from_store_to(cursor.seq)
            with self._lock:
                self._streams.setdefault(org, set()).add(stream)
                if self._stopping:
                    stream.end(Ending.STOPPING)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="event streams", daemon=True)
                    self._thread.start()
        if connection is not None:
            self._hangups.watch(connection, stream)
        return stream

    def close(self, stream):
        """The stream's answer is over: its place is free."""
        if stream.connection is not None:
            self._hangups.unwatch(stream.connection)
        with self._lock:
            streams = self._streams.get(stream.org, set())
            if stream not in streams:
                return
            streams.remove(stream)
            self._count -= 1
            if not streams:
                del self._streams[stream.org]
        if self._gauge is not None:
            self._gauge.dec()

    def stop(self):
        """The worker stops: every stream ends now, and no new one opens."""
        with self._lock:
            self._stopping = True
        for stream in self._every_stream():
            stream.end(Ending.STOPPING)

    @property
    def open_streams(self):
        with self._lock:
            return self._count

    # -- the thread ----------------------------------------------------------------------------------------------------

    def _run(self):
        watcher, read_due, read_at = None, True, 0.0
        try:
            while self._still_needed():
                if watcher is None:
                    watcher = self._new_watcher()
                if read_due:
                    self._read_all()  # after the watcher exists: a commit just before it is read too
                    read_at = time.monotonic()
                self._end_revoked()
                woke = self._waited(watcher)
                if woke is None:
                    watcher = None
                read_due = woke is not False or time.monotonic() - read_at >= FALLBACK_SECONDS
        finally:
            if watcher is not None:
                watcher.close()
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None  # ended by an error: the next stream starts another

    def _still_needed(self):
        with self._reading, self._lock:
            if not self._streams:
                self._thread = None
                # Nothing follows the orgs' numbering now: a stream opened later starts from the store's, whatever a
                # test-mode reset did meanwhile.
                self._cursors.clear()
                return False
            return True

    def _new_watcher(self):
        try:
            return self._events.watcher()
        except Exception as error:  # noqa: BLE001 (an engine's outage: read every FALLBACK_SECONDS meanwhile)
            self._trouble.failed("watching for commits", error)
            return None

    def _waited(self, watcher):
        """Wait for a commit, until the next look at the streams' tokens at most: True when one may have committed,
        False when none did; None when there is no working watcher (then it is closed, and the wait a sleep)."""
        timeout = min(FALLBACK_SECONDS, ACCESS_CHECK_SECONDS)
        try:
            if watcher is not None:
                return bool(watcher.wait(timeout))
        except Exception as error:  # noqa: BLE001 (as in _new_watcher)
            self._trouble.failed("watching for commits", error)
            with contextlib.suppress(Exception):
                watcher.close()
        time.sleep(timeout)
        return None

    def _end_revoked(self):
        """End each stream whose token is no longer accepted (revoked on any node, or its session's)."""
        if self._still_valid is None:
            return
        for stream in self._every_stream():
            try:
                if stream.credential is not None and not self._still_valid(stream.credential):
                    stream.end(Ending.REVOKED)
            except Exception as error:  # noqa: BLE001 (an outage of the tokens' store: looked at again next pass)
                self._trouble.failed("checking the streams' tokens", error)
                return

    def _read_all(self):
        with self._reading:
            with self._lock:
                orgs = list(self._streams)
            for org in set(self._cursors) - set(orgs):
                del self._cursors[org]
            failed = False
            for org in orgs:
                try:
                    self._read_org(org)
                except Exception as error:  # noqa: BLE001 (an engine's outage: the next pass reads again)
                    self._trouble.failed(f"reading the events of org {org!r}", error)
                    failed = True
            if not failed:
                self._trouble.passed()

    def _read_org(self, org):
        """Offer the org's events after its cursor to its streams, or end them if the seqs were given again."""
        bounds = self._events.bounds(org)
        if bounds.latest < self._cursors[org].seq:
            return self._renumbered(org)
        while self._cursors[org].seq < bounds.latest:
            found = self._read_after(org, self._cursors[org])
            if found is None:
                return self._renumbered(org)
            if not found:
                return None
            cursor = self._cursors[org] = Cursor(found[-1].seq, found[-1])
            for stream in self._streams_of(org):
                stream.offer(found, cursor.seq)
        return None

    def _read_after(self, org, cursor):
        """A page of the org's events after the cursor; None when the event at the cursor is no longer the one read
        there (a reset, then as many new events or more: the seqs were given again)."""
        if cursor.seq == 0:
            return self._events.read(org, 0, OFFER_PAGE)
        found = self._events.read(org, cursor.seq - 1, OFFER_PAGE + 1)
        if not found or found[0].seq != cursor.seq:
            return found  # the event at the cursor was pruned meanwhile: nothing to compare with
        if cursor.event is not None and found[0] != cursor.event:
            return None
        return found[1:]

    def _renumbered(self, org):
        """The org's seqs were given again from 1: its streams end, told where the events now start."""
        bounds = self._events.bounds(org)
        self._cursors[org] = self._cursor_at(org, bounds.latest)
        for stream in self._streams_of(org):
            stream.end(Ending.RENUMBERED, bounds.oldest)

    def _cursor_of(self, org, latest):
        """The org's cursor for a stream that opens, the org's latest seq being `latest`. A cursor that a test-mode
        reset left behind before the thread saw it (the seqs went back, or the event at the cursor is another) ends
        the org's streams now, those open during the reset, and the new stream starts in the new numbering."""
        cursor = self._cursors.get(org)
        if cursor is not None and self._renumbered_since(org, cursor, latest):
            self._renumbered(org)
            return self._cursors[org]
        if cursor is None:
            cursor = self._cursors[org] = self._cursor_at(org, latest)
        return cursor

    def _renumbered_since(self, org, cursor, latest):
        if latest < cursor.seq:
            return True
        if cursor.event is None:
            return False
        found = self._events.read(org, cursor.seq - 1, 1)
        return bool(found) and found[0].seq == cursor.seq and found[0] != cursor.event

    def _cursor_at(self, org, latest):
        """A cursor at the org's event `latest`, holding that event (another event there tells a renumbering)."""
        found = self._events.read(org, latest - 1, 1) if latest else []
        return Cursor(latest, found[0] if found and found[0].seq == latest else None)

    def _every_stream(self):
        with self._lock:
            return [stream for org_streams in self._streams.values() for stream in org_streams]

    def _streams_of(self, org):
        with self._lock:
            return list(self._streams.get(org, ()))
