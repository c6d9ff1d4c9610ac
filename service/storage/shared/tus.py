"""A tus PATCH body on the shared backend: received to this node's spool, hashed into the upload's running SHA-256 as
it arrives, and made part of the upload by `SharedLockedStream.commit_tus` under the stream's row lock. No lock is
held while the body arrives: the offset is checked again when it commits, and a PATCH that lost a race is a 409."""
import contextlib
import os
import tempfile

from service.interface import SNIFF_BYTES
from service.storage.disk import disk_errors
from service.storage.sha256_state import Sha256State


class SharedTusAppend:
    """One PATCH body of a tus upload, from the upload's committed offset (`offset`) on."""

    def __init__(self, spool, row):
        self.offset = row["length"]
        self._committed_head = row["head"]
        self._state = row["hash_state"]
        self._hasher = Sha256State.deserialize(self._state)
        with disk_errors():
            fd, self._path = tempfile.mkstemp(dir=spool, prefix="tus-")
        self._file = os.fdopen(fd, "w+b")
        self._body_head = b""
        self.size = 0

    def write(self, data):
        with disk_errors():
            self._file.write(data)
        self._hasher.update(data)
        if len(self._body_head) < SNIFF_BYTES:
            self._body_head = (self._body_head + bytes(data[:SNIFF_BYTES]))[:SNIFF_BYTES]
        self.size += len(data)

    def head_of_body(self):
        """The first bytes of this body (enough to sniff a format)."""
        return self._body_head

    def head(self, size):
        """The first `size` bytes of the upload: committed ones, then this body's."""
        # The committed head is the whole upload so far when that is shorter than SNIFF_BYTES.
        return (self._committed_head + self._body_head)[:size]

    def state(self):
        return self._hasher.serialize()

    def sha256(self):
        return Sha256State.deserialize(self.state()).finalize()

    @contextlib.contextmanager
    def reading(self):
        """This body's bytes, from the start."""
        with disk_errors():
            self._file.flush()
        self._file.seek(0)
        yield self._file
        self._file.seek(0, os.SEEK_END)

    def committed(self):
        """Called by the stream once the body is part of the upload."""
        self._committed_head = (self._committed_head + self._body_head)[:SNIFF_BYTES]
        self.offset += self.size
        self._state = self._hasher.serialize()
        self._reset()

    def rollback(self):
        """Forget what was received since the last commit."""
        self._hasher = Sha256State.deserialize(self._state)
        self._reset()

    def _reset(self):
        self.size = 0
        self._body_head = b""
        with contextlib.suppress(OSError):
            self._file.seek(0)
            self._file.truncate()

    def close(self):
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path)
