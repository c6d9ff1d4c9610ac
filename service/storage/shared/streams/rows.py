"""The SQL of upload streams: every statement on the `streams` and `stream_chunks` tables, run on the caller's
connection inside the caller's transaction."""
import orjson

from service.storage.sha256_state import Sha256State

EMPTY_STATE = Sha256State().serialize()
_COLUMN_NAMES = ("meta", "protocol", "state", "touched_at", "merged", "length", "hash_state", "head", "upload_id",
                 "parts", "tail")
_COLUMNS = ", ".join(_COLUMN_NAMES)


def _record_of(row):
    """A row of _COLUMNS as a dict, its JSON and bytes decoded."""
    record = dict(zip(_COLUMN_NAMES, row))
    for name in ("meta", "parts", "tail"):
        record[name] = orjson.loads(record[name])
    for name in ("hash_state", "head"):
        record[name] = bytes(record[name])
    return record


def _json(value):
    return orjson.dumps(value).decode()


class StreamRows:
    """The rows of one stream of an org: its `streams` row and its `stream_chunks` rows."""

    def __init__(self, connection, org, stream_id):
        self._connection = connection
        self._key = (org, stream_id)

    def insert(self, meta, protocol, now):
        self._connection.execute(
            "INSERT INTO streams (org, id, meta, protocol, state, touched_at, hash_state) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)", (*self._key, _json(meta), protocol, meta["state"], now, EMPTY_STATE))

    def get(self, lock=False):
        """The stream's row as a dict (with `lock`, locked until the transaction ends), or None."""
        row = self._connection.execute(
            f"SELECT {_COLUMNS} FROM streams WHERE org = %s AND id = %s" + (" FOR UPDATE" if lock else ""),
            self._key).fetchone()
        return None if row is None else _record_of(row)

    def get_expired(self, cutoff):
        """The row, locked, when it was last touched before `cutoff` and no other transaction holds it; else None."""
        row = self._connection.execute(
            f"SELECT {_COLUMNS} FROM streams WHERE org = %s AND id = %s AND touched_at < %s FOR UPDATE SKIP LOCKED",
            (*self._key, cutoff)).fetchone()
        return None if row is None else _record_of(row)

    def save_meta(self, meta):
        self._connection.execute("UPDATE streams SET meta = %s, state = %s WHERE org = %s AND id = %s",
                                 (_json(meta), meta["state"], *self._key))

    def save(self, row, now):
        """Write back the bookkeeping of the prefix (everything but the meta) and touch the stream."""
        self._connection.execute(
            "UPDATE streams SET merged = %s, length = %s, hash_state = %s, head = %s, upload_id = %s, parts = %s, "
            "tail = %s, touched_at = %s WHERE org = %s AND id = %s",
            (row["merged"], row["length"], row["hash_state"], row["head"], row["upload_id"], _json(row["parts"]),
             _json(row["tail"]), now, *self._key))

    def touch(self, now):
        self._connection.execute("UPDATE streams SET touched_at = %s WHERE org = %s AND id = %s", (now, *self._key))

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


def open_ids(connection, org, since):
    """Ids of an org's open streams touched at or after `since`."""
    rows = connection.execute("SELECT id FROM streams WHERE org = %s AND state = 'open' AND touched_at >= %s",
                              (org, since)).fetchall()
    return [stream_id for (stream_id,) in rows]


def count_open(connection, since):
    """How many streams of every org are open and were touched at or after `since`."""
    return connection.execute("SELECT count(*) FROM streams WHERE state = 'open' AND touched_at >= %s",
                              (since,)).fetchone()[0]


def touched_before(connection, cutoff):
    """(org, id) of every stream last touched before `cutoff`."""
    return connection.execute("SELECT org, id FROM streams WHERE touched_at < %s", (cutoff,)).fetchall()


def lock_all(connection):
    """(org, id, row as a dict) of every stream, each row locked."""
    rows = connection.execute(f"SELECT org, id, {_COLUMNS} FROM streams FOR UPDATE").fetchall()
    return [(org, stream_id, _record_of(rest)) for org, stream_id, *rest in rows]
