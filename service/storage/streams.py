"""Chunked upload streams on disk: `<data>/orgs/<org>/streams/<streamId>/`.

A stream directory holds
- `meta.json`   what the client declared, and what the server decided (totalChunks, format, path);
- `part-<i>`    each acknowledged chunk not yet merged, fsynced and renamed into place;
- `prefix`      chunks 0..next-1 joined in order, appended as soon as they are contiguous (their parts are
                then removed, so a stream holds each byte once);
- `boundaries`  one fixed-size record per chunk boundary: prefix length and SHA-256 state there;
- `merged`      `{"next": n}`: how many chunks the prefix holds (records 0..n are valid).

The chunk that continues the prefix in order is received straight onto its end (`PrefixAppend`), so it is
written and hashed once; any other chunk is received into a part and appended when the gap before it fills.
Appending writes the prefix and the next boundary record, fsyncs both, then replaces `merged` atomically:
a crash in between leaves `merged` at the old boundary, and the next append truncates the prefix back to
the recorded length. Replacing an already-merged chunk first puts the merged chunks from it on back into
parts (cut from the prefix at the recorded boundaries), then rewinds `merged` to it.

Bookkeeping happens under the stream's cross-process lock `streams/<streamId>.lock`. Writing to the prefix
needs a second one, `streams/<streamId>.append.lock`, which a chunk being received onto the prefix holds
for as long as its bytes arrive (a slow client must not hold up the other chunks' bookkeeping). The lock
files sit beside the directory so a stream can be removed while its locks are held.
"""
import contextlib
import json
import os
import re
import secrets
import shutil
import struct

from filelock import Timeout
from rehashes import PySha256

from service.errors import NotFound
from service.storage.files import atomic_write_bytes, disk_errors, fsync_directory, lock
from service.checksums import file_sha256
from service.storage.incoming import BUFFER_SIZE, IncomingFile, Receiving
from service.storage.names import id_to_name

STREAM_NOT_FOUND = "stream not found"
STREAM_ID = re.compile(r"[0-9a-f]{32}")
META, MERGED, PREFIX, BOUNDARIES = "meta.json", "merged", "prefix", "boundaries"
PART = re.compile(r"part-(\d+)")
# Prefix length (8 bytes) and the serialized SHA-256 state (104 bytes) at a chunk boundary.
BOUNDARY = struct.Struct(">Q104s")
# Long enough for one request to merge a whole stream's parts while others wait for the lock.
LOCK_TIMEOUT = 60


def _write_json(path, value):
    atomic_write_bytes(path, json.dumps(value, separators=(",", ":")).encode())


def _read_json(path):
    try:
        with open(path, "rb") as handle:
            return json.load(handle)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _append_lock_path(directory):
    return f"{directory}.append"


class BoundaryRecords:
    """A stream's `boundaries` file: record i holds (prefix length, SHA-256 state) after chunks 0..i-1. The file is never
    cut: records past `merged` are left over from before a rewind or a crash, and appending overwrites them."""

    def __init__(self, directory):
        self._path = directory / BOUNDARIES
        self._file = None

    def create(self):
        """Write the file with record 0, the empty prefix, and fsync it."""
        with self.writing("wb"):
            self.write(0, 0, PySha256().serialize())
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


def _remove(directory):
    """Remove a stream directory and its lock files; call with the stream's lock held."""
    shutil.rmtree(directory, ignore_errors=True)
    # Waiters on the unlinked lock files notice (filelock checks st_nlink) and find no meta.
    for lock_file in (f"{directory}.lock", f"{_append_lock_path(directory)}.lock"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_file)


def _take_append_lock(directory):
    """The stream's append lock, acquired, or None at once when another request holds it."""
    append_lock = lock(_append_lock_path(directory), timeout=0)
    try:
        append_lock.acquire()
    except Timeout:
        return None
    return append_lock


def _copy_range(prefix, start, length, part):
    """Write `length` bytes of the open `prefix` file, from `start`, into `part` (a file being received)."""
    prefix.seek(start)
    while length:
        block = prefix.read(min(BUFFER_SIZE, length))
        part.write(block)
        length -= len(block)


def _part_sizes(directory):
    sizes = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            match = PART.fullmatch(entry.name)
            if match:
                sizes[int(match.group(1))] = entry.stat().st_size
    return sizes


class StreamStore:
    def __init__(self, orgs_root, media):
        self.orgs_root = orgs_root
        self.media = media

    def _directory(self, org, stream_id):
        if not STREAM_ID.fullmatch(stream_id or ""):
            raise NotFound(STREAM_NOT_FOUND)
        return self.orgs_root / id_to_name(org) / "streams" / stream_id

    def create(self, org, meta):
        """Make a new stream directory with its bookkeeping; return the server-made stream id."""
        stream_id = secrets.token_hex(16)
        directory = self._directory(org, stream_id)
        with disk_errors():
            directory.mkdir(parents=True)
            try:
                open(directory / PREFIX, "wb").close()
                BoundaryRecords(directory).create()
                _write_json(directory / MERGED, {"next": 0})
                # meta.json last: a stream exists for readers only once its bookkeeping is complete.
                _write_json(directory / META, meta)
            except BaseException:
                shutil.rmtree(directory, ignore_errors=True)
                raise
        return stream_id

    def read(self, org, stream_id, ttl_seconds, now):
        """The meta of a live stream, or None (unknown, malformed id, or idle past its expiry)."""
        directory = self._directory(org, stream_id)
        meta = _read_json(directory / META)
        if meta is None or self._expired(directory, ttl_seconds, now):
            return None
        return meta

    @staticmethod
    def _expired(directory, ttl_seconds, now):
        try:
            return directory.stat().st_mtime + ttl_seconds < now
        except FileNotFoundError:
            return True

    def new_incoming(self, org, stream_id, head_size, index=None):
        """Where chunk `index` (None: not known yet) is received: onto the end of the prefix when it is the next
        chunk in order and no other request is appending, else a temporary file inside the stream directory."""
        directory = self._directory(org, stream_id)
        try:
            if index is not None and (appending := PrefixAppend.start(directory, index, head_size)):
                return appending
            return IncomingFile(directory, head_size)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(STREAM_NOT_FOUND) from None

    @contextlib.contextmanager
    def open(self, org, stream_id, ttl_seconds, now):
        """Hold the stream's lock and yield a LockedStream; 404 when it does not exist or has expired."""
        directory = self._directory(org, stream_id)
        if _read_json(directory / META) is None:
            raise NotFound(STREAM_NOT_FOUND)
        with lock(directory, timeout=LOCK_TIMEOUT):
            meta = _read_json(directory / META)
            if meta is None or self._expired(directory, ttl_seconds, now):
                _remove(directory)
                raise NotFound(STREAM_NOT_FOUND)
            yield LockedStream(directory, meta, self.media, org)

    def status(self, org, stream_id, ttl_seconds, now):
        """(meta, {chunk index: size}, time of last activity) of a live stream, else 404."""
        directory = self._directory(org, stream_id)
        meta = self.read(org, stream_id, ttl_seconds, now)
        if meta is None:
            raise NotFound(STREAM_NOT_FOUND)
        if meta["state"] != "open":
            return meta, {}, directory.stat().st_mtime
        with self.open(org, stream_id, ttl_seconds, now) as stream:
            return stream.meta, stream.part_sizes(), directory.stat().st_mtime

    def delete(self, org, stream_id):
        """Remove a stream and its parts; False when there is no such stream."""
        directory = self._directory(org, stream_id)
        if _read_json(directory / META) is None:
            return False
        with lock(directory, timeout=LOCK_TIMEOUT):
            found = (directory / META).exists()
            _remove(directory)
        return found

    def sweep(self, ttl_seconds, now):
        """Remove streams idle for longer than `ttl_seconds` and stale staging files; return how many streams."""
        removed = 0
        cutoff = now - ttl_seconds
        for org_directory in self._org_directories():
            self.media.sweep_staging(org_directory, cutoff)
            try:
                entries = list(os.scandir(org_directory / "streams"))
            except FileNotFoundError:
                continue
            for entry in entries:
                if STREAM_ID.fullmatch(entry.name) and self._sweep_one(org_directory / "streams" / entry.name, cutoff):
                    removed += 1
        return removed

    def _org_directories(self):
        try:
            with os.scandir(self.orgs_root) as entries:
                return [self.orgs_root / entry.name for entry in entries if entry.is_dir()]
        except FileNotFoundError:
            return []

    def _sweep_one(self, directory, cutoff):
        try:
            if directory.stat().st_mtime >= cutoff:
                return False
            # A stream busy in another request is not idle; the next sweep looks again.
            with lock(directory, timeout=0):
                if directory.stat().st_mtime >= cutoff:
                    return False
                _remove(directory)
                return True
        except (FileNotFoundError, Timeout):
            return False


class LockedStream:
    """One stream while its lock is held: chunk bookkeeping, merging, completion."""

    def __init__(self, directory, meta, media, org):
        self.directory = directory
        self.meta = meta
        self._media = media
        self._org = org
        # Set once this request's chunk was received onto the prefix: it holds the append lock until it ends.
        self._appending = None
        self._boundaries = BoundaryRecords(directory)

    def save_meta(self, meta):
        _write_json(self.directory / META, meta)
        self.meta = meta

    def part_sizes(self):
        """{chunk index: size} of every chunk received so far, merged or not."""
        merged = self._next()
        lengths = self._boundaries.lengths(0, merged + 1)
        sizes = {index: lengths[index + 1] - lengths[index] for index in range(merged)}
        # Parts below `merged` are leftovers of a crash after their merge; the prefix holds them.
        sizes.update((index, size) for index, size in _part_sizes(self.directory).items() if index >= merged)
        return sizes

    def _part(self, index):
        return self.directory / f"part-{index}"

    def _next(self):
        return _read_json(self.directory / MERGED)["next"]

    def _set_next(self, index):
        _write_json(self.directory / MERGED, {"next": index})

    def put_part(self, index, incoming):
        """Acknowledge a chunk: it is in the prefix, or its part is fsynced and renamed into place, when this
        returns."""
        if isinstance(incoming, PrefixAppend):
            self._appending = incoming
            if self._commit_append(index, incoming):
                return
            # The prefix was rewound while the chunk arrived (an earlier chunk was replaced): it becomes a part.
            incoming = incoming.spill()
        merged = self._next()
        if index < merged:
            start, end = self._boundaries.lengths(index, index + 2)
            if file_sha256(self.directory / PREFIX, start, end - start) == incoming.sha256:
                incoming.discard()
                self._touch()
                return
            self._unmerge(index, merged)
        incoming.finish()
        with disk_errors():
            os.replace(incoming.path, self._part(index))
            fsync_directory(self.directory)
        self._touch()

    def _commit_append(self, index, appending):
        """Make a chunk received onto the prefix part of it, if the prefix still ends where the chunk began, together
        with the parts that follow it: `merged` moves once, past all of them, or not at all."""
        merged = self._next()
        length = self._boundaries.read(merged)[0]
        if (merged, length) != (index, appending.start) or appending.index != index:
            return False
        appending.flush()
        length += appending.size
        state = appending.stream_state()
        with disk_errors(), self._boundaries.writing():
            self._boundaries.write(index + 1, length, state)
        # The merge fsyncs the prefix and the boundary record written above with its own, then moves `merged`.
        self._merge_parts(index + 1, length, state, self.meta["totalChunks"])
        # A copy of this chunk that arrived as a part meanwhile is superseded by this later one.
        with contextlib.suppress(OSError):
            os.unlink(self._part(index))
        self._touch()
        return True

    @contextlib.contextmanager
    def _prefix_writable(self):
        """Yield True while this request may write to the prefix (it holds the append lock, or takes it now), or
        False when another request is receiving a chunk onto it: that one merges what follows when it commits."""
        if self._appending is not None:
            yield True
            return
        append_lock = _take_append_lock(self.directory)
        try:
            yield append_lock is not None
        finally:
            if append_lock is not None:
                append_lock.release()

    def _unmerge(self, index, merged):
        """Cut chunks index..merged-1 out of the prefix back into parts, then rewind `merged` to `index`.

        Parts first, pointer last: whenever a crash strikes, every acknowledged chunk is in the prefix
        below `merged` or in its part.
        """
        with disk_errors(), open(self.directory / PREFIX, "rb") as prefix:
            for chunk in range(index, merged):
                start, end = self._boundaries.lengths(chunk, chunk + 2)
                part = IncomingFile(self.directory, 0)
                try:
                    _copy_range(prefix, start, end - start, part)
                    part.finish()
                    os.replace(part.path, self._part(chunk))
                finally:
                    part.discard()
            fsync_directory(self.directory)
        self._set_next(index)

    def _touch(self):
        # The directory's mtime is the stream's last activity, which its expiry counts from.
        os.utime(self.directory)

    def merge_available(self):
        """Append every part that continues the in-order prefix; return (chunks merged, prefix length)."""
        total = self.meta["totalChunks"]
        merged = self._next()
        length, state = self._boundaries.read(merged)
        if merged >= total or not self._part(merged).exists():
            return merged, length
        with self._prefix_writable() as writable:
            if not writable:
                return merged, length
            return self._merge_parts(merged, length, state, total)

    def _merge_parts(self, merged, length, state, total):
        """Append parts `merged`, `merged + 1`, ... onto the prefix, fsync it and the boundaries, then move `merged`
        past them; the caller may write to the prefix."""
        hasher = PySha256.deserialize(state)
        first = merged
        with disk_errors(), open(self.directory / PREFIX, "r+b") as prefix, self._boundaries.writing():
            # Bytes past the recorded length are from an append whose bookkeeping never got saved.
            prefix.truncate(length)
            prefix.seek(length)
            while merged < total and self._part(merged).exists():
                with open(self._part(merged), "rb") as part:
                    while block := part.read(BUFFER_SIZE):
                        prefix.write(block)
                        hasher.update(block)
                        length += len(block)
                merged += 1
                self._boundaries.write(merged, length, hasher.serialize())
            prefix.flush()
            os.fsync(prefix.fileno())
            self._boundaries.sync()
            self._set_next(merged)
        # Only now are the merged parts redundant; a crash before this (or a failing unlink) leaves them to publish
        # or expiry.
        for index in range(first, merged):
            with contextlib.suppress(OSError):
                os.unlink(self._part(index))
        return merged, length

    def drop_unmerged(self, index):
        """Forget chunk `index` unless it is merged, and bytes appended past the merged prefix, after a failed
        request; best effort, since the disk may be failing (the next merge truncates the prefix anyway)."""
        with contextlib.suppress(OSError):
            merged = self._next()
            if index >= merged:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._part(index))
            with self._prefix_writable() as writable:
                if writable:
                    with open(self.directory / PREFIX, "r+b") as prefix:
                        prefix.truncate(self._boundaries.read(merged)[0])

    def merged_sha256(self):
        """Hex SHA-256 of the prefix as merged so far."""
        return PySha256.deserialize(self._boundaries.read(self._next())[1]).finalize()

    def publish(self, path):
        """Make the verified prefix the media file at `path`, mark the stream complete, drop its parts."""
        # The media name is fixed by the stream's meta, so a retry after a crash here finds it already linked.
        self._media.publish(self._org, path, self.directory / PREFIX)
        try:
            self.save_meta(dict(self.meta, state="complete", path=path))
        except BaseException:
            if (_read_json(self.directory / META) or {}).get("state") != "complete":
                # Not complete, so not acknowledged: the path must not be visible until a retry completes the stream.
                self._media.unpublish(self._org, path)
                raise
            # Only the fsync after the meta's replacement failed: the stream is complete and its path stays; the
            # error is still reported, and a retry of any chunk answers with the path.
            self._tidy()
            raise
        self._tidy()

    def _tidy(self):
        """Remove all but the meta of a complete stream; best effort, the expiry sweep finishes what fails here."""
        with contextlib.suppress(OSError):
            with os.scandir(self.directory) as entries:
                leftovers = [entry.path for entry in entries if entry.name != META]
            for leftover in leftovers:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)
            self._touch()

    def discard(self):
        """Remove the whole stream (its upload failed verification)."""
        _remove(self.directory)


class PrefixAppend(Receiving):
    """A chunk received straight onto the end of its stream's prefix and hashed into the stream's running SHA-256
    as it arrives, so it is written and hashed once. It holds the stream's append lock until `discard()`; its bytes
    lie past the recorded prefix length until `LockedStream.put_part` commits them."""

    @classmethod
    def start(cls, directory, index, head_size):
        """Begin receiving chunk `index` onto the prefix; None when it is not the next chunk in order or another
        request is appending."""
        if not (directory / META).exists():
            return None
        append_lock = _take_append_lock(directory)
        if append_lock is None:
            return None
        try:
            meta, merged = _read_json(directory / META), _read_json(directory / MERGED)
            total = meta and meta["totalChunks"]
            if meta is None or merged is None or meta["state"] != "open" or merged["next"] != index or \
                    (total is not None and index >= total):
                append_lock.release()
                return None
            return cls(directory, index, *BoundaryRecords(directory).read(index), head_size, append_lock)
        except BaseException:
            append_lock.release()
            raise

    def __init__(self, directory, index, start, state, head_size, append_lock):
        with disk_errors():
            prefix = open(directory / PREFIX, "r+b")
            # Bytes past the recorded length are from an append that was never committed.
            prefix.truncate(start)
            prefix.seek(start)
        super().__init__(prefix, PySha256.deserialize(state), head_size)
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
        self._spilled = IncomingFile(self._directory, 0)
        self.flush()
        with disk_errors(), open(self._directory / PREFIX, "rb") as prefix:
            _copy_range(prefix, self.start, self.size, self._spilled)
        return self._spilled

    def discard(self):
        """Cut what was not committed off the prefix, then release the append lock. Cutting back to the recorded length
        is always safe for the holder of the append lock, committed or not; it is best effort, since the next append
        truncates the prefix anyway."""
        try:
            with contextlib.suppress(OSError):
                merged = _read_json(self._directory / MERGED)
                if merged is not None:
                    self._file.truncate(BoundaryRecords(self._directory).read(merged["next"])[0])
                self._file.close()
            if self._spilled is not None:
                self._spilled.discard()
        finally:
            self._lock.release()
