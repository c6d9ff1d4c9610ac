"""A filesystem double: stands in for `os`, `open` and `tempfile` inside the file backend's storage modules and fails
chosen operations, as a full or failing disk would."""
import fcntl
import os
import tempfile
from collections import Counter

from service.storage.common import disk, incoming
from service.storage.files import documents, events, group_commit, media, write_ahead
from service.storage.files.streams import append, layout, ledger, store, stream


class FaultyDisk:
    """Stands in for `os`, `open` and `tempfile` inside the storage modules; counts each operation and fails the
    chosen call of one operation, and every later one, until `heal()` (a disk stays full until space is freed)."""

    def __init__(self, monkeypatch):
        self.calls = Counter()
        self._fault = None
        # Lock files are created through os.open: a full disk refuses a new one (no inode left).
        real_open = os.open

        def os_open(path, flags, *args, **kwargs):
            if flags & os.O_CREAT and str(path).endswith(".lock") and not os.path.exists(path):
                self.check("lock")
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", os_open)
        for module in (disk, incoming, layout, ledger, append, stream, store, media, documents, events, group_commit,
                       write_ahead):
            monkeypatch.setattr(module, "os", _FaultyOs(self), raising=False)
            monkeypatch.setattr(module, "open", self.open, raising=False)
            if hasattr(module, "tempfile"):
                monkeypatch.setattr(module, "tempfile", _FaultyTempfile(self))

    def fail(self, operation, code, nth=1, where=""):
        """From now on, the `nth` call of `operation` (create, write, fsync, rename, link, unlink or lock) and every later one
        fail; with `where`, only writes to files whose path contains it are counted."""
        self.calls.clear()
        self._fault = (operation, code, nth, where)

    def heal(self):
        self._fault = None

    def check(self, operation, path=""):
        """Count one call of `operation`; raise the planned error if this call is to fail."""
        if self._fault is None or self._fault[3] not in path:
            return
        self.calls[operation] += 1
        if self._fault[0] == operation and self.calls[operation] >= self._fault[2]:
            raise OSError(self._fault[1], os.strerror(self._fault[1]))

    def wrap(self, handle, mode, path=""):
        return _FaultyFile(self, handle, path) if set(mode) & set("wa+") else handle

    def open(self, file, mode="r", *args, **kwargs):
        return self.wrap(open(file, mode, *args, **kwargs), mode, str(file))


class _FaultyOs:
    def __init__(self, disk):
        self._disk = disk

    def __getattr__(self, name):
        return getattr(os, name)

    def fdopen(self, fd, mode="r", *args, **kwargs):
        return self._disk.wrap(os.fdopen(fd, mode, *args, **kwargs), mode)

    def fsync(self, fd):
        self._disk.check("fsync")
        os.fsync(fd)

    def fdatasync(self, fd):
        self._disk.check("fsync")
        os.fdatasync(fd)

    def pwrite(self, fd, data, offset):
        """A write at an offset; a failing one stores half its data first, as a disk filling up mid-write does."""
        try:
            self._disk.check("write", os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            os.pwrite(fd, bytes(data[: len(data) // 2]), offset)
            raise
        return os.pwrite(fd, data, offset)

    def write(self, fd, data):
        """A write at the file's position (an append); a failing one stores half its data first."""
        try:
            self._disk.check("write", os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            os.write(fd, bytes(data[: len(data) // 2]))
            raise
        return os.write(fd, data)

    def ftruncate(self, fd, length):
        self._disk.check("truncate")
        os.ftruncate(fd, length)

    def replace(self, source, target):
        self._disk.check("rename")
        os.replace(source, target)

    def link(self, source, target):
        self._disk.check("link")
        os.link(source, target)

    def unlink(self, path):
        self._disk.check("unlink")
        os.unlink(path)


class _FaultyTempfile:
    def __init__(self, disk):
        self._disk = disk

    def mkstemp(self, *args, **kwargs):
        self._disk.check("create")
        return tempfile.mkstemp(*args, **kwargs)


class _FaultyFile:
    """A file whose failing write stores half its data first, as a disk filling up mid-write does."""

    def __init__(self, disk, handle, path):
        self._disk = disk
        self._handle = handle
        self._path = path

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._handle.close()

    def write(self, data):
        try:
            self._disk.check("write", self._path)
        except OSError:
            self._handle.write(bytes(data[: len(data) // 2]))
            self._handle.flush()
            raise
        return self._handle.write(data)


def on_flock(monkeypatch, before, after=lambda path, operation: None):
    """Call `before(path, operation)` and `after(path, operation)`, in the calling thread, around each flock of the
    storage's locks (service.storage.common.disk): for the tests that count who waits for a lock. Other tests' threads
    may take locks meanwhile: the callbacks pick their own by path or thread."""

    class Fcntl:
        def __getattr__(self, name):
            return getattr(fcntl, name)

        @staticmethod
        def flock(fd, operation):
            path = os.readlink(f"/proc/self/fd/{fd}")
            before(path, operation)
            try:
                fcntl.flock(fd, operation)
            finally:
                after(path, operation)

    monkeypatch.setattr(disk, "fcntl", Fcntl())


def lock_held_at_fsync(monkeypatch, os_module, synced_path, lock_file):
    """Whether `lock_file`'s lock was held (by anyone) at each fsync of `synced_path` made through `os_module` (a
    module's `os`): a list, appended to as they happen."""
    held, real_fsync = [], os.fsync

    def fsync(fd):
        if os.path.realpath(f"/proc/self/fd/{fd}") == str(synced_path):
            probe = os.open(lock_file, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held.append(False)
            except BlockingIOError:
                held.append(True)
            finally:
                os.close(probe)
        return real_fsync(fd)

    monkeypatch.setattr(os_module, "fsync", fsync)
    return held
