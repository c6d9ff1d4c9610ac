"""The file backend's change events (CONTRACT 14): each org's events as JSON lines in segments of SEGMENT_EVENTS,
`<data>/orgs/<org>/events/<segment>.jsonl` (segment n holds seqs n * SEGMENT_EVENTS + 1 onwards), and a bell,
`<data>/events.bell`, whose time every commit sets so that other worker processes wake.

A change and its event commit together under the org's events lock (`<data>/orgs/<org>/events.lock`, taken last,
after the document's own locks, and held for the event's append and the change's commit only): the event is appended
and fdatasynced, then the document store commits the change (its atomic replace or unlink). So after a crash the log
ends, at most, with one event whose change did not commit: whoever takes the lock next (a writer, a reader, or a
start-up) checks the last event against the committed revision of its object and cuts it off when the change is not
there, and cuts off a torn last line. Seqs are therefore 1, 2, 3, ... in commit order with no gap, and no reader sees
an event without its change, or a committed change without its event.

Pruning removes whole segments whose last event is older than the retention, never the last segment (so the latest
seq stays known: an empty last segment says its first seq minus one).
"""
import contextlib
import os
import threading
import time

import orjson

from service.errors import disk_errors
from service.storage.common.disk import fsync_directory, lock, numbered_files
from service.storage.contract.events import Event, EventBounds
from service.storage.files.group_commit import GroupCommit
from service.storage.files.names import SAFE_NAME, id_to_name, name_to_id

EVENTS = "events"
SEGMENT_EVENTS = 1000
SEGMENT_SUFFIX = ".jsonl"
BELL = "events.bell"
# How often a watcher looks at the bell: a commit of another worker wakes its streams within this.
BELL_POLL_SECONDS = 0.1
TAIL_BLOCK = 16 * 1024
# The most changes of an org one batch commits (one append and one sync): enough for every request thread of a worker.
BATCH_LIMIT = 64


class FileEventLog:
    """Every org's events as files (service.storage.contract.events.EventStore)."""

    def __init__(self, orgs_root, committed_revision, retention_seconds=30 * 86400, clock=time.time):
        self.orgs_root = orgs_root
        self.retention_seconds = retention_seconds
        self.clock = clock
        # (org, kind, id) -> the object's committed revision: what decides whether a last event's change is there.
        self._committed_revision = committed_revision
        self._bell = orgs_root.parent / BELL
        # The last seq of each org known to be committed (so a read checks the log's end only when it grew).
        self._verified = {}
        self._rung = threading.Condition()
        # org -> the oldest seq a webhook subscription may still send, or None (CONTRACT 15): kept whatever its age.
        self.needed = lambda org: None
        self._group = GroupCommit(self._commit_batch, BATCH_LIMIT)

    def _directory(self, org):
        return self.orgs_root / id_to_name(org) / EVENTS

    def _lock(self, org):
        return lock(self._directory(org))

    def commit(self, org, new_event, put_in_place, directory):
        """Commit a change with its event and answer its seq (the org's latest + 1): the event is appended and made
        durable, then `put_in_place()` commits the change (its rename or unlink: the commit point), then `directory`,
        where it did, is made durable. Concurrent changes of the org in this process share one append, one sync of the
        log, and one sync per directory (service.storage.files.group_commit). When the change fails, its event stays
        only if the change committed anyway."""
        change = _Change(new_event, put_in_place, directory)
        self._group.run(org, change)
        return change.seq

    def _commit_batch(self, org, batch):
        """Commit the changes of a batch, in order, under the org's lock; answer those left for the next batch: past
        the end of the log's segment (a batch appends to one segment), or after a change that failed."""
        with self._lock(org):
            latest = self._recover(org)
            room = SEGMENT_EVENTS - latest % SEGMENT_EVENTS  # seqs left in the segment of latest + 1
            batch, left = batch[:room], batch[room:]
            lines = []
            for seq, waiting in enumerate(batch, latest + 1):
                waiting.work.seq = seq
                lines.append(orjson.dumps({"seq": seq, **waiting.work.event._asdict()}) + b"\n")
            try:
                with disk_errors():
                    self._append(org, latest + 1, b"".join(lines))
            except BaseException as error:
                for waiting in batch:
                    waiting.error = error
                self._recover(org)  # cuts the events appended: none of their changes committed
                return left
            committed = self._put_in_place(org, batch)
            if len(committed) < len(batch):
                self._recover(org)  # a change failed before its commit point: cut its event and those after it
                left = [waiting for waiting in batch[len(committed):] if waiting.error is None] + left
            self._sync_directories(committed)
            self._verified[org] = latest + len(committed)
        self.ring()
        return left

    def _put_in_place(self, org, batch):
        """Commit the batch's changes in seq order until one fails before its commit point; answer those committed
        (one that failed after it, its change there, is among them with its error)."""
        committed = []
        for waiting in batch:
            try:
                waiting.work.put_in_place()
            except BaseException as error:
                waiting.error = error
                if not self._committed(org, waiting.work.event):
                    break
            committed.append(waiting)
        return committed

    @staticmethod
    def _sync_directories(committed):
        """Make the committed changes durable: one sync of each directory where they are (a failure fails those of
        that directory, whose change may or may not survive a power cut, as any write's failing sync)."""
        directories = {}
        for waiting in committed:
            directories.setdefault(waiting.work.directory, []).append(waiting)
        for directory, changes in directories.items():
            try:
                with disk_errors():
                    fsync_directory(directory)
            except BaseException as error:
                for waiting in changes:
                    waiting.error = waiting.error or error

    def read(self, org, after, first, wanted=None):
        """Up to `first` committed events with seq > `after`, oldest first, those of `wanted` (kind, change) pairs."""
        latest = self.bounds(org).latest
        found = []
        if first <= 0 or after >= latest:
            return found
        segment = max(after, 0) // SEGMENT_EVENTS
        for number in self._segments(org):
            if number < segment:
                continue
            for event in self._events_of(org, number, after):
                if event.seq > latest:
                    return found
                if event.seq > after and (wanted is None or (event.kind, event.change) in wanted):
                    found.append(event)
                    if len(found) == first:
                        return found
        return found

    def bounds(self, org):
        """(the oldest seq kept, the latest), after checking the log's end."""
        with self._lock(org):
            latest = self._recover(org)
        segments = self._segments(org)
        first = _event(_first_line(self._directory(org) / _segment_name(segments[0]))) if segments else None
        oldest = first.seq if first is not None else latest + 1
        return EventBounds(min(oldest, latest + 1), latest)

    def prune(self):
        """Remove each org's segments (but its last) whose last event is older than the retention; how many events."""
        if not self.retention_seconds:
            return 0
        cutoff = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.clock() - self.retention_seconds))
        removed = 0
        for org_directory in self.orgs_root.iterdir():
            org = org_directory.name
            needed = self.needed(name_to_id(org)) if SAFE_NAME.fullmatch(org) else None
            with self._lock_by_name(org):
                segments = self._segments_in(org_directory / EVENTS)
                for number in segments[:-1]:
                    path = org_directory / EVENTS / _segment_name(number)
                    last = _event(_tail_line(path)[1])
                    if last is not None and (last.timestamp >= cutoff or needed is not None and last.seq >= needed):
                        break
                    with disk_errors(), contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                    removed += SEGMENT_EVENTS
        return removed

    def watcher(self):
        return BellWatcher(self)

    def forget(self):
        """What this process knows of the logs (test mode's reset and restore replace them)."""
        self._verified.clear()
        self.ring()

    # -- the log's end -------------------------------------------------------------------------------------------------

    def _recover(self, org):
        """The org's latest committed seq, once a torn last line and a last event whose change did not commit are cut
        off (under the org's lock)."""
        directory = self._directory(org)
        segments = self._segments(org)
        if not segments:
            return 0
        path = directory / _segment_name(segments[-1])
        with disk_errors():
            while True:
                offset, line = _tail_line(path)
                if not line:
                    return segments[-1] * SEGMENT_EVENTS  # an empty last segment: its first seq minus one
                event = _event(line) if line.endswith(b"\n") else None
                if event is not None and (self._verified.get(org, 0) >= event.seq or self._committed(org, event)):
                    self._verified[org] = event.seq
                    return event.seq
                _cut(path, offset)  # a torn line, or an event whose change is not there

    def _committed(self, org, event):
        return event.revision <= self._committed_revision(org, event.kind, event.id)

    def _append(self, org, seq, line):
        directory = self._directory(org)
        path = directory / _segment_name((seq - 1) // SEGMENT_EVENTS)
        created = not path.exists()
        if created:
            directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        if created:  # the new segment's name must survive a power cut as its line does
            fsync_directory(directory)
            fsync_directory(directory.parent)

    def ring(self):
        """Wake the watchers: those of this process at once, those of other processes through the bell's time."""
        now = time.time_ns()
        try:
            os.utime(self._bell, ns=(now, now))
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                self._bell.touch()
        except OSError:
            pass  # a watcher's bounded wait covers a bell that cannot be rung
        with self._rung:
            self._rung.notify_all()

    # -- segments ------------------------------------------------------------------------------------------------------

    def _segments(self, org):
        return self._segments_in(self._directory(org))

    def _lock_by_name(self, org_directory_name):
        return lock(self.orgs_root / org_directory_name / EVENTS)

    @staticmethod
    def _segments_in(directory):
        return numbered_files(directory, SEGMENT_SUFFIX)

    def _events_of(self, org, number, after=0):
        """The events of one segment with seq > `after`, in order, parsed as they are taken (none when it was pruned
        meanwhile). Line i of segment n is seq n * SEGMENT_EVENTS + 1 + i (segments are appended in seq order and
        pruned whole), so the lines before `after` are skipped unparsed: a reader of the newest events (the webhooks'
        dispatcher, once per delivery) does not parse the thousand before them."""
        try:
            with open(self._directory(org) / _segment_name(number), "rb") as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            return
        skip = min(max(after - number * SEGMENT_EVENTS, 0), len(lines))
        first = _event(lines[skip]) if skip < len(lines) else None
        if first is None or first.seq != number * SEGMENT_EVENTS + 1 + skip:
            skip = 0  # not laid out as expected (a line torn mid-segment): read it all
        for event in map(_event, lines[skip:]):
            if event is not None:
                yield event


class _Change:
    """A change waiting for its batch: its event, its commit point, the directory to sync after it; then its seq."""

    __slots__ = ("event", "put_in_place", "directory", "seq")

    def __init__(self, event, put_in_place, directory):
        self.event, self.put_in_place, self.directory, self.seq = event, put_in_place, directory, None


class BellWatcher:
    """Waits for a commit of this process (its condition) or of another (the bell's time)."""

    def __init__(self, log):
        self._log = log
        self._seen = self._bell_time()

    def _bell_time(self):
        try:
            return os.stat(self._log._bell).st_mtime_ns
        except OSError:
            return 0

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        with self._log._rung:
            while True:
                rung = self._bell_time()
                if rung != self._seen:
                    self._seen = rung
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self._log._rung.wait(min(left, BELL_POLL_SECONDS)):
                    self._seen = self._bell_time()
                    return True

    def close(self):
        pass


def _segment_name(number):
    return f"{number:010d}{SEGMENT_SUFFIX}"


def _event(line):
    """The event of a log line, or None for a line that is not one (torn)."""
    try:
        return Event.from_json(orjson.loads(line))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


def _tail_line(path):
    """(its offset, the file's last line with its newline when it has one); (0, b"") for an empty file."""
    with open(path, "rb") as handle:
        start = handle.seek(0, os.SEEK_END)
        tail = b""
        while start > 0:
            step = min(TAIL_BLOCK, start)
            start -= step
            handle.seek(start)
            tail = handle.read(step) + tail
            newline = tail.rfind(b"\n", 0, len(tail) - 1)  # the end of the line before the last
            if newline >= 0:
                return start + newline + 1, tail[newline + 1:]
        return 0, tail


def _first_line(path):
    """The file's first line, or b"" (an empty file, or one pruned meanwhile)."""
    try:
        with open(path, "rb") as handle:
            return handle.readline()
    except FileNotFoundError:
        return b""


def _cut(path, length):
    """Cut a segment to `length` bytes, durably."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, length)
        os.fdatasync(fd)
    finally:
        os.close(fd)
