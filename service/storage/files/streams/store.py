"""The streams of every org: creating, finding, locking, deleting and sweeping stream directories."""
import contextlib
import os
import shutil
import time

from service.errors import StreamNotFound, TooManyStreams, disk_errors
from service.storage.contract import STREAM_ID, StreamStatus
from service.storage.common.disk import LockTimeout, lock
from service.storage.files.names import id_to_name
from service.storage.files.streams.append import PrefixAppend
from service.storage.files.streams.layout import (META, PREFIX, read_json, read_record, remove_stream, write_json,
                                                   write_record)
from service.storage.files.streams.ledger import Ledger, upgrade
from service.storage.files.streams.stream import LockedStream
from service.storage.files.streams.tus_append import TusAppend, TusRecord
from service.storage.testmode.fresh_names import random_hex
from service.storage.common.incoming import IncomingFile, NotHashed

# Long enough for one request to merge a whole stream's parts while others wait for the lock.
LOCK_TIMEOUT = 60
# The sweep's count of the open streams, in the data directory.
OPEN_STREAMS_COUNT = "open-streams.json"


class ChunkAside(IncomingFile):
    """A chunk received into a file of its own in its stream's folder. A DELETE, or a completion whose file fails its
    check, removes the folder with it; reading it back (to check the chunk's `sha`) then finds the stream gone."""

    def read_back_sha256(self):
        try:
            return super().read_back_sha256()
        except FileNotFoundError:
            raise StreamNotFound() from None


class FileStreamStore:
    """Every org's streams as stream directories (service.storage.contract.StreamStore); a stream idle for longer than
    `ttl_seconds` (by `clock`) is gone."""

    def __init__(self, orgs_root, media, ttl_seconds, clock=time.time, max_open=1000, count_path=None,
                 new_hex=random_hex):
        self.orgs_root = orgs_root
        self.media = media
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self.max_open = max_open
        # Makes stream ids (service.storage.testmode.fresh_names): random, or seeded in test mode.
        self.new_hex = new_hex
        # Where the sweep keeps its count of the open streams (open_count).
        self._count_path = count_path or orgs_root.parent / OPEN_STREAMS_COUNT

    def _directory(self, org, stream_id):
        if not STREAM_ID.fullmatch(stream_id or ""):
            raise StreamNotFound()
        return self.orgs_root / id_to_name(org) / "streams" / stream_id

    def create(self, org, record):
        """Make a new stream directory with its bookkeeping (a tus upload's offset record too); return the server-made
        stream id. TooManyStreams when the org has `max_open` streams open: the org's streams are counted and the new
        one made under one lock of the org (`<org>/streams.lock`), so two workers cannot both take the last one."""
        stream_id = self.new_hex(16)
        directory = self._directory(org, stream_id)
        with lock(directory.parent, timeout=LOCK_TIMEOUT):
            open_now = self._count_open_in(directory.parent, self.clock() - self.ttl_seconds)
            if open_now >= self.max_open:
                raise TooManyStreams(open_now, self.max_open, self.ttl_seconds / 3600)
            self._make(directory, record)
        return stream_id

    def _make(self, directory, record):
        with disk_errors():
            directory.mkdir(parents=True)
            try:
                open(directory / PREFIX, "wb").close()
                if record.is_tus:
                    TusRecord(directory).create()
                else:
                    Ledger.create(directory)
                # meta.json last: a stream exists for readers only once its bookkeeping is complete.
                write_record(directory, record)
            except BaseException:
                shutil.rmtree(directory, ignore_errors=True)
                raise

    def read(self, org, stream_id):
        """The StreamRecord of a live stream, or None (unknown, malformed id, or idle past its expiry)."""
        directory = self._directory(org, stream_id)
        record = read_record(directory)
        if record is None or self._expired(directory):
            return None
        return record

    def _expired(self, directory):
        try:
            return self._expires_at(directory) < self.clock()
        except FileNotFoundError:
            return True

    def _expires_at(self, directory):
        """When a stream expires if left idle: its last activity (the directory's mtime) plus the time-to-live."""
        return directory.stat().st_mtime + self.ttl_seconds

    def expiry_from_now(self):
        """When a stream active now expires if left idle."""
        return self.clock() + self.ttl_seconds

    def new_incoming(self, org, stream_id, head_size, index=None):
        """Where chunk `index` (None: not known yet) is received: onto the end of the prefix when it is the next
        chunk in order and no other request is appending, else a temporary file inside the stream directory (its own
        SHA-256 computed only when asked: its merge hashes it into the stream's running SHA-256)."""
        directory = self._directory(org, stream_id)
        try:
            if index is not None and (appending := PrefixAppend.start(directory, index, head_size)):
                return appending
            return ChunkAside(directory, head_size, NotHashed())
        except (FileNotFoundError, NotADirectoryError):
            raise StreamNotFound() from None

    def add_chunk(self, org, stream_id, chunk, rules):
        """Acknowledge a received chunk (contract.Chunk) under the stream's lock, merge what continues the prefix, and
        complete the stream when it is whole, asking `rules` (contract.ChunkRules); return a StreamWrite."""
        if isinstance(chunk.file, IncomingFile):
            # A chunk received aside (not onto the prefix) is fsynced before the stream's lock is taken: chunks arriving
            # together sync their bytes at once, and one after another only what they share (the part's rename, the
            # merge onto the prefix).
            chunk.file.finish()
        with self.open(org, stream_id) as stream:
            return stream.add_chunk(chunk, rules)

    @contextlib.contextmanager
    def open(self, org, stream_id):
        """Hold the stream's lock and yield a LockedStream; 404 when it does not exist or has expired."""
        directory = self._directory(org, stream_id)
        if read_json(directory / META) is None:
            raise StreamNotFound()
        with lock(directory, timeout=LOCK_TIMEOUT):
            record = read_record(directory)
            if record is None or self._expired(directory):
                remove_stream(directory)
                raise StreamNotFound()
            if not record.is_tus and not record.is_complete:
                with disk_errors():
                    upgrade(directory)
            yield LockedStream(directory, record, self.media, org)

    def append_tus(self, org, stream_id, receive, rules, lock_timeout):
        """Receive a tus PATCH body with `receive(TusAppend)` while holding the upload's append lock (waiting up to
        `lock_timeout` s for it), then commit it and complete the upload when it is whole, asking `rules`
        (contract.CompletionRules); return a StreamWrite. Whatever raises, nothing of the body is kept."""
        directory = self._directory(org, stream_id)
        try:
            appending = TusAppend.start(directory, lock_timeout)
        except (FileNotFoundError, NotADirectoryError):
            raise StreamNotFound() from None
        try:
            receive(appending)
            with self.open(org, stream_id) as stream:
                return stream.commit_tus(appending, rules)
        except BaseException:
            appending.rollback()
            raise
        finally:
            appending.close()

    def status(self, org, stream_id):
        """The StreamStatus of a live stream, else 404: a tus upload's committed offset is read without a lock, a chunk
        stream's chunks under its lock."""
        directory = self._directory(org, stream_id)
        record = self.read(org, stream_id)
        if record is None:
            raise StreamNotFound()
        try:
            if record.is_complete:
                return StreamStatus(record, {}, record.file_size if record.is_tus else None,
                                    self._expires_at(directory))
            if record.is_tus:
                return StreamStatus(record, {}, TusRecord(directory).read()[1], self._expires_at(directory))
            with self.open(org, stream_id) as stream:
                return StreamStatus(stream.record, stream.part_sizes(), None, self._expires_at(directory))
        except (FileNotFoundError, NotADirectoryError):
            raise StreamNotFound() from None

    def open_ids(self, org):
        """Ids of an org's streams that are still open (not complete, not yet swept), in no particular order."""
        streams = self.orgs_root / id_to_name(org) / "streams"
        return self._open_ids_in(streams)

    def open_count(self):
        """The open streams of every org as the last sweep counted them (0 before any): one small file read, however
        many."""
        try:
            counted = read_json(self._count_path)
        except ValueError:  # not one this code wrote
            counted = None
        return counted["openStreams"] if counted else 0

    def _count_open_in(self, streams, cutoff):
        """How many streams in an org's `streams` folder are open and were active since `cutoff`: a stat of each
        stream and of its prefix (there until completion tidies the stream away), no file read."""
        try:
            with os.scandir(streams) as entries:
                return sum(1 for entry in entries if STREAM_ID.fullmatch(entry.name) and _is_open(entry, cutoff))
        except FileNotFoundError:
            return 0

    @staticmethod
    def _open_ids_in(streams):
        try:
            entries = list(os.scandir(streams))
        except FileNotFoundError:
            return []
        found = []
        for entry in entries:
            if STREAM_ID.fullmatch(entry.name):
                try:
                    record = read_record(streams / entry.name)  # None: being created or removed
                except (ValueError, KeyError):
                    continue  # not a stream of ours
                if record is not None and not record.is_complete:
                    found.append(entry.name)
        return found

    def delete(self, org, stream_id):
        """Remove a stream and its parts; False when there is no such stream. An expired one is not found either (as
        by every other request, before any sweep), and is removed as the sweep would."""
        directory = self._directory(org, stream_id)
        if read_json(directory / META) is None:
            return False
        with lock(directory, timeout=LOCK_TIMEOUT):
            found = (directory / META).exists() and not self._expired(directory)
            remove_stream(directory)
        return found

    def sweep(self):
        """Remove streams idle for longer than the time-to-live, and staging files of single uploads as old (their
        worker died), count the open streams that remain for open_count; return how many streams were removed."""
        removed = open_now = 0
        cutoff = self.clock() - self.ttl_seconds
        for org_directory in self._org_directories():
            self.media.sweep_staging(org_directory, cutoff)
            try:
                entries = list(os.scandir(org_directory / "streams"))
            except FileNotFoundError:
                continue
            for entry in entries:
                if not STREAM_ID.fullmatch(entry.name):
                    continue
                if self._sweep_one(org_directory / "streams" / entry.name, cutoff):
                    removed += 1
                elif _is_open(entry, cutoff):
                    open_now += 1
        # Written only when it changed: a sweep that finds what the last one found writes nothing to the data directory.
        if open_now != self.open_count():
            write_json(self._count_path, {"openStreams": open_now})
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
                remove_stream(directory)
                return True
        except (FileNotFoundError, LockTimeout):
            return False


def _is_open(entry, cutoff):
    """True for a stream directory (an os.DirEntry) active since `cutoff` that still has its prefix (not complete)."""
    try:
        return entry.stat().st_mtime >= cutoff and os.path.exists(os.path.join(entry.path, PREFIX))
    except FileNotFoundError:
        return False
