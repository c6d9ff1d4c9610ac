"""The changes of an org waiting for its event log, shared by every worker process: `<data>/orgs/<org>/events/queue`,
a JSON line per change (its event, the file to rename into place or the one to unlink, its writer's process), appended
under a lock held for that append only (`queue.lock`).

Whoever holds the log's lock next takes the whole queue and commits it as one batch (service.storage.files.
group_commit): N writers arriving while a batch commits, in any worker, pay for one sync of the log, not N syncs one
after another.

The queue needs no sync: a crash ends every writer waiting in it. A line whose writer's process is gone (killed) is
dropped, not committed: each process that queues holds a mark of its own, `<data>/events.writers/<pid>-<token>.lock`,
flocked for as long as it lives (`ProcessMarks`), and a line whose mark can be taken at once (or is gone) has nobody
waiting. (A writer's thread leaves only once its change is committed or failed: it waits for the lock in the kernel.
The document's own lock could not say it either: after a crash, a new writer of the same document holds it.)
"""
import contextlib
import fcntl
import os
import secrets
import threading
import weakref

import orjson

from service.errors import disk_errors
from service.storage.common.disk import lock
from service.storage.contract.events import NewEvent

QUEUE = "queue"
MARK_SUFFIX = ".lock"


class QueuedChange:
    """One change in the queue: its event, the temporary to rename over `target` (None: unlink `target`), the token
    its writer knows it by, the name of its writer's process mark."""

    __slots__ = ("event", "source", "target", "token", "writer")

    def __init__(self, event, source, target, token, writer=None):
        self.event, self.source, self.target, self.token, self.writer = event, source, target, token, writer

    def line(self):
        return orjson.dumps({"event": self.event._asdict(), "source": self.source, "target": self.target,
                             "token": self.token, "writer": self.writer}) + b"\n"

    @classmethod
    def of_line(cls, line):
        """The change a line holds, or None for a line that is none (torn by a crash)."""
        try:
            record = orjson.loads(line)
            return cls(NewEvent(**record["event"]), record["source"], record["target"], record["token"],
                       record["writer"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None


class ProcessMarks:
    """The marks of the processes that queue changes, in one folder: this process's (made when it first queues, held
    while it lives, made anew in a forked child), and what tells whether another's is held."""

    def __init__(self, directory):
        self.directory = directory
        self._guard = threading.Lock()
        self._held = None  # (fd, name) of this process's mark
        _every_marks.add(self)

    def mine(self):
        """The name of this process's mark, made and held at the first call."""
        with self._guard:
            if self._held is None:
                name = f"{os.getpid()}-{secrets.token_hex(4)}"
                with disk_errors():
                    fd = _open_creating(os.fspath(self.directory / f"{name}{MARK_SUFFIX}"), os.O_RDWR)
                fcntl.flock(fd, fcntl.LOCK_EX)  # a new file, nobody else's: taken at once
                self._held = (fd, name)
            return self._held[1]

    def alive(self, name):
        """True while the process of mark `name` lives (holds it); a mark found free is removed."""
        if self._held is not None and name == self._held[1]:
            return True
        path = self.directory / f"{name}{MARK_SUFFIX}"
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        except OSError:
            return True  # cannot tell: a writer may be there
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True  # held (BlockingIOError), or cannot tell
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)  # its process was killed
            return False
        finally:
            os.close(fd)

    def sweep(self):
        """Remove the marks of processes that are gone; how many."""
        try:
            with os.scandir(self.directory) as entries:
                names = [entry.name[:-len(MARK_SUFFIX)] for entry in entries if entry.name.endswith(MARK_SUFFIX)]
        except FileNotFoundError:
            return 0
        return sum(not self.alive(name) for name in names)

    def _forget_after_fork(self):
        # The child's copy of the parent's descriptor would keep the parent's mark held after the parent died.
        self._guard = threading.Lock()
        held, self._held = self._held, None
        if held is not None:
            os.close(held[0])


_every_marks = weakref.WeakSet()
os.register_at_fork(after_in_child=lambda: [marks._forget_after_fork() for marks in list(_every_marks)])


class CommitQueue:
    """The queue of one org's changes, in the event log's folder."""

    def __init__(self, directory):
        self.path = directory / QUEUE

    def _lock(self):
        return lock(self.path)

    def add(self, changes):
        """Append changes (written to the kernel, not synced: see the module's doc)."""
        data = b"".join(change.line() for change in changes)
        with self._lock(), disk_errors():
            fd = _open_creating(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def take(self):
        """Every change in the queue, oldest first, emptying it (the caller holds the event log's lock)."""
        with disk_errors():
            try:
                if not os.stat(self.path).st_size:
                    return []  # (a change queued just after this look waits for the lock, and is taken after it)
            except FileNotFoundError:
                return []
        with self._lock(), disk_errors():
            try:
                fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                return []
            try:
                data = b""
                while chunk := os.read(fd, 1 << 20):
                    data += chunk
                if data:
                    os.ftruncate(fd, 0)
            finally:
                os.close(fd)
        return [change for change in map(QueuedChange.of_line, data.splitlines()) if change is not None]


def put_in_place(batch):
    """Put the batch's changes in place in seq order until one fails; (those done, the one that failed or None, its
    error). A rename or unlink that fails did nothing."""
    done = []
    for change in batch:
        try:
            with disk_errors():
                if change.source is None:
                    os.unlink(change.target)
                else:
                    os.replace(change.source, change.target)
        except BaseException as error:
            return done, change, error
        done.append(change)
    return done, None, None


def _open_creating(path, flags):
    """os.open with O_CREAT, making the file's folder first when it is missing."""
    try:
        return os.open(path, flags | os.O_CREAT, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, flags | os.O_CREAT, 0o644)
