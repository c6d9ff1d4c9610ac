"""JSON documents in PostgreSQL (service.storage.contract.DocumentStore): one row of `documents` per (org, kind, id),
and one row of `revisions` per (org, kind, id, revision) of its history; the same answers as the file backend's.

The body is kept as the JSON text orjson wrote, so numbers and key order come back exactly as stored; the metadata
(createdAt, updatedAt, revision) lives in columns of its own and is put back after the body's fields, where the file
backend writes it. A write is one transaction: a transaction-scoped advisory lock on the object serializes the writers
of one id on every node (also when no row exists yet to lock), then one statement reads the current row and the
history's last revision, one statement writes the document (or removes it), its revision row and the pruning, and the
last one records its event (service.storage.shared.events: the org's seq, taken last, is held until the commit only).
A guarded write first takes the org's references lock (an advisory lock of another key space).
"""
import orjson

from service.errors import ObjectNotFound
from service.storage.contract import (
    CREATED, DEFAULT_HISTORY_REVISIONS, DELETED, NOBODY, RESTORED, UPDATED, Revision, Saved,
    check_revision, oldest_kept, without_meta)
from service.storage.contract.events import NewEvent
from service.storage.contract.read_budget import spend
from service.storage.common.encoding import NAME_HEAD_SIZE, SHORT_NAME_HEAD_SIZE, encode, name_in_head
from service.storage.shared.database import utc_text
from service.storage.shared.media import existing_media

# The time of a write, by the database's clock, read after the object's lock is taken, so updatedAt never goes back as
# revision goes up.
NOW = utc_text()

# The key spaces of the advisory locks: one bigint per object, (class, int) per org for guarded writes.
OBJECT_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%(org)s || '/' || %(kind)s || '/' || %(id)s, 0))"
REFERENCES_LOCK = "SELECT pg_advisory_xact_lock(%(references)s, hashtext(%(org)s))"
REFERENCES_LOCK_CLASS = 0x5749_5302

CURRENT = f"""
    SELECT {NOW}, stored.body, stored.created_at, stored.updated_at, stored.revision,
           (SELECT coalesce(max(revision), 0) FROM revisions
            WHERE org = %(org)s AND kind = %(kind)s AND id = %(id)s)
    FROM (SELECT 1) AS one
    LEFT JOIN documents AS stored ON stored.org = %(org)s AND stored.kind = %(kind)s AND stored.id = %(id)s
"""
PRUNE = """
    DELETE FROM revisions WHERE org = %(org)s AND kind = %(kind)s AND id = %(id)s AND revision < %(oldest)s
"""
SAVE = """
    WITH saved AS (
        INSERT INTO documents AS stored (org, kind, id, body, created_at, updated_at, revision)
        VALUES (%(org)s, %(kind)s, %(id)s, %(body)s, %(created_at)s, %(now)s, %(revision)s)
        ON CONFLICT (org, kind, id) DO UPDATE
            SET body = EXCLUDED.body, updated_at = EXCLUDED.updated_at, revision = EXCLUDED.revision
    ), logged AS (
        INSERT INTO revisions (org, kind, id, revision, change, saved_at, created_at, body, author, comment)
        VALUES (%(org)s, %(kind)s, %(id)s, %(revision)s, %(change)s, %(now)s, %(created_at)s, %(body)s, %(author)s,
                %(comment)s)
    )
""" + PRUNE
DELETE = """
    WITH removed AS (
        DELETE FROM documents WHERE org = %(org)s AND kind = %(kind)s AND id = %(id)s
    ), logged AS (
        INSERT INTO revisions (org, kind, id, revision, change, saved_at, created_at, body, author, comment)
        VALUES (%(org)s, %(kind)s, %(id)s, %(revision)s, %(change)s, %(now)s, %(created_at)s, NULL, %(author)s,
                %(comment)s)
    )
""" + PRUNE

# A migrated document replaces the stored one only when it is a later revision: a second run with the same documents
# changes nothing, and a document the shared service has updated since (a higher revision) is not rolled back. Its
# revision joins the history.
IMPORT = """
    WITH copied AS (
        INSERT INTO documents AS stored (org, kind, id, body, created_at, updated_at, revision)
        VALUES (%(org)s, %(kind)s, %(id)s, %(body)s, %(created_at)s, %(updated_at)s, %(revision)s)
        ON CONFLICT (org, kind, id) DO UPDATE
            SET body = EXCLUDED.body, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
                revision = EXCLUDED.revision
            WHERE stored.revision < EXCLUDED.revision
        RETURNING revision
    ), logged AS (
        INSERT INTO revisions (org, kind, id, revision, change, saved_at, created_at, body)
        SELECT %(org)s, %(kind)s, %(id)s, revision, %(change)s, %(updated_at)s, %(created_at)s, %(body)s FROM copied
        ON CONFLICT DO NOTHING
    )
    SELECT revision FROM copied
"""

COLUMNS = "body, created_at, updated_at, revision"
# The most bytes of stored bodies one read of a page fetches at a time.
PAGE_BATCH_BYTES = 8 * 1024 * 1024


def _body_text(body):
    """The body without metadata fields, as the JSON text stored in the `body` column."""
    return encode(without_meta(body)).decode()


def _attribution_texts(by):
    """The author and comment of a change as the `revisions` columns hold them: JSON strings (PostgreSQL text cannot
    hold the NUL a comment may have), as the events' are."""
    return {field: None if value is None else orjson.dumps(value).decode() for field, value in zip(by._fields, by)}


def _revision(revision, saved_at, change, *texts):
    """The Revision of a row of `revisions` (its author and comment as _attribution_texts keeps them)."""
    return Revision(revision, saved_at, change, *(None if text is None else orjson.loads(text) for text in texts))


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
    """The document as the file backend gives it: the body's fields, then createdAt, updatedAt, revision (charged to
    the request's read budget)."""
    spend(len(body))
    document = orjson.loads(body)
    document["createdAt"] = created_at
    document["updatedAt"] = updated_at
    document["revision"] = revision
    return document


class _TransactionView:
    """What a guard reads (service.storage.contract.DocumentView), inside the write's transaction."""

    def __init__(self, connection):
        self.connection = connection

    def existing(self, org, kind, identifiers):
        rows = self.connection.execute("SELECT id FROM documents WHERE org = %s AND kind = %s AND id = ANY(%s)",
                                       (org, kind, list(identifiers)))
        return {identifier for (identifier,) in rows}

    def each(self, org, kind):
        rows = self.connection.execute(f"SELECT {COLUMNS} FROM documents WHERE org = %s AND kind = %s ORDER BY id",
                                       (org, kind))
        return (_document(*row) for row in rows.fetchall())

    def existing_media(self, org, paths):
        # On the write's connection: a guard holding the references lock never waits for a second pooled connection.
        return existing_media(self.connection, org, paths)


class SharedDocumentStore:
    """Documents of every org in the `documents` table of `database` (service.storage.shared.database.Database), their
    history in `revisions`, the event of each change in `events` (service.storage.shared.events.SharedEventStore):
    service.storage.contract.DocumentStore."""

    def __init__(self, database, events, history_revisions=DEFAULT_HISTORY_REVISIONS):
        self.database = database
        self.events = events
        self.history_revisions = history_revisions

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

    def each(self, org, kind):
        """Every stored document of a kind, in id order."""
        with self.database.transaction() as connection:
            return _TransactionView(connection).each(org, kind)

    def existing_media(self, org, paths):
        """The media paths among `paths` that the org has published."""
        with self.database.transaction() as connection:
            return existing_media(connection, org, paths)

    def with_references_locked(self, org, action):
        """Run `action` in a transaction holding the org's references lock; what it changes through other
        transactions (a media deletion) commits before the lock is released. Answer what it answers."""
        with self.database.transaction() as connection:
            connection.execute(REFERENCES_LOCK, {"org": org, "references": REFERENCES_LOCK_CLASS})
            return action(_TransactionView(connection))

    def _current(self, connection, key, guard):
        """Lock the object (after the org's references when guarded), run the guard; (now, current row or None, the
        history's last revision)."""
        if guard is not None:
            connection.execute(REFERENCES_LOCK, {**key, "references": REFERENCES_LOCK_CLASS})
        connection.execute(OBJECT_LOCK, key)
        now, *row, last = connection.execute(CURRENT, key).fetchone()
        return now, (row if row[0] is not None else None), last

    def save(self, org, kind, identifier, body, *, restored=False, if_revision=None, dry_run=False, guard=None,
             by=NOBODY):
        """Store `body` as a new revision unless it equals the stored body (service.storage.contract.DocumentStore)."""
        key = {"org": org, "kind": kind, "id": identifier}
        body = without_meta(body)
        with self.database.transaction() as connection:
            now, current, last = self._current(connection, key, guard)
            if guard is not None:
                guard(_TransactionView(connection))
            check_revision(kind, identifier, if_revision, current[3] if current else 0)
            if current is not None and orjson.loads(current[0]) == body:
                return Saved(_document(*current), False, False)
            body_text = _body_text(body)
            revision = max(current[3] if current else 0, last) + 1
            created_at = current[1] if current else now
            if not dry_run:
                change = RESTORED if restored else UPDATED if current else CREATED
                connection.execute(SAVE, {**key, "body": body_text, "created_at": created_at, "now": now,
                                          "revision": revision, "change": change, **_attribution_texts(by),
                                          "oldest": oldest_kept(revision, self.history_revisions)})
                self.events.record(connection, org,
                                   NewEvent(now, kind, identifier, revision, change, body.get("name"), *by))
        return Saved(_document(body_text, created_at, now, revision), current is None, True)

    def delete(self, org, kind, identifier, *, if_revision=None, dry_run=False, guard=None, by=NOBODY):
        """Remove the current document and add its DELETED revision, in one transaction; return that revision."""
        key = {"org": org, "kind": kind, "id": identifier}
        with self.database.transaction() as connection:
            now, current, last = self._current(connection, key, guard)
            if current is None:
                raise ObjectNotFound(kind, identifier)
            check_revision(kind, identifier, if_revision, current[3])
            if guard is not None:
                guard(_TransactionView(connection))
            deleted = max(current[3], last) + 1
            if not dry_run:
                connection.execute(DELETE, {**key, "revision": deleted, "change": DELETED, "now": now,
                                            "created_at": current[1], **_attribution_texts(by),
                                            "oldest": oldest_kept(deleted, self.history_revisions)})
                self.events.record(connection, org, NewEvent(now, kind, identifier, deleted, DELETED, None, *by))
        return deleted

    def history(self, org, kind, identifier, first, after=None):
        """Up to `first` revisions, newest first, older than `after` when given."""
        with self.database.transaction() as connection:
            rows = connection.execute(
                "SELECT revision, saved_at, change, author, comment FROM revisions WHERE org = %s AND kind = %s "
                "AND id = %s AND revision < %s ORDER BY revision DESC LIMIT %s",
                (org, kind, identifier, after if after is not None else 2 ** 62, first)).fetchall()
        return [_revision(*row) for row in rows]

    def revision(self, org, kind, identifier, revision):
        """The document as revision `revision` stored it, or None."""
        with self.database.transaction() as connection:
            row = connection.execute(
                "SELECT body, created_at, saved_at, revision FROM revisions WHERE org = %s AND kind = %s AND id = %s "
                "AND revision = %s AND body IS NOT NULL", (org, kind, identifier, revision)).fetchone()
        return None if row is None else _document(*row)

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

    def names(self, org, kind):
        """(id, name) of every object of a kind, in id order, from the start of each body (service.storage.common.encoding
        .name_in_head): SHORT_NAME_HEAD_SIZE characters, then NAME_HEAD_SIZE for the bodies whose name is longer, and
        the whole body only for those whose start does not hold their name (an earlier version's). PostgreSQL
        decompresses only the start of a body for this."""
        heads = "SELECT id, substr(body, 1, %s) FROM documents WHERE org = %s AND kind = %s"
        with self.database.transaction() as connection:
            rows = connection.execute(heads + " ORDER BY id", (SHORT_NAME_HEAD_SIZE, org, kind)).fetchall()
        names = {identifier: name_in_head(identifier, head.encode()) for identifier, head in rows}
        unread = [identifier for identifier, name in names.items() if name is None]
        if unread:
            with self.database.transaction() as connection:
                longer = connection.execute(heads + " AND id = ANY(%s)", (NAME_HEAD_SIZE, org, kind, unread)).fetchall()
            for identifier, head in longer:
                names[identifier] = name_in_head(identifier, head.encode()) \
                    or (self.get(org, kind, identifier) or {}).get("name")
        return [(identifier, name) for identifier, name in names.items() if name is not None]

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
        """Remove every org's documents, their history and events (test mode: seqs start again at 1)."""
        with self.database.transaction() as connection:
            connection.execute("DELETE FROM documents")
            connection.execute("DELETE FROM revisions")
            self.events.remove_all(connection)

    def load_all(self, connection, documents, saved_at):
        """Store each StagedDocument as revision 1, CREATED at `saved_at`, with no other history, inside the caller's
        transaction on `connection`, after removing every org's documents, history and events (test mode's
        replace_state: no event for them, and seqs start again at 1)."""
        connection.execute("DELETE FROM documents")
        connection.execute("DELETE FROM revisions")
        self.events.remove_all(connection)
        rows = [(document.org, document.kind, document.identifier, _body_text(orjson.loads(document.body)), saved_at)
                for document in documents]
        with connection.cursor() as cursor:
            cursor.executemany("INSERT INTO documents (org, kind, id, body, created_at, updated_at, revision) "
                               "VALUES (%s, %s, %s, %s, %s, %s, 1)", [(*row, saved_at) for row in rows])
            cursor.executemany("INSERT INTO revisions (org, kind, id, revision, change, saved_at, created_at, body) "
                               f"VALUES (%s, %s, %s, 1, '{CREATED}', %s, %s, %s)",
                               [(org, kind, identifier, at, at, body) for org, kind, identifier, body, at in rows])

    def import_document(self, org, kind, identifier, document):
        """Copy a document of a file data directory, keeping its createdAt, updatedAt and revision: "copied" when
        it was absent or stored at an earlier revision, "unchanged" when this revision (or a later one) is there."""
        with self.database.transaction() as connection:
            copied = connection.execute(IMPORT, {
                "org": org, "kind": kind, "id": identifier, "body": _body_text(document),
                "created_at": document["createdAt"], "updated_at": document["updatedAt"],
                "revision": document["revision"], "change": CREATED if document["revision"] == 1 else UPDATED,
            }).fetchone()
        return "unchanged" if copied is None else "copied"
