"""One stream while its lock is held: acknowledging chunks, merging them onto the prefix, publishing the result."""
import contextlib
import os

from service.interface.checksums import file_sha256
from service.errors import ServiceError, StorageFailed, StorageFull, disk_errors
from service.interface import SNIFF_BYTES
from service.storage.contract import Outcome, StreamState, StreamWrite
from service.storage.common.disk import fsync_directory, remove_file
from service.storage.files.streams.append import PrefixAppend
from service.storage.files.streams.layout import (META, PREFIX, copy_range, part_path, part_sizes, pending_record,
                                                   read_record, remove_stream, take_append_lock, write_record)
from service.storage.files.streams.ledger import Ledger
from service.storage.files.streams.tus_append import committed_offset
from service.storage.common.incoming import BUFFER_SIZE, INCOMING_PREFIX, IncomingFile
from service.storage.common.sha256_state import Sha256State


class LockedStream:
    """One stream while its lock is held: chunk bookkeeping, merging, completion."""

    def __init__(self, directory, record, media, org):
        self.directory = directory
        self.record = record
        self._media = media
        self._org = org
        # Set once this request's chunk was received onto the prefix: it holds the append lock until it ends.
        self._appending = None
        self._ledger = Ledger(directory)

    def save_record(self, record):
        write_record(self.directory, record)
        self.record = record

    def part_sizes(self):
        """{chunk index: size} of every chunk received so far, merged or not."""
        merged = self._ledger.next()
        lengths = self._ledger.lengths(0, merged + 1)
        sizes = {index: lengths[index + 1] - lengths[index] for index in range(merged)}
        # Parts below `merged` are leftovers of a crash after their merge; the prefix holds them.
        sizes.update((index, size) for index, size in part_sizes(self.directory).items() if index >= merged)
        return sizes

    def _part(self, index):
        return part_path(self.directory, index)

    def add_chunk(self, chunk, rules):
        """Acknowledge a chunk, merge what continues the prefix, complete the stream when it is whole (contract.
        ChunkRules decide); a request that fails to store its chunk leaves nothing behind. A chunk received onto the
        prefix releases the append lock before the stream's lock is released (PrefixAppend.start says why)."""
        try:
            return self._add_chunk(chunk, rules)
        finally:
            if isinstance(chunk.file, PrefixAppend):
                chunk.file.discard()

    def _add_chunk(self, chunk, rules):
        if self.record.is_complete:
            return StreamWrite(Outcome.ALREADY_COMPLETE, self.record.path)
        record = rules.admit(self.record, chunk, self.part_sizes())
        if record != self.record:
            self.save_record(record)
        try:
            self.put_part(chunk.index, chunk.file)
            merged, length = self.merge_available()
        except (StorageFull, StorageFailed):
            # Nothing left behind (and what it took of a full disk freed): the chunk is reported missing, so the
            # client resends it.
            self.drop_unmerged(chunk.index)
            raise
        if merged < record.total_chunks:
            return StreamWrite(Outcome.STORED)
        return self._complete(rules, length, self.merged_sha256())

    def _complete(self, rules, length, sha256):
        """Publish the whole file where `rules` say, or discard the stream when they refuse it."""
        with disk_errors(), open(self.directory / PREFIX, "rb") as prefix:
            head = prefix.read(SNIFF_BYTES)
        try:
            path = rules.verify(self.record, length, sha256, head)
        except ServiceError:
            self.discard()
            raise
        path = self.publish(path, sha256)
        return StreamWrite(Outcome.COMPLETED, path, length)

    def put_part(self, index, incoming):
        """Acknowledge a chunk: it is in the prefix, or its part is fsynced and renamed into place, when this
        returns."""
        if isinstance(incoming, PrefixAppend):
            self._appending = incoming
            if self._commit_append(index, incoming):
                return
            # The prefix was rewound while the chunk arrived (an earlier chunk was replaced): it becomes a part.
            incoming = incoming.spill()
        merged = self._ledger.next()
        if index < merged:
            start, end = self._ledger.lengths(index, index + 2)
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
        with the parts that follow it: one commit of the ledger, past all of them, or none."""
        merged = self._ledger.next()
        length = self._ledger.read(merged)[0]
        if (merged, length) != (index, appending.start) or appending.index != index:
            return False
        appending.flush()
        length += appending.size
        state = appending.stream_state()
        # The merge fdatasyncs the prefix with the parts after the chunk, then commits them all.
        self._merge_parts(length, state, [(length, state)])
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
        append_lock = take_append_lock(self.directory)
        try:
            yield append_lock is not None
        finally:
            if append_lock is not None:
                append_lock.release()

    def _unmerge(self, index, merged):
        """Cut chunks index..merged-1 out of the prefix back into parts, then rewind the ledger to `index` chunks.

        Parts first, ledger last: whenever a crash strikes, every acknowledged chunk is in the prefix below what the
        ledger says is merged, or in its part.
        """
        with disk_errors(), open(self.directory / PREFIX, "rb") as prefix:
            for chunk in range(index, merged):
                start, end = self._ledger.lengths(chunk, chunk + 2)
                part = IncomingFile(self.directory, 0)
                try:
                    copy_range(prefix, start, end - start, part)
                    part.finish()
                    os.replace(part.path, self._part(chunk))
                finally:
                    part.discard()
            fsync_directory(self.directory)
        self._ledger.commit(index)

    def _touch(self):
        # The directory's mtime is the stream's last activity, which its expiry counts from.
        os.utime(self.directory)

    def merge_available(self):
        """Append every part that continues the in-order prefix; return (chunks merged, prefix length)."""
        merged = self._ledger.next()
        length, state = self._ledger.read(merged)
        if merged >= self.record.total_chunks or not self._part(merged).exists():
            return merged, length
        with self._prefix_writable() as writable:
            if not writable:
                return merged, length
            return self._merge_parts(length, state)

    def _merge_parts(self, length, state, boundaries=()):
        """Append the parts that continue the prefix onto it, fdatasync it, then commit them to the ledger with the
        chunks of `boundaries` ((length, SHA-256 state) after each), which are on the prefix already (`length` and
        `state` are after them). One fdatasync of the prefix and one of the ledger, however many chunks; the caller may
        write to the prefix."""
        boundaries = list(boundaries)
        committed = self._ledger.next()
        merged = first = committed + len(boundaries)
        hasher = Sha256State.deserialize(state)
        with disk_errors(), open(self.directory / PREFIX, "r+b") as prefix:
            # Bytes past the recorded length are from an append whose bookkeeping never got saved.
            prefix.truncate(length)
            prefix.seek(length)
            while merged < self.record.total_chunks and self._part(merged).exists():
                with open(self._part(merged), "rb") as part:
                    while block := part.read(BUFFER_SIZE):
                        prefix.write(block)
                        hasher.update(block)
                        length += len(block)
                merged += 1
                boundaries.append((length, hasher.serialize()))
            prefix.flush()
            os.fdatasync(prefix.fileno())
        self._ledger.commit(merged, boundaries)
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
            merged = self._ledger.next()
            if index >= merged:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._part(index))
            with self._prefix_writable() as writable:
                if writable:
                    with open(self.directory / PREFIX, "r+b") as prefix:
                        prefix.truncate(self._ledger.read(merged)[0])

    def export(self):
        """(pieces, received) of this open stream, for copying it to another backend (`wis migrate`): pieces yields
        (chunk index, or None for a tus upload's bytes, open binary file at the piece's start, size) in order;
        received is {chunk index: size}, or a tus upload's committed offset."""
        if self.record.is_tus:
            offset = committed_offset(self.directory)
            return self._pieces([(None, self.directory / PREFIX, 0, offset)]), offset
        merged = self._ledger.next()
        lengths = self._ledger.lengths(0, merged + 1)
        places = [(index, self.directory / PREFIX, lengths[index], lengths[index + 1] - lengths[index])
                  for index in range(merged)]
        places += [(index, self._part(index), 0, size)
                   for index, size in sorted(part_sizes(self.directory).items()) if index >= merged]
        return self._pieces(places), self.part_sizes()

    @staticmethod
    def _pieces(places):
        for index, path, start, size in places:
            with open(path, "rb") as file:
                file.seek(start)
                yield index, file, size

    def commit_tus(self, appending, rules):
        """Make a tus PATCH body received onto the prefix (a TusAppend holding the append lock) part of the upload,
        and complete the upload when it is whole."""
        appending.commit()
        if appending.offset < self.record.file_size:
            return StreamWrite(Outcome.STORED, offset=appending.offset)
        return self._complete(rules, appending.offset, appending.sha256())

    def merged_sha256(self):
        """Hex SHA-256 of the prefix as merged so far."""
        return Sha256State.deserialize(self._ledger.read(self._ledger.next())[1]).finalize()

    def publish(self, path, sha256):
        """Make the verified prefix (hex `sha256`) the media file at `path`, or find the org's media of the same bytes
        and name; mark the stream complete with that path, drop its parts; the path.

        The complete record is written aside before the media is linked: the link's directory fsync then carries its
        bytes to the disk in the same journal commit, so that the completion waits for two commits (the link, the
        record's rename), not three."""
        # The media name is fixed by the stream's record, so a retry after a crash here finds it already linked (or
        # the same media again).
        complete = self.record.replace(state=StreamState.COMPLETE, path=path)
        pending = pending_record(self.directory, complete)
        try:
            published = self._media.publish(self._org, path, self.directory / PREFIX, sha256) or path
            if published != path:
                pending.discard()
                complete = complete.replace(path=published)
                pending = pending_record(self.directory, complete)
            self._commit_completion(pending, complete)
        finally:
            pending.discard()
        return published

    def _commit_completion(self, pending, complete):
        """Put the complete record in place and tidy the stream; when that fails, take back the media this stream
        linked, unless the record is in place."""
        linked = self._media.holds(self._org, complete.path, self.directory / PREFIX)
        try:
            pending.commit()
        except BaseException:
            stored = read_record(self.directory)
            if stored is None or not stored.is_complete:
                # Not complete, so not acknowledged: a path this stream linked must not be visible until a retry
                # completes the stream (media it found the same are another upload's, and stay).
                if linked:
                    self._media.unpublish(self._org, complete.path)
                raise
            # Only the fsync after the meta's replacement failed: the stream is complete and its path stays; the
            # error is still reported, and a retry of any chunk answers with the path.
            self.record = complete
            self._tidy()
            raise
        self.record = complete
        self._tidy()

    def _tidy(self):
        """Remove all but the meta of a complete stream; best effort, the expiry sweep finishes what fails here. A
        prefix that is not the published media (the org had the same media already) is freed on a thread of its own:
        freeing a whole upload's blocks takes longer than the rest of the request. A chunk another request is still
        receiving here (the same chunk sent again at once) is that request's until it ends, which removes it: it still
        reads it back to check its `sha`, and answers with the path."""
        with contextlib.suppress(OSError):
            with os.scandir(self.directory) as entries:
                leftovers = [entry.path for entry in entries
                             if entry.name != META and not entry.name.startswith(INCOMING_PREFIX)]
            for leftover in leftovers:
                with contextlib.suppress(FileNotFoundError):
                    remove_file(leftover)
            self._touch()

    def discard(self):
        """Remove the whole stream (its upload failed verification)."""
        remove_stream(self.directory)
