"""Request bodies of upload streams received to this node's spool on their way to the bucket: a chunk
(SpooledChunk), or a tus PATCH body (SharedTusAppend). Nothing here is fsynced: a body counts once the bucket and the
database hold it, and one a killed node leaves in the spool is removed by the sweep."""
import contextlib
import os
import re

from service.interface import SNIFF_BYTES
from service.storage.common.process_ids import process_gone
from service.storage.common.incoming import BUFFER_SIZE, IncomingFile, NotHashed
from service.storage.common.sha256_state import Sha256State


# A spool file's name: its kind, then the pid of the process receiving it.
_SPOOLED = re.compile(r"(chunk|tus)-(\d+)-")


def remove_orphans(spool):
    """Remove the spool files of processes that are gone (a node or worker killed mid-request): what they carried that
    counts is in the bucket and the database, and their clients send the rest again."""
    for leftover in spool.iterdir():
        match = _SPOOLED.match(leftover.name)
        if match and process_gone(match.group(2)):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


class SpoolFile(IncomingFile):
    """A body received to the spool (never fsynced, so no early writeback), named after its kind and this process."""
    early_writeback = False

    def __init__(self, spool, head_size, hasher, kind):
        super().__init__(spool, head_size, hasher, prefix=f"{kind}-{os.getpid()}-")


class SpooledChunk(SpoolFile):
    """A chunk received to this node's spool, hashed into its stream's running SHA-256 when it began in order
    (`start_state`), and its own SHA-256 computed only when asked (a chunk sent with a `sha` field)."""

    def __init__(self, spool, head_size, objects, start_state=None):
        hasher = Sha256State.deserialize(start_state) if start_state is not None else NotHashed()
        super().__init__(spool, head_size, hasher, kind="chunk")
        self.start_state = start_state
        self._objects = objects
        # An object of this chunk in the bucket (staged before or under the stream's lock), and whether a committed row
        # refers to it; one that none does goes with the chunk.
        self.staged_key = None
        self.claimed = False

    def state_after(self, start_state):
        """The running SHA-256 state after this chunk, continuing from `start_state`."""
        if start_state == self.start_state:
            return self._hasher.serialize()
        hasher = Sha256State.deserialize(start_state)
        with self.reading() as file:
            while block := file.read(BUFFER_SIZE):
                hasher.update(block)
        return hasher.serialize()

    def discard(self):
        super().discard()
        if self.staged_key is not None and not self.claimed:
            with contextlib.suppress(Exception):  # best effort, as every removal of a staged object
                self._objects.delete(self.staged_key)


class SharedTusAppend:
    """One PATCH body of a tus upload, from the upload's committed offset (`offset`) on, received to the spool and
    hashed into the upload's running SHA-256 as it arrives; made part of the upload by
    `SharedLockedStream.append_body` under the stream's row lock. No lock is held while the body arrives: the offset is
    checked again when it commits, and a PATCH that lost a race is a 409."""

    def __init__(self, spool, row, commit_part):
        """`commit_part(self)` makes what was received so far part of the upload under the row lock."""
        self.offset = row.length
        self._spool = spool
        self._commit_part = commit_part
        self._committed_head = row.head
        self._hasher = Sha256State.deserialize(row.hash_state)
        self._body = SpoolFile(spool, SNIFF_BYTES, self._hasher, kind="tus")

    def commit(self):
        """Commit what was received so far (the bucket gets it as multipart parts, the row its offset and SHA-256
        state), then go on receiving into a fresh spool file from the new offset."""
        if not self.size:
            return
        self._commit_part(self)
        self._committed_head = self.upload_head(SNIFF_BYTES)
        self.offset += self.size
        self._body.discard()
        self._body = SpoolFile(self._spool, SNIFF_BYTES, self._hasher, kind="tus")

    @property
    def size(self):
        return self._body.size

    def write(self, data):
        self._body.write(data)

    def head_of_body(self):
        """The first bytes of this body (enough to sniff a format)."""
        return self._body.head

    def upload_head(self, size):
        """The first `size` bytes of the upload: committed ones, then this body's."""
        # The committed head is the whole upload so far when that is shorter than SNIFF_BYTES.
        return (self._committed_head + self._body.head)[:size]

    def state(self):
        """The running SHA-256 state at the end of this body."""
        return self._hasher.serialize()

    def reading(self):
        """This body's bytes, from the start."""
        return self._body.reading()

    def close(self):
        self._body.discard()
