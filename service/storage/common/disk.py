"""Local-disk primitives: atomic replace, cross-process locks, disk-full translation, early writeback, removal that
does not wait for a large file's blocks to be freed. Neutral: the file backend keeps everything with them, and both
backends use them for what stays on a node's own disk (received request bodies, the spool, the test-mode faults).

Writes go to a temporary file in the target's directory, are flushed and fsynced, then renamed over
the target, and the directory is fsynced so the rename itself survives a power cut. Locks are
flock(2) locks on `.lock` files, which the kernel releases when a worker dies.
"""
import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import queue
import shutil
import tempfile
import threading
import time
from pathlib import Path

from service.errors import StorageBusy, disk_errors

# Names of the temporaries of atomic writes; one left behind belongs to a writer that was killed.
TEMPORARY_PREFIX, TEMPORARY_SUFFIX = ".tmp-", ".part"


def _linux_call(name, *argtypes):
    """A Linux system call Python's os module lacks, through libc (returning an int, errno kept), or None where there
    is none."""
    if os.uname().sysname != "Linux":
        return None
    try:
        function = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


# Starts writeback of a range without waiting for it (SYNC_FILE_RANGE_WRITE): called as each block of a body is
# written, so that by the fsync/fdatasync that commits it most of the body is on its way to the disk or there
# already, and the sync waits for the last block only. It makes nothing durable by itself; the sync still does that.
_start_writeback = _linux_call("sync_file_range", ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
SYNC_FILE_RANGE_WRITE = 2
# Errors that mean the kernel or file system does not offer sync_file_range on this file.
_WRITEBACK_UNSUPPORTED = (errno.ENOSYS, errno.EINVAL, errno.ESPIPE)


def start_writeback(fd, start, length):
    """Ask the kernel to start writing bytes [start, start + length) of `fd` (already written to the kernel, not
    held in a Python buffer) to the disk, without waiting. Best effort: where sync_file_range is missing (not Linux)
    or refused as unsupported, it switches itself off for the process and the later sync alone does the work, as
    before; any other failure (EIO...) is left for that sync to report."""
    global _start_writeback
    if _start_writeback is not None and _start_writeback(fd, start, length, SYNC_FILE_RANGE_WRITE) != 0 \
            and ctypes.get_errno() in _WRITEBACK_UNSUPPORTED:
        _start_writeback = None


# syncfs(2): one file system's writes made durable, not every file system's (sync(2)).
_sync_one_filesystem = _linux_call("syncfs", ctypes.c_int)


def sync_filesystem(path):
    """Make everything written to the file system that holds `path` durable: syncfs(2), or sync(2) where there is
    none."""
    if _sync_one_filesystem is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if _sync_one_filesystem(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
    finally:
        os.close(fd)


def truncate_durably(path, length):
    """Cut the file `path` to `length` bytes, and make the cut durable (a log's end cut back)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, length)
        os.fdatasync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Freeing a file's blocks (when its last name and its last descriptor go) takes the filesystem time in proportion to
# its size: about 0.2 ms a MB on this project's disk, 100 ms for a 500 MB upload. Past this size a removed file is freed
# on a thread of its own.
FREE_INLINE_BYTES = 1024 * 1024


def remove_file(path):
    """Unlink the file `path` without waiting for its blocks to be freed: when that was its last name and it is large,
    the freeing thread truncates it (which frees them) and closes it. A file that keeps another name (a stream's file
    published as media) keeps its bytes. FileNotFoundError when there is no such file."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.unlink(path)
        status = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if status.st_nlink or status.st_size <= FREE_INLINE_BYTES:
        os.close(fd)
        return
    # The caller may still hold the file open (the append that completed a stream does): whichever descriptor closes
    # last would free the blocks, so the freeing thread frees them first, by truncating the nameless file.
    free_later(fd)


# Files the freeing thread may hold open, waiting: past this, the caller frees the file itself (a sweep removing
# hundreds of large streams at once must not hold hundreds of descriptors).
FREE_QUEUE_LIMIT = 16


class _BlockFreer:
    """One thread per process that frees the blocks of removed files, one after the other: a sweep that removes many
    large streams at once costs one thread, not one each."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queue = self._pid = None

    def free(self, fd):
        """Truncate, then close, the nameless file `fd` on the freeing thread (at once, when it has enough to do)."""
        with self._lock:
            if self._pid != os.getpid():  # the first use, or a process forked from one that used it
                self._queue, self._pid = queue.SimpleQueue(), os.getpid()
                threading.Thread(target=self._run, args=(self._queue,), name="wis-free-files", daemon=True).start()
            if self._queue.qsize() < FREE_QUEUE_LIMIT:
                self._queue.put(fd)
                return
        _free(fd)

    @staticmethod
    def _run(descriptors):
        while True:
            _free(descriptors.get())


def _free(fd):
    # Closing frees whatever truncating could not; neither may end the freeing thread.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    with contextlib.suppress(OSError):
        os.close(fd)


free_later = _BlockFreer().free


class PendingReplace:
    """A replacement of `path` by `data`, written aside but not yet in place: `commit()` makes it durable and puts it in
    place (fsync, rename over `path`, fsync of the directory), `discard()` removes it. With `writeback`, its bytes are
    handed to the disk at once: written before another sync of the same filesystem, they then reach the disk with that
    sync's journal commit, and the commit's own fsync has nothing left to wait for."""

    def __init__(self, path, data, writeback=False):
        self.path = Path(path)
        self._handle = self._temporary = None
        with disk_errors():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, self._temporary = tempfile.mkstemp(dir=self.path.parent, prefix=TEMPORARY_PREFIX,
                                                   suffix=TEMPORARY_SUFFIX)
            try:
                self._handle = os.fdopen(fd, "wb")
                self._handle.write(data)
                self._handle.flush()
            except BaseException:
                if self._handle is None:
                    os.close(fd)
                self.discard()
                raise
        if writeback:
            start_writeback(self._handle.fileno(), 0, 0)

    def sync(self):
        """Make the replacement's bytes durable now, so that `commit()` has only the rename left to wait for (its
        fsync then finds nothing to write); whatever fails, nothing is left aside."""
        with disk_errors():
            try:
                os.fsync(self._handle.fileno())
            except BaseException:
                self.discard()
                raise

    def commit(self):
        """Make the replacement durable and put it in place; whatever fails, nothing is left aside."""
        with disk_errors():
            try:
                os.fsync(self._handle.fileno())
            except BaseException:
                self.discard()
                raise
            self.put_in_place(durably=True)

    @property
    def source(self):
        """The temporary file that holds the replacement until it is put in place (None once it is)."""
        return self._temporary

    def put_in_place(self, durably=False):
        """Rename the replacement, made durable by `sync()`, over `path`; then, `durably`, sync the directory (else
        the caller does: several renames of a directory may share that sync). Whatever fails, nothing is left aside."""
        with disk_errors():
            try:
                self._handle.close()
                os.replace(self._temporary, self.path)
            except BaseException:
                self.discard()
                raise
            self._temporary = None
            if durably:
                fsync_directory(self.path.parent)

    def placed(self):
        """Note that the replacement was put in place by a rename of its `source` made elsewhere: nothing is left to
        discard."""
        self._temporary = None
        self.discard()  # (closes the file; its name is the renamed one's, not to unlink)

    def discard(self):
        """Remove the replacement unless it was put in place; a no-op after `commit()`."""
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()
        if self._temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._temporary)
            self._temporary = None


def numbered_files(directory, suffix):
    """The numbers of the files named `<number><suffix>` in `directory`, ascending ([] when there is no directory)."""
    try:
        with os.scandir(directory) as entries:
            names = [entry.name[:-len(suffix)] for entry in entries if entry.name.endswith(suffix)]
    except FileNotFoundError:
        return []
    return sorted(int(name) for name in names if name.isdigit())


def write_unsynced(path, data):
    """Write `path` whole (written aside, then renamed) but without fsync: for what a crash may lose but never tear."""
    path = Path(path)
    temporary = path.with_name(f"{TEMPORARY_PREFIX}{path.name}{TEMPORARY_SUFFIX}")
    with disk_errors():
        try:
            with open(temporary, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise


def atomic_write_bytes(path, data):
    """Replace `path` with `data` so that readers see either the old or the new file, never a mix."""
    PendingReplace(path, data).commit()


def remove_stale_temporaries(directory, cutoff):
    """Remove the temporaries of atomic writes in `directory` last touched before `cutoff` (their writer was killed);
    return how many."""
    removed = 0
    with os.scandir(directory) as entries:
        stale = [entry for entry in entries
                 if entry.name.startswith(TEMPORARY_PREFIX) and entry.name.endswith(TEMPORARY_SUFFIX)]
    for entry in stale:
        with contextlib.suppress(FileNotFoundError):
            if entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
    return removed


# A lock that is taken is tried again after FIRST_RETRY s, then twice as long each time up to LAST_RETRY s: writes hold
# a lock 2-6 ms, and a fixed 50 ms poll (filelock's) made a writer that lost a race sleep 50 ms, often several times
# (p99 240-420 ms with 4 clients writing one process). A blocking flock wakes at once but cannot honour a timeout in a
# server thread: it serves only a thread that may wait as long as the lock is held (acquire's negative timeout).
FIRST_RETRY, LAST_RETRY = 0.0005, 0.002


# What acquiring raises when the lock stays taken past the wait: a 503 when it reaches a client.
LockTimeout = StorageBusy


class DiskLock:
    """An exclusive lock between threads and worker processes: flock(2) on a `.lock` file. Each acquisition opens the
    file anew, and flock locks belong to an open file, so two threads of one process exclude each other as two
    processes do; the kernel releases the lock when its holder closes the file or dies.

    This replaces filelock, whose lock cost 156 us per acquire and release here against 6 us for these few system
    calls (its registry, fork tracking and path canonicalisation are of no use to this service), taken twice or more
    per upload request and once per document write."""

    def __init__(self, path, timeout):
        self.path = path
        self.timeout = timeout
        self._fd = None

    def acquire(self, timeout=None):
        """Take the lock, waiting up to `timeout` s (the lock's own when None; one try when 0; when negative, for as
        long as it is held, blocked in the kernel, which wakes this thread when it is released); raise LockTimeout
        when it stays taken."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        retry = FIRST_RETRY
        operation = fcntl.LOCK_EX if timeout < 0 else fcntl.LOCK_EX | fcntl.LOCK_NB
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, operation)
            except BlockingIOError:
                os.close(fd)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LockTimeout() from None
                time.sleep(min(retry, left))
                retry = min(2 * retry, LAST_RETRY)
                continue
            except BaseException:
                os.close(fd)
                raise
            if os.fstat(fd).st_nlink:
                self._fd = fd
                return self
            # The file was unlinked while this waited for it (a stream removed with its lock files): a lock on it
            # would exclude nobody who opens the path now, so take the lock on a new file there.
            os.close(fd)

    def _open(self):
        # Taking a lock the first time creates its file, which a full disk (no inode left) or a failing one refuses.
        with disk_errors():
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def release(self):
        """Release the lock (closing the file releases the flock); a no-op when it is not held."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc_info):
        self.release()


def lock(path, timeout=30):
    """An exclusive lock between threads and worker processes, held on a `.lock` file beside `path`."""
    return DiskLock(f"{path}.lock", timeout)


@contextlib.contextmanager
def staging_directory(parent):
    """A new, empty directory under `parent` (so on its filesystem: what is received there can be renamed into place),
    removed with what is left in it when the block ends."""
    with disk_errors():
        directory = Path(tempfile.mkdtemp(prefix=".staging-", dir=parent))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
