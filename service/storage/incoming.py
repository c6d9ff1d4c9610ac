"""A file being received: written straight to disk, hashed and sniffed while the bytes go by.

The multipart parser writes a file part into one of these (it is the parser's stream factory product),
so an upload is never held in memory and never copied again after it has arrived.
"""
import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from service.storage.files import disk_errors

BUFFER_SIZE = 1024 * 1024


class IncomingFile:
    def __init__(self, directory, head_size):
        with disk_errors():
            fd, name = tempfile.mkstemp(dir=directory, prefix=".incoming-")
        self.path = Path(name)
        self._file = os.fdopen(fd, "wb")
        self._sha = hashlib.sha256()
        self._head_size = head_size
        self.head = b""
        self.size = 0

    def write(self, data):
        with disk_errors():
            self._file.write(data)
        self._sha.update(data)
        self.size += len(data)
        if len(self.head) < self._head_size:
            self.head = (self.head + bytes(data[: self._head_size]))[: self._head_size]
        return len(data)

    def seek(self, offset, whence=os.SEEK_SET):
        # The parser rewinds a finished part so it can be read back; nothing here is ever read back.
        return 0

    def tell(self):
        return self.size

    @property
    def sha256(self):
        """Hex SHA-256 of the bytes written so far."""
        return self._sha.hexdigest()

    def finish(self):
        """Flush and fsync, so the file can be renamed or linked into place and survive a crash."""
        if not self._file.closed:
            with disk_errors():
                self._file.flush()
                os.fsync(self._file.fileno())
            self._file.close()

    def close(self):
        self._file.close()

    def discard(self):
        """Remove the file unless it was moved into place."""
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

