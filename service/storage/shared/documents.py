"""JSON documents in PostgreSQL (service.storage.contract.DocumentStore): one row of `documents` per (org, kind, id),
the same answers as the file backend's.

The body is kept as the JSON text orjson wrote, so numbers and key order come back exactly as stored; the metadata
(createdAt, updatedAt, revision) lives in columns of its own and is put back after the body's fields, where the file
backend writes it. An upsert is one INSERT ... ON CONFLICT statement: the row lock serializes concurrent upserts of
one id from any number of processes and nodes, so each acknowledged write adds exactly 1 to `revision`.
"""
import orjson

from service.storage.contract import DOCUMENT_META_FIELDS
from service.storage.encoding import encode

# The timestamp format of service.storage.contract.utc_timestamp (2024-05-01T12:00:00.123Z), made by the database: one
# clock for every node, read after the row lock is taken, so updatedAt never goes back as revision goes up.
NOW = """to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""

UPSERT = f"""
    INSERT INTO documents AS stored (org, kind, id, body, created_at, updated_at, revision)
    SELECT %(org)s, %(kind)s, %(id)s, %(body)s, now, now, 1 FROM (SELECT {NOW} AS now) AS clock
    ON CONFLICT (org, kind, id) DO UPDATE
        SET body = EXCLUDED.body, updated_at = {NOW}, revision = stored.revision + 1
    RETURNING created_at, updated_at, revision
"""

# A migrated document replaces the stored one only when it is a later revision: a second run with the same documents
# changes nothing, and a document the shared service has updated since (a higher revision) is not rolled back.
IMPORT = """
    INSERT INTO documents AS stored (org, kind, id, body, created_at, updated_at, revision)
    VALUES (%(org)s, %(kind)s, %(id)s, %(body)s, %(created_at)s, %(updated_at)s, %(revision)s)
    ON CONFLICT (org, kind, id) DO UPDATE
        SET body = EXCLUDED.body, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
            revision = EXCLUDED.revision
        WHERE stored.revision < EXCLUDED.revision
    RETURNING revision
"""

COLUMNS = "body, created_at, updated_at, revision"
# The most bytes of stored bodies one read of a page fetches at a time.
PAGE_BATCH_BYTES = 8 * 1024 * 1024


def _body_text(body):
    """The body without metadata fields, as the JSON text stored in the `body` column."""
    return encode({key: value for key, value in body.items() if key not in DOCUMENT_META_FIELDS}).decode()


def _batches(sized):
    """Ids of [(id, size)] in order, grouped so each group's sizes add up to at most PAGE_BATCH_BYTES (or is one id)."""
    batch, batch_bytes = [], 0
    for identifier, size in sized:
        if batch and batch_bytes + size > PAGE_BATCH_BYTES:
            yield batch
            batch, batch_bytes = [], 0
        batch.append(identifier)
        batch_bytes += size
    if batch:
        yield batch


def _document(body, created_at, updated_at, revision):
    """The document as the file backend gives it: the body's fields, then createdAt, updatedAt, revision."""
    document = orjson.loads(body)
    document["createdAt"] = created_at
    document["updatedAt"] = updated_at
    document["revision"] = revision
    return document


class SharedDocumentStore:
    """Documents of every org in the `documents` table of `database` (service.storage.shared.database.Database):
    service.storage.contract.DocumentStore."""

    def __init__(self, database):
        self.database = database

    def get(self, org, kind, identifier):
        """Return the stored document, or None."""
        with self.database.transaction() as connection:
            row = connection.execute(f"SELECT {COLUMNS} FROM documents WHERE org = %s AND kind = %s AND id = %s",
                                     (org, kind, identifier)).fetchone()
        return None if row is None else _document(*row)

    def existing(self, org, kind, identifiers):
        """The ids among `identifiers` that the org has stored of `kind`: one query, however many are asked."""
        with self.database.transaction() as connection:
            rows = connection.execute("SELECT id FROM documents WHERE org = %s AND kind = %s AND id = ANY(%s)",
                                      (org, kind, list(identifiers)))
            return {identifier for (identifier,) in rows}

    def upsert(self, org, kind, identifier, body):
        """Store `body` as the whole object; return (document, created) once the write is committed."""
        body_text = _body_text(body)
        with self.database.transaction() as connection:
            created_at, updated_at, revision = connection.execute(
                UPSERT, {"org": org, "kind": kind, "id": identifier, "body": body_text}).fetchone()
        # Revisions start at 1 and only grow: 1 is the row this statement inserted.
        return _document(body_text, created_at, updated_at, revision), revision == 1

    def kinds(self, org):
        """The kinds of document an org has stored (processes, products, stations), sorted."""
        with self.database.transaction() as connection:
            rows = connection.execute("SELECT DISTINCT kind FROM documents WHERE org = %s ORDER BY kind", (org,))
            return [kind for (kind,) in rows]

    def ids(self, org, kind):
        """All stored ids of a kind, in byte order (the column's collation is "C")."""
        with self.database.transaction() as connection:
            rows = connection.execute("SELECT id FROM documents WHERE org = %s AND kind = %s ORDER BY id", (org, kind))
            return [identifier for (identifier,) in rows]

    def page(self, org, kind, first, after=None):
        """Up to `first` documents with ids after `after`, in id order: one range scan of the primary key for their ids
        and sizes, then their bodies in batches of at most PAGE_BATCH_BYTES (one document at least), each batch read
        when the caller gets to it. A page of large documents is never held whole, and no connection is held between
        batches."""
        query = "SELECT id, octet_length(body) FROM documents WHERE org = %s AND kind = %s"
        parameters = [org, kind]
        if after is not None:
            query += " AND id > %s"
            parameters.append(after)
        query += " ORDER BY id LIMIT %s"
        parameters.append(first)
        with self.database.transaction() as connection:
            sized = connection.execute(query, parameters).fetchall()
        return self._each_stored(org, kind, _batches(sized))

    def _each_stored(self, org, kind, batches):
        for identifiers in batches:
            with self.database.transaction() as connection:
                rows = connection.execute(
                    f"SELECT {COLUMNS} FROM documents WHERE org = %s AND kind = %s AND id = ANY(%s) ORDER BY id",
                    (org, kind, identifiers)).fetchall()
            for row in rows:  # a document removed since the listing is not among them
                yield _document(*row)

    def remove_all(self):
        """Remove every org's documents (test mode)."""
        with self.database.transaction() as connection:
            connection.execute("DELETE FROM documents")

    def import_document(self, org, kind, identifier, document):
        """Copy a document of a file data directory, keeping its createdAt, updatedAt and revision: "copied" when
        it was absent or stored at an earlier revision, "unchanged" when this revision (or a later one) is there."""
        with self.database.transaction() as connection:
            copied = connection.execute(IMPORT, {
                "org": org, "kind": kind, "id": identifier, "body": _body_text(document),
                "created_at": document["createdAt"], "updated_at": document["updatedAt"],
                "revision": document["revision"]}).fetchone()
        return "unchanged" if copied is None else "copied"
