"""The committed offset of a tus upload, and a PATCH body received onto the end of its prefix.

A tus upload only ever grows at its end, so it needs one commit point, not a record per chunk: the `tus` file holds
two fixed-size slots (sequence number, offset, SHA-256 state there, CRC-32). A commit writes the slot the latest one
is not in and fdatasyncs it; a crash mid-write tears at most that slot, whose CRC then fails, and the other still
holds the previous offset. So a PATCH costs two fdatasyncs (the bytes, then the slot), with no rename and no
directory fsync, and the file stays 256 bytes whatever the number of PATCHes.
"""
import contextlib
import os
import struct
import zlib

from service.errors import UploadLocked, disk_errors
from service.storage.common.disk import start_writeback
from service.storage.files.streams.layout import META, PREFIX, take_append_lock
from service.storage.common.sha256_state import Sha256State
from service.storage.common.write_behind import WriteBehind

TUS_RECORD = "tus"
# sequence, offset, serialized SHA-256 state, CRC-32 of the three
_SLOT = struct.Struct(">QQ104sI")
_BODY = struct.Struct(">QQ104s")
SLOT_SIZE = 128
# O_DIRECT writes from an aligned buffer were tried twice: on this machine's ext4 they were not faster than the page
# cache with the fdatasync (12 ms against 7 ms per 5 MB; later, in the write-behind thread, 321 against 405 MB/s with
# the same CPU), so the page cache it is.


class TusRecord:
    """The `tus` file of a stream: its committed offset and the running SHA-256 state there."""

    def __init__(self, directory):
        self._path = directory / TUS_RECORD

    def create(self):
        """Offset 0, the empty hash, fsynced."""
        with open(self._path, "wb") as handle:
            # Record 1 goes where `commit` puts odd sequence numbers: the second slot.
            handle.write(bytes(SLOT_SIZE) + self._slot(1, 0, Sha256State().serialize()))
            handle.flush()
            os.fsync(handle.fileno())

    @staticmethod
    def _slot(sequence, offset, state):
        body = _BODY.pack(sequence, offset, state)
        return (body + struct.pack(">I", zlib.crc32(body))).ljust(SLOT_SIZE, b"\0")

    def read(self):
        """(sequence, offset, SHA-256 state) of the latest valid slot."""
        with open(self._path, "rb") as handle:
            data = handle.read(2 * SLOT_SIZE)
        best = None
        for start in (0, SLOT_SIZE):
            raw = data[start:start + _SLOT.size]
            if len(raw) < _SLOT.size:
                continue
            sequence, offset, state, crc = _SLOT.unpack(raw)
            if sequence and crc == zlib.crc32(raw[:_BODY.size]) and (best is None or sequence > best[0]):
                best = (sequence, offset, state)
        if best is None:
            raise OSError(f"{self._path}: no valid tus record")
        return best

    def commit(self, sequence, offset, state):
        """Write record `sequence` (one more than the latest) into the slot the latest is not in, durably."""
        fd = os.open(self._path, os.O_WRONLY)
        try:
            os.pwrite(fd, self._slot(sequence, offset, state), (sequence % 2) * SLOT_SIZE)
            os.fdatasync(fd)
        finally:
            os.close(fd)


class TusAppend:
    """One PATCH body being received onto the end of a tus upload's prefix, hashed into its running SHA-256 as it
    arrives. It holds the stream's append lock from `start` to `close`; its bytes lie past the committed offset until
    `commit`, and `rollback` (or a crash) leaves them to be cut off."""

    def __init__(self, directory, append_lock):
        self.directory = directory
        self._lock = append_lock
        self._record = TusRecord(directory)
        with disk_errors():
            self._sequence, self.offset, state = self._record.read()
            self._fd = os.open(directory / PREFIX, os.O_RDWR)
            # Bytes past the committed offset are from a PATCH that was never committed.
            os.ftruncate(self._fd, self.offset)
        self._hasher = Sha256State.deserialize(state)
        self.size = 0
        self._behind = WriteBehind((self._write_block, self._hash_block), "tus-append")
        # Bytes of this PATCH written so far.
        self._written = 0

    @classmethod
    def start(cls, directory, timeout):
        """Take the append lock (waiting up to `timeout` s for a PATCH still being received, e.g. one whose client
        went away and which is about to commit what it got), then open the prefix at the committed offset."""
        append_lock = take_append_lock(directory, timeout)
        if append_lock is None:
            raise UploadLocked()
        try:
            if not (directory / META).exists():
                raise FileNotFoundError(directory / META)
            return cls(directory, append_lock)
        except BaseException:
            append_lock.release()
            raise

    def write(self, data):
        """Append `data` (bytes) past the committed offset and hash it, in this append's write-behind threads (one
        writes, one hashes) while the caller receives the next block."""
        self._behind.put(data)
        self.size += len(data)

    def _write_block(self, data):
        with disk_errors():
            start = self.offset + self._written
            view = memoryview(data)
            while view:
                written = os.pwrite(self._fd, view, self.offset + self._written)
                self._written += written
                view = view[written:]
            # Early writeback (see files.start_writeback): the commit's fdatasync waits for the last block only.
            start_writeback(self._fd, start, len(data))

    def _hash_block(self, data):
        self._hasher.update(data)

    def _drain(self):
        """Wait until every block handed to `write` is written and hashed."""
        self._behind.drain()

    def upload_head(self, size):
        """The first `size` bytes of the upload (committed and just written)."""
        self._drain()
        with disk_errors():
            return os.pread(self._fd, size, 0)

    def state(self):
        """The serialized SHA-256 state at the end of what was written."""
        self._drain()
        return self._hasher.serialize()

    def sha256(self):
        """Hex SHA-256 of the whole upload up to the end of what was written."""
        return Sha256State.deserialize(self.state()).finalize()

    def commit(self):
        """Make the written bytes part of the upload: fdatasync them, then move the offset past them."""
        self._drain()
        with disk_errors():
            os.fdatasync(self._fd)
            self._sequence += 1
            self._record.commit(self._sequence, self.offset + self.size, self._hasher.serialize())
        self.offset += self.size
        self.size = self._written = 0
        os.utime(self.directory)

    def rollback(self):
        """Cut what was written since the last commit off the prefix (best effort: the next PATCH cuts it anyway)."""
        with contextlib.suppress(Exception):
            self._drain()
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self.offset)
        self.size = self._written = 0
        with contextlib.suppress(OSError):
            self._hasher = Sha256State.deserialize(self._record.read()[2])

    def close(self):
        with contextlib.suppress(Exception):
            self._drain()
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._lock.release()


def committed_offset(directory):
    """The committed offset of a tus upload."""
    return TusRecord(directory).read()[1]
