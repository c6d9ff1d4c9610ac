"""The `ledger` of a chunk stream: where each chunk ends in the prefix and the running SHA-256 there, and how many
chunks the prefix holds, in one file, so that committing chunks onto the prefix costs one write and one fdatasync.

The file holds two commit slots, then one boundary record per chunk boundary: record i is (prefix length, SHA-256
state) after chunks 0..i-1. A slot names how many chunks are merged (`merged`: records 0..merged are valid) and
carries the CRC-32 of the records it wrote (`first`..`merged`) and of itself. A commit writes records first..merged,
where `first` is the `merged` of the commit before (its record rewritten with the same bytes), then the slot the
latest one is not in, and fdatasyncs the file once. Whatever a crash or a power cut leaves of an unfinished commit,
its slot is whole and its records match their CRC (the commit stands), or it is not and the other slot stands: the
previous commit, whose records the unfinished one left as they were. Records past `merged` are left over from before
a rewind and are overwritten by later commits.

Streams written before the ledger kept the pointer in `merged` (JSON, replaced atomically) and the records in
`boundaries` (no header); `upgrade` converts them.
"""
import contextlib
import os
import struct
import zlib

from service.errors import disk_errors
from service.storage.common.disk import atomic_write_bytes
from service.storage.files.streams.layout import read_json
from service.storage.common.sha256_state import Sha256State

LEDGER = "ledger"
# Prefix length (8 bytes) and the serialized SHA-256 state (104 bytes) at a chunk boundary.
BOUNDARY = struct.Struct(">Q104s")
# sequence, merged, first record written, CRC-32 of records first..merged; zeros; the CRC-32 of the slot's first 60
# bytes last, so that a write of the slot cut short anywhere leaves it invalid.
_SLOT_BODY = struct.Struct(">QQQI")
SLOT_SIZE = 64
_SLOT_CRC = struct.Struct(">I")
RECORDS_AT = 2 * SLOT_SIZE
# The layout before the ledger.
V1_MERGED, V1_BOUNDARIES = "merged", "boundaries"


class NoValidSlot(OSError):
    """Neither slot holds a whole commit: not a ledger this code wrote."""


class Ledger:
    """A stream's ledger, read once and then kept up to date by this object's own commits (the caller holds the
    stream's lock, so no other process commits meanwhile)."""

    def __init__(self, directory):
        self.path = directory / LEDGER
        self._sequence = self.merged = None

    @classmethod
    def create(cls, directory):
        """A ledger of no chunk merged: record 0 is the empty prefix. Written and fdatasynced."""
        ledger = cls(directory)
        record = BOUNDARY.pack(0, Sha256State().serialize())
        with disk_errors(), open(ledger.path, "wb") as handle:
            handle.write(bytes(SLOT_SIZE) + _slot(1, 0, 0, record) + record)
            handle.flush()
            os.fdatasync(handle.fileno())
        return ledger

    def _load(self):
        if self.merged is None:
            with open(self.path, "rb") as handle:
                self._sequence, self.merged = _latest(handle)
        return self

    def next(self):
        """How many chunks the prefix holds."""
        return self._load().merged

    def read(self, index):
        """(prefix length, SHA-256 state) after chunks 0..index-1 (index <= the chunks merged)."""
        self._load()
        with open(self.path, "rb") as handle:
            return BOUNDARY.unpack(os.pread(handle.fileno(), BOUNDARY.size, _at(index)))

    def lengths(self, start, stop):
        """The prefix lengths of records start..stop-1."""
        self._load()
        with open(self.path, "rb") as handle:
            records = os.pread(handle.fileno(), (stop - start) * BOUNDARY.size, _at(start))
        return [length for length, _ in BOUNDARY.iter_unpack(records)]

    def commit(self, merged, boundaries=()):
        """Make `merged` chunks the prefix: `boundaries` are the (length, SHA-256 state) records after each chunk
        appended since the last commit, in order (none for a rewind to fewer chunks, whose records are there). One
        write of the records and the slot, one fdatasync; on return the commit survives a power cut. When it raises,
        the commit may or may not stand (a slot written whose fdatasync failed is what readers see): the next read
        asks the file."""
        first = self._load().merged
        if boundaries:
            assert merged == first + len(boundaries)
        else:
            first = merged
        sequence = self._sequence + 1
        try:
            fd = os.open(self.path, os.O_RDWR)
            try:
                with disk_errors():
                    records = os.pread(fd, BOUNDARY.size, _at(first)) + b"".join(
                        BOUNDARY.pack(length, state) for length, state in boundaries)
                    os.pwrite(fd, records, _at(first))
                    os.pwrite(fd, _slot(sequence, merged, first, records), (sequence % 2) * SLOT_SIZE)
                    os.fdatasync(fd)
            finally:
                os.close(fd)
        except BaseException:
            self._sequence = self.merged = None
            raise
        self._sequence, self.merged = sequence, merged


def _at(index):
    return RECORDS_AT + index * BOUNDARY.size


def _slot(sequence, merged, first, records):
    body = _SLOT_BODY.pack(sequence, merged, first, zlib.crc32(records)).ljust(SLOT_SIZE - _SLOT_CRC.size, b"\0")
    return body + _SLOT_CRC.pack(zlib.crc32(body))


def _latest(handle):
    """(sequence, merged) of the latest slot that is whole and whose records match its CRC."""
    header = handle.read(RECORDS_AT)
    candidates = []
    for start in (0, SLOT_SIZE):
        body, crc = header[start:start + SLOT_SIZE - _SLOT_CRC.size], header[start + SLOT_SIZE - _SLOT_CRC.size:
                                                                              start + SLOT_SIZE]
        if len(crc) < _SLOT_CRC.size or _SLOT_CRC.unpack(crc)[0] != zlib.crc32(body):
            continue
        sequence, merged, first, records_crc = _SLOT_BODY.unpack_from(body)
        if sequence:
            candidates.append((sequence, merged, first, records_crc))
    for sequence, merged, first, records_crc in sorted(candidates, reverse=True):
        records = os.pread(handle.fileno(), (merged - first + 1) * BOUNDARY.size, _at(first))
        if zlib.crc32(records) == records_crc:
            return sequence, merged
    raise NoValidSlot(f"{handle.name}: no whole commit in the stream's ledger")


def upgrade(directory):
    """Give a chunk stream of the layout before the ledger (`merged` and `boundaries`) its ledger, holding the same
    chunks, then remove the old files; nothing to do for a stream that has a ledger or is no chunk stream. Call with
    the stream's lock held. The ledger appears whole or not at all (written aside, then renamed), so a crash leaves
    the old layout or the new one, and the old files' removal is finished by the next call."""
    ledger = directory / LEDGER
    if not ledger.exists():
        pointer = read_json(directory / V1_MERGED)
        if pointer is None:
            return
        with open(directory / V1_BOUNDARIES, "rb") as handle:
            records = handle.read((pointer["next"] + 1) * BOUNDARY.size)
        atomic_write_bytes(ledger, bytes(SLOT_SIZE) + _slot(1, pointer["next"], 0, records) + records)
    for old in (V1_MERGED, V1_BOUNDARIES):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / old)
