"""The files of a stream directory and the lock files beside it; reading and writing the small ones."""
import contextlib
import os
import re
import shutil

import orjson

from service.storage.contract import StreamRecord
from service.storage.common.disk import LockTimeout, PendingReplace, atomic_write_bytes, lock, remove_file
from service.storage.common.incoming import BUFFER_SIZE

META, PREFIX = "meta.json", "prefix"
PART = re.compile(r"part-(\d+)")


def write_json(path, value):
    atomic_write_bytes(path, orjson.dumps(value))


def read_json(path):
    try:
        with open(path, "rb") as handle:
            return orjson.loads(handle.read())
    except (FileNotFoundError, NotADirectoryError):
        return None


def read_record(directory):
    """The StreamRecord in a stream directory's meta, or None when it has none (being created or removed)."""
    meta = read_json(directory / META)
    return None if meta is None else StreamRecord.from_json(meta)


def write_record(directory, record):
    write_json(directory / META, record.to_json())


def pending_record(directory, record):
    """A replacement of a stream directory's record, written aside and handed to the disk (disk.PendingReplace)."""
    return PendingReplace(directory / META, orjson.dumps(record.to_json()), writeback=True)


def part_path(directory, index):
    return directory / f"part-{index}"


def part_sizes(directory):
    sizes = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            match = PART.fullmatch(entry.name)
            if match:
                sizes[int(match.group(1))] = entry.stat().st_size
    return sizes


def copy_range(prefix, start, length, part):
    """Write `length` bytes of the open `prefix` file, from `start`, into `part` (a file being received)."""
    prefix.seek(start)
    while length:
        block = prefix.read(min(BUFFER_SIZE, length))
        part.write(block)
        length -= len(block)


def _append_lock_path(directory):
    return f"{directory}.append"


def take_append_lock(directory, timeout=0):
    """The stream's append lock, acquired, or None when another request holds it (at once, or after `timeout` s)."""
    return _acquired(lock(_append_lock_path(directory), timeout=timeout))


def try_stream_lock(directory):
    """The stream's own lock, acquired at once, or None when another request holds it."""
    return _acquired(lock(directory, timeout=0))


def _acquired(disk_lock):
    try:
        return disk_lock.acquire()
    except LockTimeout:
        return None


def remove_stream(directory):
    """Remove a stream directory and its lock files; call with the stream's lock held. Its prefix, which may hold a
    whole upload, is freed on a thread of its own (disk.remove_file)."""
    with contextlib.suppress(OSError):
        remove_file(directory / PREFIX)
    shutil.rmtree(directory, ignore_errors=True)
    # Waiters on the unlinked lock files notice (DiskLock checks st_nlink) and find no meta.
    for lock_file in (f"{directory}.lock", f"{_append_lock_path(directory)}.lock"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_file)
