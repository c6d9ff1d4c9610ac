"""The streams of every org: creating, finding, locking, deleting and sweeping them."""
import contextlib
import secrets

from service.errors import StreamNotFound, TooManyStreams
from service.storage.contract import STREAM_ID, StreamStatus
from service.storage.testmode.fresh_names import random_hex
from service.storage.shared.streams import rows
from service.storage.shared.streams.imports import import_stream
from service.storage.shared.streams.rows import StreamRows
from service.storage.shared.streams.spool import SharedTusAppend, SpooledChunk
from service.storage.shared.streams.stream import SharedLockedStream


class SharedStreamStore:
    """Every org's streams as rows and objects (service.storage.contract.StreamStore); a stream idle for longer than
    `ttl_seconds` (as the node that made it set it, by the database's clock: rows.DB_NOW) is gone."""

    def __init__(self, database, objects, media, spool, ttl_seconds, max_open=1000,
                 new_hex=random_hex):
        self.database = database
        self.objects = objects
        self.media = media
        self.spool = spool
        self.ttl_seconds = ttl_seconds
        self.max_open = max_open
        # Makes stream ids (service.storage.testmode.fresh_names): random, or seeded in test mode.
        self.new_hex = new_hex
        self._open_count = None  # as this process's last sweep counted them (open_count)

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

    def create(self, org, record):
        """A new stream; TooManyStreams when the org has `max_open` open: counted and inserted in one transaction,
        under an advisory lock of the org, so two nodes cannot both take the last one."""
        stream_id = self.new_hex(16)
        with self.database.transaction() as connection:
            open_now = rows.count_open_of(connection, org)
            if open_now >= self.max_open:
                raise TooManyStreams(open_now, self.max_open, self.ttl_seconds / 3600)
            StreamRows(connection, org, stream_id).insert(record, self.ttl_seconds)
        return stream_id

    def insert(self, org, stream_id, record):
        """A stream under a given id (imports keep the file backend's ids), whatever the org holds."""
        with self.database.transaction() as connection:
            StreamRows(connection, org, stream_id).insert(record, self.ttl_seconds)

    def _row(self, connection, org, stream_id, lock=False):
        """The stream's StreamRow, or None when it does not exist or has expired."""
        if not STREAM_ID.fullmatch(stream_id or ""):
            return None
        row = StreamRows(connection, org, stream_id).get(lock)
        if row is None:
            return None
        return None if row.expired else row

    def peek(self, org, stream_id):
        """The row of a live stream without locking it, or None."""
        with self.database.transaction() as connection:
            return self._row(connection, org, stream_id)

    def read(self, org, stream_id):
        """The StreamRecord of a live stream, or None (unknown, malformed id, or idle past its expiry)."""
        row = self.peek(org, stream_id)
        return row.record if row else None

    def expiry_from_now(self):
        """When a stream touched now expires, by the database's clock (the one clock of expiry)."""
        with self.database.transaction() as connection:
            return connection.execute(f"SELECT {rows.DB_NOW} + %s", (self.ttl_seconds,)).fetchone()[0]

    def status(self, org, stream_id):
        """The StreamStatus of a live stream, else 404."""
        with self.database.transaction() as connection:
            row = self._row(connection, org, stream_id)
            if row is None:
                raise StreamNotFound()
            record = row.record
            chunks = {} if record.is_complete or record.is_tus else StreamRows(connection, org, stream_id).chunk_sizes()
        return StreamStatus(record, chunks, row.length if record.is_tus else None, row.expires_at)

    def open_ids(self, org):
        with self.database.transaction() as connection:
            return rows.open_ids(connection, org)

    def open_count(self):
        """The open streams of every org as this process's last sweep counted them (None before one): from memory,
        so /metrics needs no database."""
        return self._open_count

    # -- receiving ---------------------------------------------------------------------------------------------------

    def new_incoming(self, org, stream_id, head_size, index=None):
        """Where a chunk is received: this node's spool. When it is the next chunk in order as the request begins, it
        is hashed into the stream's running SHA-256 as it arrives (checked again under the lock)."""
        row = self.peek(org, stream_id)
        if row is None:
            raise StreamNotFound()
        in_order = index is not None and not row.record.is_tus and row.merged == index
        return SpooledChunk(self.spool, head_size, self.objects, row.hash_state if in_order else None)

    def add_chunk(self, org, stream_id, chunk, rules):
        """Acknowledge a received chunk (contract.Chunk) in one transaction under the stream's row lock, join what
        continues the prefix, and complete the stream when it is whole, asking `rules` (contract.ChunkRules); return a
        StreamWrite. A transaction that fails is rolled back with everything it wrote."""
        self.stage(org, stream_id, chunk.index, chunk.file)
        with self.open(org, stream_id) as stream:
            return stream.add_chunk(chunk, rules)

    def stage(self, org, stream_id, index, incoming):
        """Work that needs no lock: a chunk that is not next in order is staged in the bucket now, so the stream's
        lock is not held while its bytes travel."""
        if incoming.start_state is not None:
            return
        row = self.peek(org, stream_id)
        if row is None or row.merged == index or row.record.is_complete:
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

    def append_tus(self, org, stream_id, receive, rules, lock_timeout=None):
        """Receive a tus PATCH body to the spool with `receive(SharedTusAppend)` (no lock is held meanwhile: the offset
        is checked again when it commits), then commit it and complete the upload when it is whole, asking `rules`
        (contract.CompletionRules), in one transaction under the row lock; return a StreamWrite. A long body is
        committed in parts on the way when `receive` asks (SharedTusAppend.commit); whatever raises, nothing of the
        body past its last committed part is kept."""
        appending = self.tus_append(org, stream_id)
        try:
            receive(appending)
            with self.open(org, stream_id) as stream:
                return stream.commit_tus(appending, rules)
        finally:
            appending.close()

    def tus_append(self, org, stream_id):
        """A PATCH body to be received at the committed offset of a tus upload (checked again when it commits)."""
        row = self.peek(org, stream_id)
        if row is None:
            raise StreamNotFound()
        return SharedTusAppend(self.spool, row, lambda appending: self._commit_part(org, stream_id, appending))

    def _commit_part(self, org, stream_id, appending):
        with self.open(org, stream_id) as stream:
            stream.append_body(appending)

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
        stream_rows = StreamRows(connection, org, stream_id)
        keys = stream_rows.staged_keys() + [key for key, _, _ in row.tail]
        stream_rows.delete()
        if row.upload_id and not row.record.is_complete:
            self.objects.abort_multipart(self.file_key(org, stream_id), row.upload_id)
        return keys

    def sweep(self):
        """Count the open streams for open_count, and remove the expired ones (by the database's clock and each
        stream's own time-to-live), aborting their multipart uploads and removing their staged objects (streams busy
        in a request are left to the next sweep). Return how many were removed."""
        removed = 0
        with self.database.transaction() as connection:
            self._open_count = rows.save_open_count(connection)
            expired = rows.expired_ids(connection)
        for org, stream_id in expired:
            with self.database.transaction() as connection:
                row = StreamRows(connection, org, stream_id).get_expired()
                if row is None:
                    continue
                keys = self.forget(connection, org, stream_id, row)
            self._remove_objects(keys)
            removed += 1
        return removed

    def import_stream(self, org, stream_id, record, pieces, received):
        """Copy an open stream of the file backend (`wis migrate`): see imports.import_stream."""
        return import_stream(self, org, stream_id, record, pieces, received)

    def remove_all(self):
        """Every stream of every org (test-mode reset)."""
        with self.database.transaction() as connection:
            keys = []
            for org, stream_id, row in rows.lock_all(connection):
                keys += self.forget(connection, org, stream_id, row)
        self._remove_objects(keys)
