"""The changes of an org waiting for its event log, shared by every worker process: `<data>/orgs/<org>/events/queue`,
a JSON line per change (its event, the file to rename into place or the one to unlink), appended under a lock held for
that append only (`queue.lock`).

Whoever holds the log's lock next takes the whole queue and commits it as one batch (service.storage.files.
group_commit): N writers arriving while a batch commits, in any worker, pay for one sync of the log, not N syncs one
after another. The batch tells each writer its outcome through the writer's mark (`tell`).

The queue needs no sync: a crash ends every writer waiting in it. A line whose writer is gone (killed, or timed out
waiting) is dropped, not committed: each writer holds a lock of its own, `waiting/<token>.lock`, from before it queues
until it knows its outcome (`waiting`), and a line whose lock can be taken at once (or is gone) has nobody waiting.
(The document's own lock could not say it: after a crash, a new writer of the same document holds it.)
"""
import contextlib
import fcntl
import os

import orjson

from service.errors import StorageFailed, StorageFull, disk_errors
from service.storage.common.disk import fsync_directory, lock
from service.storage.contract.events import NewEvent

QUEUE = "queue"
WAITING = "waiting"
# An outcome as a mark holds it: committed, refused for want of space, failed otherwise.
COMMITTED, NO_SPACE, FAILED = b"0", b"F", b"E"
NOT_TOLD = object()


class QueuedChange:
    """One change in the queue: its event, the temporary to rename over `target` (None: unlink `target`), the token
    its writer knows it by."""

    __slots__ = ("event", "source", "target", "token")

    def __init__(self, event, source, target, token):
        self.event, self.source, self.target, self.token = event, source, target, token

    def line(self):
        return orjson.dumps({"event": self.event._asdict(), "source": self.source, "target": self.target,
                             "token": self.token}) + b"\n"

    @classmethod
    def of_line(cls, line):
        """The change a line holds, or None for a line that is none (torn by a crash)."""
        try:
            record = orjson.loads(line)
            return cls(NewEvent(**record["event"]), record["source"], record["target"], record["token"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None


class CommitQueue:
    """The queue of one org's changes, in the event log's folder."""

    def __init__(self, directory):
        self.path = directory / QUEUE
        self._waiting = directory / WAITING

    def _lock(self):
        return lock(self.path)

    def _mark(self, token):
        return os.fspath(self._waiting / f"{token}.lock")

    @contextlib.contextmanager
    def waiting(self, token):
        """Hold the mark of a writer waiting for the outcome of its change `token`, for the block; yields a function
        answering that outcome once a batch has told it (`tell`), else NOT_TOLD."""
        path = self._mark(token)
        with disk_errors():
            fd = _open_creating(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a new file, nobody else's: taken at once
            yield lambda: _outcome_of(_read_mark(fd))
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
            os.close(fd)

    def tell(self, token, error):
        """Tell the writer of change `token` its outcome (`error`, None when it committed) through its mark; nothing
        when it is gone."""
        try:
            fd = os.open(self._mark(token), os.O_WRONLY)
        except OSError:
            return
        try:
            os.pwrite(fd, _code_of(error), 0)
        except OSError:
            pass  # not told: it finds its change taken, then committed or queued again (group_commit)
        finally:
            os.close(fd)

    def writer_waiting(self, token):
        """True while the writer of change `token` waits for its outcome (holds its mark); a stale mark is removed."""
        path = self._mark(token)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        except OSError:
            return True  # cannot be told: a writer may be there
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True  # held (BlockingIOError), or cannot be told
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)  # its writer was killed
            return False
        finally:
            os.close(fd)

    def sweep_marks(self):
        """Remove the marks of writers killed before a batch removed them (their lock free); how many."""
        try:
            with os.scandir(self._waiting) as entries:
                tokens = [entry.name[:-len(".lock")] for entry in entries if entry.name.endswith(".lock")]
        except FileNotFoundError:
            return 0
        return sum(not self.writer_waiting(token) for token in tokens)

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


def sync_directories(done):
    """Make the changes done durable: one sync of each directory where they are; {token: error or None} of each."""
    errors = {}
    for directory in {os.path.dirname(change.target) for change in done}:
        try:
            with disk_errors():
                fsync_directory(directory)
        except BaseException as error:
            errors[directory] = error
    return {change.token: errors.get(os.path.dirname(change.target)) for change in done}


def _open_creating(path, flags):
    """os.open with O_CREAT, making the file's folder first when it is missing."""
    try:
        return os.open(path, flags | os.O_CREAT, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, flags | os.O_CREAT, 0o644)


def _read_mark(fd):
    try:
        return os.pread(fd, 1, 0)
    except OSError:
        return b""  # not told (read by another thread as its writer leaves)


def _code_of(error):
    return COMMITTED if error is None else NO_SPACE if isinstance(error, StorageFull) else FAILED


def _outcome_of(code):
    """The error a mark's code stands for (None: committed), or NOT_TOLD."""
    if code == COMMITTED:
        return None
    return StorageFull() if code == NO_SPACE else StorageFailed() if code == FAILED else NOT_TOLD
