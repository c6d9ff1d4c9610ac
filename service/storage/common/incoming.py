"""A file being received: written straight to disk, hashed and sniffed while the bytes go by.

The multipart parser writes a file part into one of these (it is the parser's stream factory product),
so an upload is never held in memory and never copied again after it has arrived.
"""
import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from service.errors import disk_errors
from service.interface.checksums import file_sha256
from service.storage.common.disk import start_writeback

BUFFER_SIZE = 1024 * 1024
# Early writeback of a received file (see files.start_writeback) is asked for each time this many more bytes have
# been written: the multipart parser writes about 1 MB at a time, so about once per write.
WRITEBACK_BLOCK = BUFFER_SIZE


class Receiving:
    """A file being received: written through `file` and hashed with `hasher` (anything with `update`) as the bytes go
    by, keeping its size so far and its first `head_size` bytes (to sniff).

    With `early_writeback`, a file that is fsynced once received (`offset` being where in `file` the received bytes
    begin) has the writeback of what it received started as it goes, every WRITEBACK_BLOCK bytes, so that the fsync
    waits for the last block only."""
    early_writeback = False

    def __init__(self, file, hasher, head_size, offset=0):
        self._file = file
        self._hasher = hasher
        self._head_size = head_size
        self.head = b""
        self.size = 0
        self._offset = offset
        # Received bytes whose writeback has been asked for.
        self._written_back = 0

    def write(self, data):
        with disk_errors():
            self._file.write(data)
            if self.early_writeback and self.size + len(data) - self._written_back >= WRITEBACK_BLOCK:
                # Only bytes that reached the kernel can be written back: flush what the file object buffers (a
                # no-op for the parser's ~1 MB writes, which go past the buffer).
                self._file.flush()
                start_writeback(self._file.fileno(), self._offset + self._written_back,
                                self.size + len(data) - self._written_back)
                self._written_back = self.size + len(data)
        self._hasher.update(data)
        self.size += len(data)
        if len(self.head) < self._head_size:
            self.head = (self.head + bytes(data[: self._head_size]))[: self._head_size]
        return len(data)

    def tell(self):
        return self.size


# How the name of a file being received starts: the file is its request's own until the request ends.
INCOMING_PREFIX = ".incoming-"


class NotHashed:
    """The hasher of a received file that nothing hashes as it arrives."""

    def update(self, data):
        pass


class IncomingFile(Receiving):
    """A file received under a temporary name in `directory` (`prefix` and random letters), hashed as it arrives with
    hashlib's SHA-256, or with `hasher` when given: a stream's running SHA-256, or NotHashed() for a chunk received
    aside, whose own SHA-256 only a chunk sent with a `sha` field, or sent again once merged, needs (its merge hashes
    each of its bytes into the stream's running SHA-256 anyway). Removed by `discard` unless it was moved into place."""
    early_writeback = True

    def __init__(self, directory, head_size, hasher=None, prefix=INCOMING_PREFIX):
        with disk_errors():
            fd, name = tempfile.mkstemp(dir=directory, prefix=prefix)
        self.path = Path(name)
        super().__init__(os.fdopen(fd, "wb"), hashlib.sha256() if hasher is None else hasher, head_size)
        # The file's own SHA-256 once read back, when its hasher is not that of its bytes alone.
        self._hashed_alone = hasher is None
        self._read_back = None

    @property
    def sha256(self):
        """Hex SHA-256 of the bytes written so far: from its hasher, or read back from the file (once) when the file
        was given a hasher of another kind."""
        if self._hashed_alone:
            return self._hasher.hexdigest()
        if self._read_back is None:
            self._read_back = self.read_back_sha256()
        return self._read_back

    def _flush(self):
        if not self._file.closed:  # (closed by `finish`, flushed then)
            with disk_errors():
                self._file.flush()

    @contextlib.contextmanager
    def reading(self):
        """The bytes received so far, from the start, in a file of their own."""
        self._flush()
        with open(self.path, "rb") as file:
            yield file

    def read_back_sha256(self):
        """Hex SHA-256 of the bytes received so far, read back from the file."""
        self._flush()
        with disk_errors():
            return file_sha256(self.path)

    def finish(self):
        """Flush and fsync, so the file can be renamed or linked into place and survive a crash."""
        if not self._file.closed:
            with disk_errors():
                self._file.flush()
                os.fsync(self._file.fileno())
            self._file.close()

    def discard(self):
        """Remove the file unless it was moved into place."""
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
