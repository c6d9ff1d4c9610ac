"""The file backend's write-ahead log: each committed change of an org's documents as one record, its event line and
its history entry (which holds the new document, or null for a deletion), in segments `<data>/orgs/<org>/wal/
<first seq>.wal`, appended and fdatasynced under the org's events lock (service.storage.files.group_commit). That one
sync, shared by a batch, is the commit point of each change in it: the change's history entry, its document and its
event line are written and renamed without a sync of their own. A checkpoint (service.storage.files.checkpoints) later
makes them durable with one sync of the file system and notes in `<data>/orgs/<org>/wal/checkpoint` the last seq it
covers; the segments it covers whole are removed. After a power cut, the first look at the org's log puts the records
after the checkpoint in place again (service.storage.files.reboot_check).

A record is a header (the payload's length, its CRC-32, the seq), the payload (the event's JSON line, then the entry)
and a trailer (the length and the seq again), so that the log's end is found from the file's end. A segment ends at
its last whole record: what follows (a record torn by a kill, or one whose change did not commit) is cut by the next
look at the log's end under the lock, and a record whose CRC does not match ends what a replay reads (a power cut may
leave blocks of a record never synced, which no answer waited for).
"""
import contextlib
import os
import struct
import zlib
from typing import NamedTuple

from service.storage.common.disk import atomic_write_bytes, fsync_directory, numbered_files, truncate_durably

WAL = "wal"
SEGMENT_SUFFIX = ".wal"
CHECKPOINT = "checkpoint"
HEADER = struct.Struct("<IIQ")
TRAILER = struct.Struct("<IQ")
# A segment past this size gets no more records: the next batch starts one (its name's sync is once per segment).
SEGMENT_BYTES = 16 * 1024 * 1024


class Record(NamedTuple):
    seq: int
    event_line: bytes  # the event's JSON line, its line break included
    entry: bytes  # the history entry (service.storage.files.documents)


class WriteAheadLog:
    """Every org's write-ahead log; every method but `records_after` and `checkpoint` runs under the org's events
    lock (replay reads under it too)."""

    def __init__(self, orgs_root, directory_of):
        self.orgs_root = orgs_root
        self._directory_of = directory_of  # org -> its org folder
        # org -> (segment path, its size, the last seq in it): where the log ends, as this process last wrote or read
        # it; checked against the file's size before it is trusted.
        self._ends = {}

    def directory(self, org):
        return self._directory_of(org) / WAL

    def segments(self, org):
        """The first seqs of the org's segments, ascending."""
        return numbered_files(self.directory(org), SEGMENT_SUFFIX)

    def _path(self, org, first_seq):
        return self.directory(org) / f"{first_seq:010d}{SEGMENT_SUFFIX}"

    def append(self, org, first_seq, event_lines, entries):
        """Append the records of seqs `first_seq`, ... and fdatasync them: the commit point of their changes. When this
        raises, what it wrote is cut again (or left for the next look at the end, which cuts what follows the last
        committed seq)."""
        records = enumerate(zip(event_lines, entries), first_seq)
        data = b"".join(_record(seq, line, entry) for seq, (line, entry) in records)
        path, size = self._end_for_append(org, first_seq)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            try:
                if os.fstat(fd).st_size != size:  # (what follows the last whole record: cut before writing after it)
                    os.ftruncate(fd, size)
                os.pwrite(fd, data, size)
                os.fdatasync(fd)
            except BaseException:
                self._ends.pop(org, None)
                with contextlib.suppress(OSError):  # (else the next look at the log's end cuts it)
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        self._ends[org] = (path, size + len(data), first_seq + len(event_lines) - 1)

    def _end_for_append(self, org, first_seq):
        """(segment, offset) where the records from `first_seq` go: the end of the last segment, or a new segment named
        after `first_seq` (its name made durable before any record in it is)."""
        end = self._ends.get(org)
        if end is not None and end[2] == first_seq - 1 and _size(end[0]) == end[1] and end[1] < SEGMENT_BYTES:
            return end[0], end[1]
        segments = self.segments(org)
        if segments:
            path = self._path(org, segments[-1])
            size, last = _end_at(path, segments[-1], first_seq - 1)
            if last == first_seq - 1 and size < SEGMENT_BYTES:
                return path, size
        directory = self.directory(org)
        created = not directory.is_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = self._path(org, first_seq)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        fsync_directory(directory)
        if created:
            fsync_directory(directory.parent)
        return path, 0

    def cut_after(self, org, seq):
        """Cut the records after `seq` (those of changes that did not commit, and a torn end), durably: a power cut
        must not bring back a record whose seq another change may take next."""
        end = self._ends.pop(org, None)
        if end is not None and end[2] == seq and _size(end[0]) == end[1]:
            self._ends[org] = end  # it ends where this process left it
            return
        for first in reversed(self.segments(org)):
            path = self._path(org, first)
            if first > seq:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                fsync_directory(path.parent)
                continue
            size, last = _end_at(path, first, seq)
            if _size(path) != size:
                truncate_durably(path, size)
            self._ends[org] = (path, size, last)
            return

    def records_after(self, org, seq):
        """The whole records with seq > `seq`, in order, up to the first torn or damaged one, or a gap."""
        found = []
        segments = self.segments(org)
        for index, first in enumerate(segments):
            if index + 1 < len(segments) and segments[index + 1] - 1 <= seq:
                continue  # wholly at or before `seq`
            try:
                with open(self._path(org, first), "rb") as handle:
                    data = handle.read()
            except FileNotFoundError:
                return found
            offset = 0
            while offset + HEADER.size + TRAILER.size <= len(data):
                length, checksum, record_seq = HEADER.unpack_from(data, offset)
                payload = data[offset + HEADER.size:offset + HEADER.size + length]
                trailer = data[offset + HEADER.size + length:offset + HEADER.size + length + TRAILER.size]
                if len(payload) != length or zlib.crc32(payload) != checksum or len(trailer) != TRAILER.size:
                    return found
                if found and record_seq != found[-1].seq + 1:
                    return found
                line_end = payload.index(b"\n") + 1
                if record_seq > seq:
                    found.append(Record(record_seq, payload[:line_end], payload[line_end:]))
                offset += HEADER.size + length + TRAILER.size
            if offset != len(data):
                return found
        return found

    def checkpoint(self, org):
        """The last seq the org's checkpoint made durable, or None when it has had none."""
        try:
            return int((self.directory(org) / CHECKPOINT).read_bytes())
        except (FileNotFoundError, ValueError):
            return None

    def note_checkpoint(self, org, seq):
        """Note that every change through `seq` is durable in place, then remove the segments that hold only such
        changes (never the last)."""
        if seq <= (self.checkpoint(org) or 0):
            return
        atomic_write_bytes(self.directory(org) / CHECKPOINT, b"%d" % seq)
        segments = self.segments(org)
        for first, following in zip(segments, segments[1:]):
            if following - 1 > seq:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(org, first))

    def forget(self):
        """What this process knows of the logs' ends (test mode's reset and restore replace them)."""
        self._ends.clear()


def _record(seq, event_line, entry):
    payload = event_line + entry
    return HEADER.pack(len(payload), zlib.crc32(payload), seq) + payload + TRAILER.pack(len(payload), seq)


def _end_at(path, first_seq, seq):
    """(the offset after the last whole record with seq <= `seq`, that record's seq; (0, `first_seq` - 1) when none) of
    a segment: found walking back from its end by the records' trailers (one record back when it ends with the
    latest committed one), or forward from its start by their headers when its end is torn."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0, first_seq - 1
    try:
        end = os.fstat(fd).st_size
        while end > 0:
            found = _record_before(fd, end)
            if found is None:
                return _scan_forward(fd, end, first_seq, seq)
            start, record_seq = found
            if record_seq <= seq:
                return end, record_seq
            end = start
        return 0, first_seq - 1
    finally:
        os.close(fd)


def _record_before(fd, end):
    """(its start, its seq) of the whole record that ends at `end`, or None when what ends there is none."""
    if end < HEADER.size + TRAILER.size:
        return None
    length, seq = TRAILER.unpack(os.pread(fd, TRAILER.size, end - TRAILER.size))
    start = end - TRAILER.size - length - HEADER.size
    if start < 0:
        return None
    header_length, _, header_seq = HEADER.unpack(os.pread(fd, HEADER.size, start))
    return (start, seq) if (header_length, header_seq) == (length, seq) else None


def _scan_forward(fd, size, first_seq, seq):
    """_end_at's answer read forward from the segment's start, through `size` bytes, header by header."""
    end, last = 0, first_seq - 1
    while end + HEADER.size + TRAILER.size <= size:
        length, _, record_seq = HEADER.unpack(os.pread(fd, HEADER.size, end))
        record_end = end + HEADER.size + length + TRAILER.size
        if record_seq > seq or record_end > size or _record_before(fd, record_end) != (end, record_seq):
            break
        end, last = record_end, record_seq
    return end, last


def _size(path):
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None

