"""One stream while its row is locked: chunk bookkeeping, the in-order prefix and its running SHA-256, tus commits,
completion."""
import contextlib
import tempfile

from service.errors import InvalidChunk, OffsetMismatch, ServiceError
from service.interface import SNIFF_BYTES
from service.storage.contract import Outcome, StreamState, StreamWrite
from service.storage.common.sha256_state import Sha256State
from service.storage.shared.streams.assembly import Assembly
from service.storage.shared.streams.rows import EMPTY_STATE, StreamRows


class SharedLockedStream:
    """One stream while its row is locked: chunk bookkeeping, building parts from the prefix, completion."""

    def __init__(self, store, connection, org, stream_id, row, redundant):
        self._store = store
        self._objects = store.objects
        self._connection = connection
        self._rows = StreamRows(connection, org, stream_id)
        self.org = org
        self.stream_id = stream_id
        self._row = row
        self.record = row.record
        # Object keys to remove once the transaction has committed.
        self._redundant = redundant
        self.discarded = False
        # Chunks whose staged object a row of this transaction refers to, and objects it put in the bucket itself.
        self.claims = []
        self.created = []
        self._assembly = Assembly(store, org, stream_id, row, self.record.file_size, redundant, self.created)

    # -- bookkeeping -------------------------------------------------------------------------------------------------

    def save_record(self, record):
        self.record = record
        self._rows.save_record(record)

    def _save_row(self):
        self._rows.save(self._row)

    def _touch(self):
        self._rows.touch()

    def part_sizes(self):
        return self._rows.chunk_sizes()

    # -- chunks ------------------------------------------------------------------------------------------------------

    def add_chunk(self, chunk, rules):
        """Acknowledge a chunk, join what continues the prefix, complete the stream when it is whole (contract.
        ChunkRules decide)."""
        if self.record.is_complete:
            return StreamWrite(Outcome.ALREADY_COMPLETE, self.record.path)
        record = rules.admit(self.record, chunk, self.part_sizes())
        if record != self.record:
            self.save_record(record)
        self.put_part(chunk.index, chunk.file)
        merged, length = self.merge_available()
        if merged < record.total_chunks:
            return StreamWrite(Outcome.STORED)
        return self._complete(rules)

    def _complete(self, rules):
        """Publish the whole file where `rules` say, or discard the stream when they refuse it."""
        row = self._row
        try:
            path = rules.verify(self.record, row.length, self.merged_sha256(), row.head)
        except ServiceError:
            self.discard()
            raise
        path = self.publish(path)
        return StreamWrite(Outcome.COMPLETED, path, row.length)

    def put_part(self, index, incoming):
        """Acknowledge a chunk: when this transaction commits, it is part of the prefix or staged in the bucket."""
        merged = self._row.merged
        if index < merged:
            if not self._resent_merged(index, incoming):
                return
            merged = self._row.merged
        previous = self._rows.chunk(index)
        if previous is not None and previous[1]:
            self._redundant.append(previous[1])
        if index > merged:
            if incoming.staged_key is None:
                # Staged before the lock was taken? Not if the stream moved on meanwhile: now, then.
                incoming.staged_key = self._store.staged_key(self.org, self.stream_id, f"chunk-{index}")
                with incoming.reading() as file:
                    self._objects.put_file(incoming.staged_key, file, incoming.size)
            self._rows.set_chunk(index, incoming.size, incoming.staged_key, None)
            self.claims.append(incoming)
            self._touch()
            return
        state = incoming.state_after(self._row.hash_state)
        with incoming.reading() as file:
            self._append(index, file, incoming.size, state, incoming.head, staged_key=incoming.staged_key,
                         owner=incoming)
        self._save_row()

    def _resent_merged(self, index, incoming):
        """A chunk already in the prefix sent again. The same bytes are a safe retry. Other bytes replace it while it
        and the chunks after it still wait in the tail as objects of their own: they become staged chunks again and
        the prefix rewinds to it. A chunk joined into a part cannot be replaced: parts cannot be read back to rebuild
        the ones after it."""
        size, _, state_after = self._rows.chunk(index)
        before = EMPTY_STATE if index == 0 else bytes(self._rows.chunk(index - 1)[2])
        if incoming.size == size and incoming.state_after(before) == bytes(state_after):
            if incoming.staged_key:
                self._redundant.append(incoming.staged_key)
            self._touch()
            return False
        tail = self._row.tail
        position = next((at for at, (_, _, chunk) in enumerate(tail) if chunk == index), None)
        if position is None:
            raise InvalidChunk(f"chunkIndex: chunk {index} is already joined into a part of the stream's file with "
                               "other bytes; on the shared backend such a chunk can only be re-sent unchanged (start "
                               "a new stream to send other bytes)")
        rewound, self._row.tail = tail[position:], tail[:position]
        self._redundant.append(rewound[0][0])
        for key, length, chunk in rewound[1:]:
            self._rows.set_chunk(chunk, length, key, None)
        self._row.merged = index
        self._row.length -= sum(length for _, length, _ in rewound)
        # The head is the prefix's first bytes: those of the chunks rewound go with them (verify sniffs the head when
        # chunk 0 was too short to tell the format).
        self._row.head = self._row.head[:self._row.length]
        self._row.hash_state = before
        self._rows.delete_chunk(index)
        self._save_row()
        return True

    def _append(self, index, file, size, state, head, staged_key=None, owner=None):
        """Add `size` bytes of `file` (chunk `index`, or a tus body when index is None) to the prefix."""
        row = self._row
        if self._assembly.add(file, size, index, staged_key) and owner is not None:
            self.claims.append(owner)
        if len(row.head) < SNIFF_BYTES:
            row.head = (row.head + head)[:SNIFF_BYTES]
        row.length += size
        row.hash_state = state
        if index is not None:
            row.merged = index + 1
            self._rows.set_chunk(index, size, None, state)

    def merge_available(self):
        """Join every staged chunk that continues the prefix; return (chunks joined, prefix length)."""
        total = self.record.total_chunks
        row = self._row
        changed = False
        while row.merged < total:
            chunk = self._rows.chunk(row.merged)
            if chunk is None or chunk[1] is None:
                break
            size, key, _ = chunk
            # The staged object is read back to hash it; its bytes are kept only when they join the tail's into a part
            # (otherwise it is copied into a part, or joins the tail, inside the store).
            hasher = Sha256State.deserialize(row.hash_state)
            head = b""
            with contextlib.ExitStack() as cleanup:
                local = cleanup.enter_context(tempfile.TemporaryFile(dir=self._store.spool)) \
                    if self._assembly.joins_tail_into_part(size) else None
                blocks = self._objects.read(key)
                cleanup.callback(blocks.close)
                for block in blocks:
                    hasher.update(block)
                    if local is not None:
                        local.write(block)
                    if len(head) < SNIFF_BYTES:
                        head = (head + block)[:SNIFF_BYTES]
                if local is not None:
                    local.seek(0)
                self._append(row.merged, local, size, hasher.serialize(), head, staged_key=key)
            changed = True
        if changed:
            self._save_row()
        return row.merged, row.length

    def merged_sha256(self):
        return Sha256State.deserialize(self._row.hash_state).finalize()

    # -- tus ---------------------------------------------------------------------------------------------------------

    def commit_tus(self, appending, rules):
        """Make a received PATCH body part of the upload, and complete the upload when it is whole."""
        self.append_body(appending)
        if self._row.length < self.record.file_size:
            return StreamWrite(Outcome.STORED, offset=self._row.length)
        return self._complete(rules)

    def append_body(self, appending):
        """Make a received PATCH body part of the upload, if nothing was appended since it began (tus PATCHes of one
        upload are sequential; a concurrent one that committed first wins, this one is refused)."""
        if self._row.length != appending.offset:
            raise OffsetMismatch(f"Upload-Offset: the upload is at offset {self._row.length}, not "
                                 f"{appending.offset}; nothing was appended (HEAD gives the offset to continue from)")
        if appending.size:
            with appending.reading() as file:
                self._append(None, file, appending.size, appending.state(), appending.head_of_body())
            self._save_row()
        else:
            self._touch()

    # -- completion --------------------------------------------------------------------------------------------------

    def publish(self, path):
        """Join the multipart upload into the media object, register the media path (or find the org's media of the
        same bytes and name) and mark the stream complete with that path, in this transaction; its staged objects, and
        the joined object when it was not needed, go once it commits. The path."""
        row = self._row
        self._assembly.complete()
        file_key = self._store.file_key(self.org, self.stream_id)
        published, indexed = self._store.media.register(self._connection, self.org, path, file_key,
                                                        self.record.file_size, self.merged_sha256())
        if published is not None and not indexed:
            self._redundant.append(file_key)
        published = published or path
        self._redundant.extend(key for key, _, _ in row.tail)
        row.tail = []
        self._rows.delete_chunks()
        self._save_row()
        self.save_record(self.record.replace(state=StreamState.COMPLETE, path=published))
        return published

    def discard(self):
        """Remove the whole stream (its upload failed verification): rows now, objects after the commit."""
        self._redundant.extend(self._store.forget(self._connection, self.org, self.stream_id, self._row))
        self.discarded = True
