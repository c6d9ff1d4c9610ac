"""The chunk that continues a stream's prefix in order, received straight onto its end."""
import contextlib

from service.errors import disk_errors
from service.interface.checksums import file_sha256

from service.storage.files.streams.layout import (META, PREFIX, copy_range, read_record, take_append_lock,
                                                   try_stream_lock)
from service.storage.files.streams.ledger import Ledger
from service.storage.common.incoming import IncomingFile, NotHashed, Receiving
from service.storage.common.sha256_state import Sha256State


class PrefixAppend(Receiving):
    """A chunk received straight onto the end of its stream's prefix and hashed into the stream's running SHA-256
    as it arrives, so it is written and hashed once. It holds the stream's append lock until `discard()` (called
    under the stream's lock by the request that stores it); its bytes lie past the recorded prefix length until
    `LockedStream.put_part` commits them (with an fdatasync of the prefix, whose writeback this starts as the chunk
    arrives)."""
    early_writeback = True

    @classmethod
    def start(cls, directory, index, head_size):
        """Begin receiving chunk `index` onto the prefix; None when it is not the next chunk in order, another request
        is appending, or another request holds the stream's lock (the chunk is then received into a part at once).

        The append lock is taken, and only taken, under the stream's lock when the chunk is next, so that a request
        holding the stream's lock that finds the append lock taken knows its holder is a chunk not yet committed:
        that holder merges the parts that follow it when it commits (its request releases the append lock before
        the stream's, LockedStream.add_chunk), or its chunk was not acknowledged and comes again."""
        if not (directory / META).exists():
            return None
        stream_lock = try_stream_lock(directory)
        if stream_lock is None:
            return None
        try:
            record, ledger = read_record(directory), Ledger(directory)
            # A tus upload's prefix is never a chunk's to append to (its offset lives in the `tus` record); a stream
            # of the layout before the ledger gets one under its lock, the first chunk going to a part meanwhile.
            if record is None or record.is_complete or record.is_tus or not ledger.path.exists() or \
                    ledger.next() != index or (record.total_chunks is not None and index >= record.total_chunks):
                return None
            append_lock = take_append_lock(directory)
            if append_lock is None:
                return None
            try:
                return cls(directory, index, *ledger.read(index), head_size, append_lock)
            except BaseException:
                append_lock.release()
                raise
        finally:
            stream_lock.release()

    def __init__(self, directory, index, start, state, head_size, append_lock):
        with disk_errors():
            prefix = open(directory / PREFIX, "r+b")
            # Bytes past the recorded length are from an append that was never committed.
            prefix.truncate(start)
            prefix.seek(start)
        super().__init__(prefix, Sha256State.deserialize(state), head_size, start)
        self.index, self.start = index, start
        self._directory = directory
        self._lock = append_lock
        self._chunk_sha = self._spilled = None

    @property
    def sha256(self):
        """Hex SHA-256 of this chunk alone, read back from the prefix when first asked for (only a chunk sent with its
        own `sha` needs it)."""
        if self._chunk_sha is None:
            self.flush()
            with disk_errors():
                self._chunk_sha = file_sha256(self._directory / PREFIX, self.start, self.size)
        return self._chunk_sha

    def stream_state(self):
        """The serialized SHA-256 state of the stream's file up to the end of this chunk."""
        return self._hasher.serialize()

    def flush(self):
        with disk_errors():
            self._file.flush()

    def spill(self):
        """Copy the chunk into a part file of its own, for when the prefix no longer ends where the chunk began."""
        self._spilled = IncomingFile(self._directory, 0, NotHashed())
        self.flush()
        with disk_errors(), open(self._directory / PREFIX, "rb") as prefix:
            copy_range(prefix, self.start, self.size, self._spilled)
        return self._spilled

    def discard(self):
        """Cut what was not committed off the prefix, then release the append lock. Cutting back to the recorded length
        is always safe for the holder of the append lock, committed or not; it is best effort, since the next append
        truncates the prefix anyway. Called again, it does nothing."""
        if self._file.closed:
            return
        try:
            with contextlib.suppress(OSError):
                ledger = Ledger(self._directory)
                self._file.truncate(ledger.read(ledger.next())[0])
            with contextlib.suppress(OSError):
                self._file.close()
            if self._spilled is not None:
                self._spilled.discard()
        finally:
            self._lock.release()
