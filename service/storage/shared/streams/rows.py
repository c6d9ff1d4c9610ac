"""The SQL of upload streams: every statement on the `streams` and `stream_chunks` tables, run on the caller's
connection inside the caller's transaction."""
import dataclasses

import orjson

from service.storage.contract import StreamRecord, StreamState
from service.storage.common.sha256_state import Sha256State

EMPTY_STATE = Sha256State().serialize()
# The first key of the advisory lock that serializes the creation of an org's streams (the second: the org's hash).
CREATION_LOCK = 0x5749_5302
# The `state` column of an open stream.
OPEN = StreamState.OPEN.value
# The one clock of stream expiry (CONTRACT 13): the database's, never a node's, so a node or a `wis gc` host with a
# skewed clock cannot expire another node's live streams. Each stream keeps the time-to-live of the node that made it
# (`ttl`), so a node with a shorter WIS_STREAM_TTL_HOURS cannot expire them either.
DB_NOW = "extract(epoch from clock_timestamp())"
EXPIRED = f"touched_at + ttl < {DB_NOW}"
LIVE = f"touched_at + ttl >= {DB_NOW}"
_COLUMNS = f"meta, touched_at + ttl, {EXPIRED}, merged, length, hash_state, head, upload_id, parts, tail"


@dataclasses.dataclass
class StreamRow:
    """A stream's row: its record, and the bookkeeping of its prefix, changed in place while the row is locked."""
    record: StreamRecord
    expires_at: float  # POSIX seconds by the database's clock, when it expires if left idle
    expired: bool
    merged: int  # chunks in the prefix
    length: int  # bytes in the prefix
    hash_state: bytes  # the running SHA-256 at the end of the prefix
    head: bytes  # the prefix's first SNIFF_BYTES
    upload_id: str | None  # the multipart upload the prefix is built in
    parts: list  # [part number, ETag, size] of each part uploaded
    tail: list  # [staged object key, size, chunk index or None] of the bytes after the parts, too few for a part


def _row_of(columns):
    """The StreamRow of a row of _COLUMNS."""
    meta, expires_at, expired, merged, length, hash_state, head, upload_id, parts, tail = columns
    return StreamRow(StreamRecord.from_json(orjson.loads(meta)), expires_at, expired, merged, length, bytes(hash_state),
                     bytes(head), upload_id, orjson.loads(parts), orjson.loads(tail))


def _json(value):
    return orjson.dumps(value).decode()


class StreamRows:
    """The rows of one stream of an org: its `streams` row and its `stream_chunks` rows."""

    def __init__(self, connection, org, stream_id):
        self._connection = connection
        self._key = (org, stream_id)

    def insert(self, record, ttl_seconds):
        """Insert the stream, touched now, to expire when idle for `ttl_seconds`."""
        self._connection.execute(
            "INSERT INTO streams (org, id, meta, protocol, state, touched_at, ttl, hash_state) "
            f"VALUES (%s, %s, %s, %s, %s, {DB_NOW}, %s, %s)",
            (*self._key, _json(record.to_json()), record.protocol, record.state.value, ttl_seconds, EMPTY_STATE))

    def get(self, lock=False):
        """The stream's StreamRow (with `lock`, locked until the transaction ends), or None."""
        row = self._connection.execute(
            f"SELECT {_COLUMNS} FROM streams WHERE org = %s AND id = %s" + (" FOR UPDATE" if lock else ""),
            self._key).fetchone()
        return None if row is None else _row_of(row)

    def get_expired(self):
        """The row, locked, when it has expired and no other transaction holds it; else None."""
        row = self._connection.execute(
            f"SELECT {_COLUMNS} FROM streams WHERE org = %s AND id = %s AND {EXPIRED} FOR UPDATE SKIP LOCKED",
            self._key).fetchone()
        return None if row is None else _row_of(row)

    def save_record(self, record):
        self._connection.execute("UPDATE streams SET meta = %s, state = %s WHERE org = %s AND id = %s",
                                 (_json(record.to_json()), record.state.value, *self._key))

    def save(self, row):
        """Write back the bookkeeping of the prefix (everything but the record) and touch the stream."""
        self._connection.execute(
            "UPDATE streams SET merged = %s, length = %s, hash_state = %s, head = %s, upload_id = %s, parts = %s, "
            f"tail = %s, touched_at = {DB_NOW} WHERE org = %s AND id = %s",
            (row.merged, row.length, row.hash_state, row.head, row.upload_id, _json(row.parts), _json(row.tail),
             *self._key))

    def touch(self):
        self._connection.execute(f"UPDATE streams SET touched_at = {DB_NOW} WHERE org = %s AND id = %s", self._key)

    def chunk_sizes(self):
        """{chunk index: size} of the received chunks."""
        return dict(self._connection.execute(
            "SELECT index, size FROM stream_chunks WHERE org = %s AND stream_id = %s", self._key).fetchall())

    def chunk(self, index):
        """(size, staged object key or None, state after it or None) of a received chunk, or None."""
        return self._connection.execute(
            "SELECT size, object_key, state_after FROM stream_chunks WHERE org = %s AND stream_id = %s AND index = %s",
            (*self._key, index)).fetchone()

    def set_chunk(self, index, size, key, state_after):
        self._connection.execute(
            "INSERT INTO stream_chunks (org, stream_id, index, size, object_key, state_after) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (org, stream_id, index) DO UPDATE SET size = excluded.size, "
            "object_key = excluded.object_key, state_after = excluded.state_after",
            (*self._key, index, size, key, state_after))

    def delete_chunk(self, index):
        self._connection.execute("DELETE FROM stream_chunks WHERE org = %s AND stream_id = %s AND index = %s",
                                 (*self._key, index))

    def delete_chunks(self):
        self._connection.execute("DELETE FROM stream_chunks WHERE org = %s AND stream_id = %s", self._key)

    def staged_keys(self):
        """The keys of the staged objects the chunk rows refer to."""
        return [key for (key,) in self._connection.execute(
            "SELECT object_key FROM stream_chunks WHERE org = %s AND stream_id = %s AND object_key IS NOT NULL",
            self._key)]

    def delete(self):
        """Delete the stream's rows."""
        self.delete_chunks()
        self._connection.execute("DELETE FROM streams WHERE org = %s AND id = %s", self._key)


def open_ids(connection, org):
    """Ids of an org's open streams that have not expired."""
    rows = connection.execute(f"SELECT id FROM streams WHERE org = %s AND state = %s AND {LIVE}",
                              (org, OPEN)).fetchall()
    return [stream_id for (stream_id,) in rows]


def count_open_of(connection, org):
    """How many streams of an org are open and have not expired, with the org's streams locked for creation until the
    transaction ends (a transaction-scoped advisory lock: another one counting the same org waits until this one has
    inserted its stream, or given up)."""
    connection.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (CREATION_LOCK, org))
    return connection.execute(f"SELECT count(*) FROM streams WHERE org = %s AND state = %s AND {LIVE}",
                              (org, OPEN)).fetchone()[0]


def save_open_count(connection):
    """Count the streams of every org that are open and have not expired, keep the count, return it."""
    return connection.execute(
        f"INSERT INTO open_streams_count (streams) SELECT count(*) FROM streams WHERE state = %s AND {LIVE} "
        "ON CONFLICT (one) DO UPDATE SET streams = EXCLUDED.streams RETURNING streams", (OPEN,)).fetchone()[0]


def expired_ids(connection):
    """(org, id) of every stream that has expired."""
    return connection.execute(f"SELECT org, id FROM streams WHERE {EXPIRED}").fetchall()


def lock_all(connection):
    """(org, id, StreamRow) of every stream, each row locked."""
    rows = connection.execute(f"SELECT org, id, {_COLUMNS} FROM streams FOR UPDATE").fetchall()
    return [(org, stream_id, _row_of(rest)) for org, stream_id, *rest in rows]
