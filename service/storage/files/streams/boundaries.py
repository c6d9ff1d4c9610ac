"""The `boundaries` file of a stream: where each chunk ends in the prefix, and the running SHA-256 there."""
import contextlib
import os
import struct

from service.storage.sha256_state import Sha256State
from service.storage.files.streams.layout import BOUNDARIES

# Prefix length (8 bytes) and the serialized SHA-256 state (104 bytes) at a chunk boundary.
BOUNDARY = struct.Struct(">Q104s")


class BoundaryRecords:
    """A stream's `boundaries` file: record i holds (prefix length, SHA-256 state) after chunks 0..i-1. The file is
    never cut: records past `merged` are left over from before a rewind or a crash, and appending overwrites them."""

    def __init__(self, directory):
        self._path = directory / BOUNDARIES
        self._file = None

    def create(self):
        """Write the file with record 0, the empty prefix, and fsync it."""
        with self.writing("wb"):
            self.write(0, 0, Sha256State().serialize())
            self.sync()

    def read(self, index):
        """(prefix length, SHA-256 state) after chunks 0..index-1."""
        with open(self._path, "rb") as handle:
            handle.seek(index * BOUNDARY.size)
            return BOUNDARY.unpack(handle.read(BOUNDARY.size))

    def lengths(self, start, stop):
        """The prefix lengths of records start..stop-1."""
        with open(self._path, "rb") as handle:
            handle.seek(start * BOUNDARY.size)
            records = handle.read((stop - start) * BOUNDARY.size)
        return [length for length, _ in BOUNDARY.iter_unpack(records)]

    @contextlib.contextmanager
    def writing(self, mode="r+b"):
        """Hold the file open for `write` and `sync`."""
        with open(self._path, mode) as self._file:
            try:
                yield self
            finally:
                self._file = None

    def write(self, index, length, state):
        """Set record `index` (inside `writing()`); not durable before `sync()`."""
        self._file.seek(index * BOUNDARY.size)
        self._file.write(BOUNDARY.pack(length, state))

    def sync(self):
        self._file.flush()
        os.fsync(self._file.fileno())
