"""The file backend's change events (CONTRACT 14): each org's events as JSON lines in segments of SEGMENT_EVENTS,
`<data>/orgs/<org>/events/<segment>.jsonl` (segment n holds seqs n * SEGMENT_EVENTS + 1 onwards), and a bell,
`<data>/events.bell`, whose time every commit sets so that other worker processes wake.

Changes commit with their events in batches, under the org's events lock (`<data>/orgs/<org>/events.lock`, taken after
the document's own locks; service.storage.files.group_commit): one writer of a process at a time waits for it, and
once it has it appends the events of every change its process's writers queued meanwhile, then their records to the
org's write-ahead log (service.storage.files.write_ahead), fdatasynced once: the batch's commit point. Then it puts
the changes in place in seq order (each its atomic replace or unlink), releases the lock, and the batch's writers
answer. Nothing else is synced on a change's way; a checkpoint (service.storage.files.checkpoints) syncs the file
system about a second later.

So after a process is killed the log ends, at most, with events whose changes were not put in place: whoever takes
the lock next (a writer, a reader, or a start-up) checks the last event against the committed revision of its object
and cuts it off when the change is not there, until the last is there, and cuts off a torn last line, and the
write-ahead log's records after the last event kept. After a power cut, what the last checkpoint did not cover may be
lost from the documents, the history and this log, but not from the write-ahead log: the first look at the org's log
after a reboot puts each record after the checkpoint in place again, its event included
(service.storage.files.reboot_check). Seqs are 1, 2, 3, ... in commit order with no gap, no reader sees an event
without its change, and no committed change is without its event.

Pruning removes whole segments whose last event is older than the retention, never the last segment (the latest seq
stays known: an empty last segment says its first seq minus one).
"""
import contextlib
import os
import threading
import time

import orjson

from service.errors import disk_errors
from service.storage.common.disk import lock, numbered_files, truncate_durably
from service.storage.contract.events import Event, EventBounds
from service.storage.files.checkpoints import Checkpoints
from service.storage.files.group_commit import GroupCommit
from service.storage.files.names import SAFE_NAME, id_to_name, name_to_id
from service.storage.files.reboot_check import RebootCheck
from service.storage.files.write_ahead import WriteAheadLog

EVENTS = "events"
SEGMENT_EVENTS = 1000
SEGMENT_SUFFIX = ".jsonl"
BELL = "events.bell"
# How often a watcher looks at the bell: a commit of another worker wakes its streams within this.
BELL_POLL_SECONDS = 0.1
TAIL_BLOCK = 16 * 1024


class FileEventLog:
    """Every org's events as files (service.storage.contract.events.EventStore)."""

    def __init__(self, orgs_root, committed_revision, put_forward, retention_seconds=30 * 86400, clock=time.time):
        self.orgs_root = orgs_root
        self.retention_seconds = retention_seconds
        self.clock = clock
        # (org, kind, id) -> the object's committed revision: what decides whether a last event's change is there.
        self._committed_revision = committed_revision
        self.wal = WriteAheadLog(orgs_root, lambda org: orgs_root / id_to_name(org))
        self._after_boot = RebootCheck(self, put_forward)
        self._bell = orgs_root.parent / BELL
        # The last seq of each org known to be committed (so a read checks the log's end only when it grew), and
        # where it ends: org -> (seq, segment, (inode, size)), so that the next look at a log nobody appended to since
        # is one stat (not a listing of its folder and a read of its end).
        self._verified, self._ends = {}, {}
        # Notified at each commit of this process: its watchers wake.
        self.rung = threading.Condition()
        # org -> the oldest seq a webhook subscription may still send, or None (CONTRACT 15): kept whatever its age.
        self.needed = lambda org: None
        self._group = GroupCommit(self)
        self.checkpoints = Checkpoints(self)

    def directory(self, org):
        return self.orgs_root / id_to_name(org) / EVENTS

    def lock(self, org):
        """The org's events lock, under which its events are appended and its log's end checked."""
        return lock(self.directory(org))

    def commit(self, org, new_event, entry, source, target):
        """Commit a change with its event (the org's next seq) and its history entry `entry` in the org's next batch
        (service.storage.files.group_commit): `source` renamed over `target` (with no `source`, `target` unlinked).
        When the change fails, neither it nor its event is there. The caller holds `target`'s lock until this
        returns."""
        self._group.commit(org, new_event, entry, source, target)

    def read(self, org, after, first, wanted=None):
        """Up to `first` committed events with seq > `after`, oldest first, those of `wanted` (kind, change) pairs."""
        latest = self.bounds(org).latest
        found = []
        if first <= 0 or after >= latest:
            return found
        segment = max(after, 0) // SEGMENT_EVENTS
        for number in self.segments(org):
            if number < segment:
                continue
            for event in self.events_of(org, number, after):
                if event.seq > latest:
                    return found
                if event.seq > after and (wanted is None or (event.kind, event.change) in wanted):
                    found.append(event)
                    if len(found) == first:
                        return found
        return found

    def bounds(self, org):
        """(the oldest seq kept, the latest), after checking the log's end."""
        with self.lock(org):
            latest = self.recover(org)
        segments = self.segments(org)
        first = _event(_first_line(self.directory(org) / _segment_name(segments[0]))) if segments else None
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
        self._ends.clear()
        self.wal.forget()
        self.checkpoints.forget()
        self.ring()

    def checkpointed(self, org, seq):
        """Note that the org's changes through `seq` are durable in place (service.storage.files.checkpoints). Without
        the org's lock: a thread holding a lock file while its process forks would leave the child holding it."""
        with disk_errors():
            self.wal.note_checkpoint(org, seq)

    # -- the log's end -------------------------------------------------------------------------------------------------

    def ready(self, org):
        """Check the org's log after a reboot (see the module's doc) unless it needs none: before a writer reads the
        object it changes."""
        if not self._after_boot.done(org):
            with self.lock(org), disk_errors():
                self._after_boot.check(org)

    def recover(self, org):
        """The org's latest committed seq, once a torn last line and a last event whose change did not commit are cut
        off (under the org's lock)."""
        with disk_errors():
            self._after_boot.check(org)
            if (known := self._ends.get(org)) is not None:
                seq, path, identity = known
                now = _identity(path)
                if now == identity:
                    return seq  # nobody appended since
                if now is not None:
                    # Appended to by another process: its end is in this segment, unless the segment filled up.
                    latest = self._recover_segment(org, path, (seq - 1) // SEGMENT_EVENTS)
                    if latest % SEGMENT_EVENTS:
                        self.wal.cut_after(org, latest)
                        return latest
            segments = self.segments(org)
            if not segments:
                latest = 0
            else:
                latest = self._recover_segment(org, self.directory(org) / _segment_name(segments[-1]), segments[-1])
            self.wal.cut_after(org, latest)
            return latest

    def _recover_segment(self, org, path, number):
        """recover() in segment `number`, the log's last."""
        while True:
            offset, line, identity = _tail_line(path)
            if not line:
                return number * SEGMENT_EVENTS  # an empty last segment: its first seq minus one
            event = _event(line) if line.endswith(b"\n") else None
            if event is not None and (self._verified.get(org, 0) >= event.seq or self.committed(org, event)):
                self.verified(org, event.seq, path, identity)
                return event.seq
            truncate_durably(path, offset)  # a torn line, or an event whose change is not there

    @staticmethod
    def room_after(latest):
        """How many seqs follow `latest` in its segment (a batch appends to one segment)."""
        return SEGMENT_EVENTS - latest % SEGMENT_EVENTS

    def verified(self, org, seq, segment=None, identity=None):
        """Note that the org's events through `seq` are committed; with the `identity` of the `segment` where they end
        (append's answer), that the log ends there."""
        self._verified[org] = seq
        # Not at a segment's end: the next seq's new segment could come from another process unseen.
        if identity is not None and seq % SEGMENT_EVENTS:
            self._ends[org] = (seq, segment, identity)
        else:
            self._ends.pop(org, None)

    def committed(self, org, event):
        return event.revision <= self._committed_revision(org, event.kind, event.id)

    def append(self, org, seq, line):
        """Append lines from `seq` on, without a sync (the write-ahead log's records carry them through a power cut);
        (the segment, its identity after them) for `verified`."""
        directory = self.directory(org)
        path = directory / _segment_name((seq - 1) // SEGMENT_EVENTS)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            # A new log is of this boot: no process of it replays its records (service.storage.files.reboot_check).
            self._after_boot.note_boot(org)
        try:
            os.write(fd, line)
            identity = _identity_of(os.fstat(fd))
        finally:
            os.close(fd)
        return path, identity

    def cut_after(self, org, seq):
        """Cut the org's events after `seq` (a replay after a power cut, which appends them again from the write-ahead
        log); the lines through `seq` are durable, a checkpoint made them so."""
        self._verified.pop(org, None)
        self._ends.pop(org, None)
        keep_segment = seq // SEGMENT_EVENTS  # where seq + 1 goes
        for number in self.segments(org):
            path = self.directory(org) / _segment_name(number)
            if number > keep_segment:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            elif number == keep_segment:
                with open(path, "rb") as handle:
                    lines = handle.read().split(b"\n")[:seq - number * SEGMENT_EVENTS]
                truncate_durably(path, sum(len(line) + 1 for line in lines))

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
        with self.rung:
            self.rung.notify_all()

    # -- segments ------------------------------------------------------------------------------------------------------

    def segments(self, org):
        return self._segments_in(self.directory(org))

    def _lock_by_name(self, org_directory_name):
        return lock(self.orgs_root / org_directory_name / EVENTS)

    @staticmethod
    def _segments_in(directory):
        return numbered_files(directory, SEGMENT_SUFFIX)

    def events_of(self, org, number, after=0):
        """The events of one segment with seq > `after`, in order, parsed as they are taken (none when it was pruned
        meanwhile). Line i of segment n is seq n * SEGMENT_EVENTS + 1 + i (segments are appended in seq order and
        pruned whole), so the lines before `after` are skipped unparsed: a reader of the newest events (the webhooks'
        dispatcher, once per delivery) does not parse the thousand before them."""
        try:
            with open(self.directory(org) / _segment_name(number), "rb") as handle:
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
        with self._log.rung:
            while True:
                rung = self._bell_time()
                if rung != self._seen:
                    self._seen = rung
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self._log.rung.wait(min(left, BELL_POLL_SECONDS)):
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
    """(its offset, the file's last line with its newline when it has one, the file's identity); (0, b"", identity) for
    an empty file. (os calls: a look at the log's end is on every batch's way.)"""
    fd = os.open(path, os.O_RDONLY)
    try:
        status = os.fstat(fd)
        start, tail = status.st_size, b""
        while start > 0:
            step = min(TAIL_BLOCK, start)
            start -= step
            tail = os.pread(fd, step, start) + tail
            newline = tail.rfind(b"\n", 0, len(tail) - 1)  # the end of the line before the last
            if newline >= 0:
                return start + newline + 1, tail[newline + 1:], _identity_of(status)
        return 0, tail, _identity_of(status)
    finally:
        os.close(fd)


def _identity(path):
    """What tells whether a segment changed since: (inode, size); None when it is gone."""
    try:
        return _identity_of(os.stat(path))
    except FileNotFoundError:
        return None


def _identity_of(status):
    return status.st_ino, status.st_size


def _first_line(path):
    """The file's first line, or b"" (an empty file, or one pruned meanwhile)."""
    try:
        with open(path, "rb") as handle:
            return handle.readline()
    except FileNotFoundError:
        return b""

