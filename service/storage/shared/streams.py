"""Upload streams on the shared backend: state in the `streams` and `stream_chunks` tables, bytes in the bucket.

A stream's file is built as an S3 multipart upload at the key of the media it becomes, from its in-order prefix, as
on the file backend: S3 parts must be 5 MiB or more (but the last) and cannot be read back, while chunks may be 1 byte
to 10 MB and arrive in any order. So
- the chunk (or tus PATCH body) that continues the prefix is received to this node's spool, hashed into the stream's
  running SHA-256 as it arrives (its state, 104 bytes, is in the row), and becomes a part at once when it is big
  enough; smaller ones wait as staged objects in the row's `tail` until the tail makes a part;
- any other chunk is staged as an object of its own before the stream's lock is taken, and is read back (to hash it)
  and copied into a part inside the store when the gap before it fills;
- the whole file's SHA-256 comes from the running state at completion: nothing is read again when chunks came in
  order.

Every change happens under the row's lock (`SELECT ... FOR UPDATE`), in one transaction per request: exactly one
request completes a stream, whichever node it reaches, and the media index row that makes its path visible is
written in the transaction that marks it complete, after the multipart upload is joined. A transaction that fails
leaves the row as it was: a part uploaded meanwhile is overwritten by the next attempt (same part number) or left
out of the completion, and a staged object nobody recorded is removed at once, or by the expiry sweep.
"""
import contextlib
import hashlib
import os
import secrets
import tempfile
import time

import orjson

from service.errors import InvalidChunk, OffsetMismatch, StreamNotFound
from service.interface import SNIFF_BYTES
from service.storage.contract import STREAM_ID, new_stream_id
from service.storage.disk import disk_errors
from service.storage.incoming import BUFFER_SIZE, Receiving
from service.storage.sha256_state import Sha256State
from service.storage.shared.objects import MIN_PART_SIZE, NoSuchObject
from service.storage.shared.tus import SharedTusAppend

EMPTY_STATE = Sha256State().serialize()
_COLUMN_NAMES = ("meta", "protocol", "state", "touched_at", "merged", "length", "hash_state", "head", "upload_id",
                 "parts", "tail")
_COLUMNS = ", ".join(_COLUMN_NAMES)


class SharedStreamStore:
    """Every org's streams; a stream idle for longer than `ttl_seconds` (by `clock`) is gone."""

    def __init__(self, database, objects, media, spool, ttl_seconds, clock=time.time):
        self.database = database
        self.objects = objects
        self.media = media
        self.spool = spool
        self.ttl_seconds = ttl_seconds
        self.clock = clock

    def _stream_key(self, org, stream_id, name):
        return self.objects.key(f"streams/{org}/{stream_id}/{name}")

    def file_key(self, org, stream_id):
        """Where a stream's file is assembled, and stays as the media it becomes (the media index points to it): a
        media name depends on the sniffed format, which a tus upload learns only at its end."""
        return self.objects.key(f"media/{org}/uploads/{stream_id}")

    def staged_key(self, org, stream_id, what):
        """A fresh key for a staged object of a stream (never reused, so a failed request cannot clobber one a row
        refers to)."""
        return self._stream_key(org, stream_id, f"{what}-{secrets.token_hex(6)}")

    # -- creating and reading ---------------------------------------------------------------------------------------

    def create(self, org, meta, tus=False):
        stream_id = new_stream_id()
        self._insert(org, stream_id, meta, tus)
        return stream_id

    def _insert(self, org, stream_id, meta, tus):
        with self.database.transaction() as connection:
            connection.execute(
                "INSERT INTO streams (org, id, meta, protocol, state, touched_at, hash_state) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (org, stream_id, orjson.dumps(meta).decode(), "tus" if tus else "chunks", meta["state"], self.clock(),
                 EMPTY_STATE))

    def _row(self, connection, org, stream_id, lock=False):
        """The stream's row as a dict, or None when it does not exist or has expired."""
        if not STREAM_ID.fullmatch(stream_id or ""):
            return None
        row = connection.execute(
            f"SELECT {_COLUMNS} FROM streams WHERE org = %s AND id = %s" + (" FOR UPDATE" if lock else ""),
            (org, stream_id)).fetchone()
        if row is None:
            return None
        record = self._record_of(row)
        return None if record["touched_at"] + self.ttl_seconds < self.clock() else record

    def peek(self, org, stream_id):
        """The row of a live stream without locking it, or None."""
        with self.database.transaction() as connection:
            return self._row(connection, org, stream_id)

    def read(self, org, stream_id):
        """The meta of a live stream, or None (unknown, malformed id, or idle past its expiry)."""
        row = self.peek(org, stream_id)
        return row["meta"] if row else None

    def expiry_from_now(self):
        return self.clock() + self.ttl_seconds

    def status(self, org, stream_id):
        """(meta, {chunk index: size}, time it expires if left idle) of a live stream, else 404."""
        with self.database.transaction() as connection:
            row = self._row(connection, org, stream_id)
            if row is None:
                raise StreamNotFound()
            sizes = {}
            if row["state"] == "open":
                sizes = dict(connection.execute(
                    "SELECT index, size FROM stream_chunks WHERE org = %s AND stream_id = %s",
                    (org, stream_id)).fetchall())
        return row["meta"], sizes, row["touched_at"] + self.ttl_seconds

    def tus_offset(self, org, stream_id):
        """(meta, committed offset, time it expires if left idle) of a live tus upload, else 404."""
        row = self.peek(org, stream_id)
        if row is None:
            raise StreamNotFound()
        offset = row["meta"]["fileSize"] if row["state"] != "open" else row["length"]
        return row["meta"], offset, row["touched_at"] + self.ttl_seconds

    def open_ids(self, org):
        with self.database.transaction() as connection:
            rows = connection.execute("SELECT id FROM streams WHERE org = %s AND state = 'open' AND touched_at >= %s",
                                      (org, self.clock() - self.ttl_seconds)).fetchall()
        return [stream_id for (stream_id,) in rows]

    def count_open(self):
        with self.database.transaction() as connection:
            return connection.execute("SELECT count(*) FROM streams WHERE state = 'open' AND touched_at >= %s",
                                      (self.clock() - self.ttl_seconds,)).fetchone()[0]

    # -- receiving ---------------------------------------------------------------------------------------------------

    def new_incoming(self, org, stream_id, head_size, index=None):
        """Where a chunk is received: this node's spool. When it is the next chunk in order as the request begins, it
        is hashed into the stream's running SHA-256 as it arrives (checked again under the lock)."""
        row = self.peek(org, stream_id)
        if row is None:
            raise StreamNotFound()
        in_order = index is not None and row["protocol"] == "chunks" and row["merged"] == index
        return SpooledChunk(self.spool, head_size, self.objects, row["hash_state"] if in_order else None)

    def prepare(self, org, stream_id, index, incoming):
        """Work that needs no lock: a chunk that is not next in order is staged in the bucket now, so the stream's
        lock is not held while its bytes travel."""
        if incoming.start_state is not None:
            return
        row = self.peek(org, stream_id)
        if row is None or row["merged"] == index or row["state"] != "open":
            return
        key = self.staged_key(org, stream_id, f"chunk-{index}")
        with incoming.reading() as file:
            self.objects.put_file(key, file, incoming.size)
        incoming.staged_key = key

    @contextlib.contextmanager
    def open(self, org, stream_id):
        """Hold the stream's row lock for one transaction and yield a SharedLockedStream; 404 when it does not exist or
        has expired. Objects the transaction made redundant are removed once it has committed."""
        redundant = []
        refusal = stream = None
        try:
            with self.database.transaction() as connection:
                row = self._row(connection, org, stream_id, lock=True)
                if row is None:
                    raise StreamNotFound()
                stream = SharedLockedStream(self, connection, org, stream_id, row, redundant)
                try:
                    yield stream
                except Exception as error:
                    if not stream.discarded:
                        raise
                    # A stream discarded because its file failed verification stays discarded: the transaction
                    # commits, and the request still answers with the error.
                    refusal = error
        except BaseException:
            if stream is not None:
                # Rolled back: what this transaction put in the bucket for its rows is referred to by nothing.
                self._remove_objects(stream.created)
            raise
        for incoming in stream.claims:
            incoming.claimed = True
        self._remove_objects(redundant)
        if refusal is not None:
            raise refusal

    def _remove_objects(self, keys):
        for key in keys:
            # Best effort: a key left behind is garbage no row names (the README suggests a lifecycle rule for them).
            with contextlib.suppress(Exception):
                self.objects.delete(key)

    def tus_append(self, org, stream_id, lock_timeout):
        """A PATCH body to be received at the committed offset of a tus upload (checked again when it commits)."""
        row = self.peek(org, stream_id)
        if row is None:
            raise StreamNotFound()
        return SharedTusAppend(self.spool, row)

    # -- ending ------------------------------------------------------------------------------------------------------

    def delete(self, org, stream_id):
        """Remove a stream, abort its multipart upload and remove its staged objects; False when there is none."""
        if not STREAM_ID.fullmatch(stream_id or ""):
            return False
        with self.database.transaction() as connection:
            row = self._row(connection, org, stream_id, lock=True)
            if row is None:
                return False
            keys = self.forget(connection, org, stream_id, row)
        self._remove_objects(keys)
        return True

    def forget(self, connection, org, stream_id, row):
        """Delete a stream's rows and abort its multipart upload (unless complete); return its staged keys."""
        keys = [key for (key,) in connection.execute(
            "SELECT object_key FROM stream_chunks WHERE org = %s AND stream_id = %s AND object_key IS NOT NULL",
            (org, stream_id))]
        keys += [key for key, _, _ in row["tail"]]
        connection.execute("DELETE FROM stream_chunks WHERE org = %s AND stream_id = %s", (org, stream_id))
        connection.execute("DELETE FROM streams WHERE org = %s AND id = %s", (org, stream_id))
        if row["upload_id"] and row["state"] == "open":
            self.objects.abort_multipart(self.file_key(org, stream_id), row["upload_id"])
        return keys

    def sweep(self):
        """Remove streams idle for longer than the time-to-live, aborting their multipart uploads and removing their
        staged objects; streams busy in a request are left to the next sweep. Return how many."""
        cutoff = self.clock() - self.ttl_seconds
        removed = 0
        with self.database.transaction() as connection:
            expired = connection.execute(
                "SELECT org, id FROM streams WHERE touched_at < %s", (cutoff,)).fetchall()
        for org, stream_id in expired:
            keys = []
            with self.database.transaction() as connection:
                row = connection.execute(
                    f"SELECT {_COLUMNS} FROM streams WHERE org = %s AND id = %s AND touched_at < %s "
                    "FOR UPDATE SKIP LOCKED", (org, stream_id, cutoff)).fetchone()
                if row is None:
                    continue
                record = self._record_of(row)
                keys = self.forget(connection, org, stream_id, record)
            self._remove_objects(keys)
            removed += 1
        return removed

    @staticmethod
    def _record_of(row):
        """A row of _COLUMNS as a dict, its JSON and bytes decoded."""
        record = dict(zip(_COLUMN_NAMES, row))
        for name in ("meta", "parts", "tail"):
            record[name] = orjson.loads(record[name])
        for name in ("hash_state", "head"):
            record[name] = bytes(record[name])
        return record

    def import_stream(self, org, stream_id, meta, pieces, received):
        """Copy an open stream of the file backend (`wis migrate`), keeping its id: `pieces` yields (chunk index, or
        None for a tus upload's bytes, open binary file, size) in the order they are to be received; `received` is
        what the source holds ({chunk index: size}, or the tus offset). A stream already copied with the same
        received data is "unchanged"; one copied only in part (an interrupted run) is copied again."""
        current = self.peek(org, stream_id)
        if current is not None:
            if current["protocol"] == "tus":
                held = current["length"]
            else:
                held = self.status(org, stream_id)[1]
            if held == received:
                return "unchanged"
            self.delete(org, stream_id)
        tus = meta.get("protocol") == "tus"
        self._insert(org, stream_id, meta, tus)
        for index, file, size in pieces:
            if tus:
                appending = self.tus_append(org, stream_id, 0)
                try:
                    _copy(file, size, appending)
                    with self.open(org, stream_id) as stream:
                        stream.commit_tus(appending)
                finally:
                    appending.close()
                continue
            incoming = self.new_incoming(org, stream_id, SNIFF_BYTES, index)
            try:
                _copy(file, size, incoming)
                self.prepare(org, stream_id, index, incoming)
                with self.open(org, stream_id) as stream:
                    stream.put_part(index, incoming)
                    stream.merge_available()
            finally:
                incoming.discard()
        return "copied"

    def remove_all(self):
        """Every stream of every org (test-mode reset)."""
        with self.database.transaction() as connection:
            rows = connection.execute(f"SELECT org, id, {_COLUMNS} FROM streams FOR UPDATE").fetchall()
            keys = []
            for org, stream_id, *rest in rows:
                keys += self.forget(connection, org, stream_id, self._record_of(rest))
        self._remove_objects(keys)


def _copy(source, size, target):
    while size > 0 and (block := source.read(min(BUFFER_SIZE, size))):
        target.write(block)
        size -= len(block)


class SpooledChunk(Receiving):
    """A chunk received to this node's spool, hashed into its stream's running SHA-256 when it began in order
    (`start_state`), and its own SHA-256 computed only when asked (a chunk sent with a `sha` field)."""

    def __init__(self, spool, head_size, objects, start_state=None):
        with disk_errors():
            fd, name = tempfile.mkstemp(dir=spool, prefix="chunk-")
        self.path = name
        self.start_state = start_state
        hasher = Sha256State.deserialize(start_state) if start_state is not None else _NoHash()
        super().__init__(os.fdopen(fd, "w+b"), hasher, head_size)
        self._objects = objects
        # An object of this chunk in the bucket (staged before or under the stream's lock), and whether a committed row
        # refers to it; one that none does goes with the chunk.
        self.staged_key = None
        self.claimed = False
        self._sha = None

    @property
    def sha256(self):
        if self._sha is None:
            digest = hashlib.sha256()
            with self.reading() as file:
                while block := file.read(BUFFER_SIZE):
                    digest.update(block)
            self._sha = digest.hexdigest()
        return self._sha

    def state_after(self, start_state):
        """The running SHA-256 state after this chunk, continuing from `start_state`."""
        if start_state == self.start_state:
            return self._hasher.serialize()
        hasher = Sha256State.deserialize(start_state)
        with self.reading() as file:
            while block := file.read(BUFFER_SIZE):
                hasher.update(block)
        return hasher.serialize()

    @contextlib.contextmanager
    def reading(self):
        """The received bytes, from the start."""
        with disk_errors():
            self._file.flush()
        with open(self.path, "rb") as file:
            yield file

    def finish(self):
        with disk_errors():
            self._file.flush()

    def discard(self):
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self.staged_key is not None and not self.claimed:
            with contextlib.suppress(Exception):  # best effort, as every removal of a staged object
                self._objects.delete(self.staged_key)


class _NoHash:
    def update(self, data):
        pass


class SharedLockedStream:
    """One stream while its row is locked: chunk bookkeeping, building parts from the prefix, completion."""

    def __init__(self, store, connection, org, stream_id, row, redundant):
        self._store = store
        self._objects = store.objects
        self._connection = connection
        self.org = org
        self.stream_id = stream_id
        self._row = row
        self.meta = row["meta"]
        # Object keys to remove once the transaction has committed.
        self._redundant = redundant
        self._assembled = False
        self.discarded = False
        # Chunks whose staged object a row of this transaction refers to, and objects it put in the bucket itself.
        self.claims = []
        self.created = []

    # -- bookkeeping -------------------------------------------------------------------------------------------------

    def save_meta(self, meta):
        self.meta = meta
        self._connection.execute("UPDATE streams SET meta = %s, state = %s WHERE org = %s AND id = %s",
                                 (orjson.dumps(meta).decode(), meta["state"], self.org, self.stream_id))

    def _save_row(self):
        row = self._row
        self._connection.execute(
            "UPDATE streams SET merged = %s, length = %s, hash_state = %s, head = %s, upload_id = %s, parts = %s, "
            "tail = %s, touched_at = %s WHERE org = %s AND id = %s",
            (row["merged"], row["length"], row["hash_state"], row["head"], row["upload_id"],
             orjson.dumps(row["parts"]).decode(), orjson.dumps(row["tail"]).decode(), self._store.clock(),
             self.org, self.stream_id))

    def _touch(self):
        self._connection.execute("UPDATE streams SET touched_at = %s WHERE org = %s AND id = %s",
                                 (self._store.clock(), self.org, self.stream_id))

    def part_sizes(self):
        return dict(self._connection.execute(
            "SELECT index, size FROM stream_chunks WHERE org = %s AND stream_id = %s",
            (self.org, self.stream_id)).fetchall())

    def _chunk(self, index):
        """(size, staged object key or None, state after it or None) of a received chunk, or None."""
        return self._connection.execute(
            "SELECT size, object_key, state_after FROM stream_chunks WHERE org = %s AND stream_id = %s AND index = %s",
            (self.org, self.stream_id, index)).fetchone()

    def _set_chunk(self, index, size, key, state_after):
        self._connection.execute(
            "INSERT INTO stream_chunks (org, stream_id, index, size, object_key, state_after) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (org, stream_id, index) DO UPDATE SET size = excluded.size, "
            "object_key = excluded.object_key, state_after = excluded.state_after",
            (self.org, self.stream_id, index, size, key, state_after))

    # -- chunks ------------------------------------------------------------------------------------------------------

    def put_part(self, index, incoming):
        """Acknowledge a chunk: when this transaction commits, it is part of the prefix or staged in the bucket."""
        merged = self._row["merged"]
        if index < merged:
            if not self._resent_merged(index, incoming):
                return
            merged = self._row["merged"]
        previous = self._chunk(index)
        if previous is not None and previous[1]:
            self._redundant.append(previous[1])
        if index > merged:
            if incoming.staged_key is None:
                # Staged before the lock was taken? Not if the stream moved on meanwhile: now, then.
                incoming.staged_key = self._store.staged_key(self.org, self.stream_id, f"chunk-{index}")
                with incoming.reading() as file:
                    self._objects.put_file(incoming.staged_key, file, incoming.size)
            self._set_chunk(index, incoming.size, incoming.staged_key, None)
            self.claims.append(incoming)
            self._touch()
            return
        state = incoming.state_after(self._row["hash_state"])
        with incoming.reading() as file:
            self._append(index, file, incoming.size, state, incoming.head, staged_key=incoming.staged_key,
                         owner=incoming)
        self._save_row()

    def _resent_merged(self, index, incoming):
        """A chunk already in the prefix sent again. The same bytes are a safe retry. Other bytes replace it while it
        and the chunks after it still wait in the tail as objects of their own: they become staged chunks again and
        the prefix rewinds to it. A chunk joined into a part cannot be replaced: parts cannot be read back to rebuild
        the ones after it."""
        size, _, state_after = self._chunk(index)
        before = EMPTY_STATE if index == 0 else bytes(self._chunk(index - 1)[2])
        if incoming.size == size and incoming.state_after(before) == bytes(state_after):
            if incoming.staged_key:
                self._redundant.append(incoming.staged_key)
            self._touch()
            return False
        tail = self._row["tail"]
        position = next((at for at, (_, _, chunk) in enumerate(tail) if chunk == index), None)
        if position is None:
            raise InvalidChunk(f"chunkIndex: chunk {index} is already joined into a part of the stream's file with "
                               "other bytes; on the shared backend such a chunk can only be re-sent unchanged (start "
                               "a new stream to send other bytes)")
        rewound, self._row["tail"] = tail[position:], tail[:position]
        self._redundant.append(rewound[0][0])
        for key, length, chunk in rewound[1:]:
            self._set_chunk(chunk, length, key, None)
        self._row["merged"] = index
        self._row["length"] -= sum(length for _, length, _ in rewound)
        self._row["hash_state"] = before
        self._connection.execute("DELETE FROM stream_chunks WHERE org = %s AND stream_id = %s AND index = %s",
                                 (self.org, self.stream_id, index))
        self._save_row()
        return True

    def _append(self, index, file, size, state, head, staged_key=None, owner=None):
        """Add `size` bytes of `file` (chunk `index`, or a tus body when index is None) to the prefix: as a part of its
        own, into a part with the tail before it, or onto the tail when they are still too small for a part."""
        row = self._row
        if not row["tail"] and (size >= MIN_PART_SIZE or self._is_last(size)):
            if staged_key is not None:
                self._add_part_copy(staged_key, size)
            else:
                self._add_part(file, size)
        elif self._joins_tail_into_part(size):
            self._add_part_from_tail(file, size)
            if staged_key is not None:
                self._redundant.append(staged_key)
        else:
            if staged_key is None:
                staged_key = self._store.staged_key(self.org, self.stream_id, "tail")
                self.created.append(staged_key)
                self._objects.put_file(staged_key, file, size)
            elif owner is not None:
                self.claims.append(owner)
            row["tail"].append([staged_key, size, index])
        if len(row["head"]) < SNIFF_BYTES:
            row["head"] = (row["head"] + head)[:SNIFF_BYTES]
        row["length"] += size
        row["hash_state"] = state
        if index is not None:
            row["merged"] = index + 1
            self._set_chunk(index, size, None, state)

    def _is_last(self, size):
        return self._row["length"] + size == self.meta["fileSize"]

    def _joins_tail_into_part(self, size):
        """True when `size` more bytes and the tail before them make a part (5 MiB, or the end of the file)."""
        tail = self._row["tail"]
        return bool(tail) and (sum(length for _, length, _ in tail) + size >= MIN_PART_SIZE or self._is_last(size))

    def _media_key(self):
        return self._store.file_key(self.org, self.stream_id)

    def _upload_id(self):
        if self._row["upload_id"] is None:
            self._row["upload_id"] = self._objects.start_multipart(self._media_key())
        return self._row["upload_id"]

    def _add_part(self, file, size):
        number = len(self._row["parts"]) + 1
        try:
            etag = self._objects.upload_part(self._media_key(), self._upload_id(), number, file, size)
        except NoSuchObject:
            if not self._already_assembled():
                raise
            return
        self._row["parts"].append([number, etag, size])

    def _add_part_copy(self, staged_key, size):
        number = len(self._row["parts"]) + 1
        etag = self._objects.copy_part(self._media_key(), self._upload_id(), number, staged_key)
        self._row["parts"].append([number, etag, size])
        self._redundant.append(staged_key)

    def _add_part_from_tail(self, file, size):
        """Join the tail's staged objects and `size` bytes of `file` into one part, through a spool file."""
        with tempfile.TemporaryFile(dir=self._store.spool) as joined:
            total = 0
            for key, length, _ in self._row["tail"]:
                blocks = self._objects.read(key)
                try:
                    for block in blocks:
                        joined.write(block)
                finally:
                    blocks.close()
                total += length
            while block := file.read(BUFFER_SIZE):
                joined.write(block)
            total += size
            joined.seek(0)
            self._redundant.extend(key for key, _, _ in self._row["tail"])
            self._row["tail"] = []
            self._add_part(joined, total)

    def _already_assembled(self):
        """True when an earlier attempt joined the multipart upload (its transaction then failed): the object is
        there, whole, at the media key."""
        try:
            size, _ = self._objects.head(self._media_key())
        except NoSuchObject:
            return False
        self._assembled = size == self.meta["fileSize"]
        return self._assembled

    def merge_available(self):
        """Join every staged chunk that continues the prefix; return (chunks joined, prefix length)."""
        total = self.meta["totalChunks"]
        row = self._row
        changed = False
        while row["merged"] < total:
            chunk = self._chunk(row["merged"])
            if chunk is None or chunk[1] is None:
                break
            size, key, _ = chunk
            # The staged object is read back to hash it; its bytes are kept only when they join the tail's into a part
            # (otherwise it is copied into a part, or joins the tail, inside the store).
            hasher = Sha256State.deserialize(row["hash_state"])
            head = b""
            with contextlib.ExitStack() as cleanup:
                local = cleanup.enter_context(tempfile.TemporaryFile(dir=self._store.spool)) \
                    if self._joins_tail_into_part(size) else None
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
                self._append(row["merged"], local, size, hasher.serialize(), head, staged_key=key)
            changed = True
        if changed:
            self._save_row()
        return row["merged"], row["length"]

    def drop_unmerged(self, index):
        """Nothing to undo: the failed transaction is rolled back with everything it wrote."""

    def merged_sha256(self):
        return Sha256State.deserialize(self._row["hash_state"]).finalize()

    # -- tus ---------------------------------------------------------------------------------------------------------

    def commit_tus(self, appending):
        """Make a received PATCH body part of the upload, if nothing was appended since it began (tus PATCHes of one
        upload are sequential; a concurrent one that committed first wins, this one is refused)."""
        if self._row["length"] != appending.offset:
            raise OffsetMismatch(f"Upload-Offset: the upload is at offset {self._row['length']}, not "
                                 f"{appending.offset}; nothing was appended (HEAD gives the offset to continue from)")
        if appending.size:
            with appending.reading() as file:
                self._append(None, file, appending.size, appending.state(), appending.head_of_body())
            self._save_row()
        else:
            self._touch()
        appending.committed()

    # -- completion --------------------------------------------------------------------------------------------------

    def publish(self, path):
        """Join the multipart upload into the media object, register the media path and mark the stream complete, in
        this transaction; its staged objects go once it commits."""
        row = self._row
        key = self._media_key()
        if not self._assembled:
            if row["tail"]:
                self._add_part_from_tail(_EMPTY, 0)
            try:
                self._objects.complete_multipart(key, self._upload_id(), [(number, etag) for number, etag, _ in
                                                                          row["parts"]])
            except NoSuchObject:
                if not self._already_assembled():
                    raise
        self._store.media.register(self._connection, self.org, path, key, self.meta["fileSize"],
                                   self.merged_sha256())
        self._redundant.extend(key for key, _, _ in row["tail"])
        row["tail"] = []
        self._connection.execute("DELETE FROM stream_chunks WHERE org = %s AND stream_id = %s",
                                 (self.org, self.stream_id))
        self._save_row()
        self.save_meta(dict(self.meta, state="complete", path=path))

    def discard(self):
        """Remove the whole stream (its upload failed verification): rows now, objects after the commit."""
        self._redundant.extend(self._store.forget(self._connection, self.org, self.stream_id, self._row))
        self.discarded = True


class _EmptyFile:
    def read(self, size=-1):
        return b""


_EMPTY = _EmptyFile()
