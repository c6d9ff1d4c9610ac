"""Published media on the shared backend: the bytes are objects in the bucket at `media/<org>/<images|videos>/<name>`,
the media index is the `media` table. A media path exists when its row does, and a row is written only once its object
is whole, so a media path never names a partial object, on whichever node it is asked for.

Order of writes: object, then row (publish, register, import_file); row, then object (delete). Only a failure
between the two can leave an object without a row, which no request can see.

Deduplication (CONTRACT 10): the `identity` column holds `<images|videos>/<cleaned name>` (contract.MediaIdentity),
unique with the org and the SHA-256, so that of two identical uploads at once one inserts its row and the other's
insert finds the conflict and answers the first's path. Rows written before that column existed got it from the
migration (the oldest of each identity; later copies keep none and are never answered). Deleting media keeps its
identity's path in `collected_media`: the same bytes uploaded again are published at that path again.
"""
import concurrent.futures
import contextlib
import hashlib
import os
from typing import NamedTuple

from service.errors import MediaNotFound, ObjectStoreUnavailable, StorageFailed
from service.interface import parse_media_path
from service.storage.contract import MEDIA_FOLDERS, MediaIdentity, OpenMedia
from service.storage.common.incoming import IncomingFile
from service.storage.shared.objects import READ_BLOCK, ObjectReader

# Every media object is under this folder of the bucket's prefix; the org, then the media folder, follow.
MEDIA_FOLDER = "media/"
# Objects put at once by a replacement of the whole state (test mode): the store's latency, not the bytes, sets its
# pace for small media.
PUT_THREADS = 4


class Registered(NamedTuple):
    """What indexing an object as media did (SharedMediaStore.register)."""
    path: str | None  # the path that holds the bytes; None when the path asked for is taken by other bytes
    indexed: bool  # the object given is the one indexed there (else the caller's object is not needed)


def existing_media(connection, org, paths):
    """The media paths among `paths` that `org` has published, read on `connection` (in its transaction)."""
    rows = connection.execute("SELECT path FROM media WHERE org = %s AND path = ANY(%s)", (org, list(paths)))
    return {path for (path,) in rows}


def file_sha256(file_path):
    """(size, hex SHA-256) of a local file, read in blocks."""
    digest = hashlib.sha256()
    size = 0
    with open(file_path, "rb") as file:
        while block := file.read(READ_BLOCK):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


class SharedMediaStore:
    """Every org's published media (service.storage.contract.MediaStore)."""

    def __init__(self, database, objects, spool, clock):
        self._database = database
        self._objects = objects
        self._spool = spool
        self._clock = clock

    def media_key(self, org, path):
        """The object key of a media path of an org. Org ids and media names are case-sensitive, as keys are."""
        parsed = parse_media_path(path)
        if parsed is None:
            raise ValueError(f"not a media path: {path!r}")
        kind, name = parsed
        return self._objects.key(f"{MEDIA_FOLDER}{org}/{MEDIA_FOLDERS[kind]}/{name}")

    def exists(self, org, path):
        """True when `path` names a whole, verified media object uploaded by `org`."""
        with self._database.transaction() as connection:
            return connection.execute("SELECT 1 FROM media WHERE org = %s AND path = %s", (org, path)).fetchone() \
                is not None

    def existing(self, org, paths):
        """The media paths among `paths` that name whole, verified media objects uploaded by `org`: one query."""
        with self._database.transaction() as connection:
            return existing_media(connection, org, paths)

    def list_media(self, org):
        """(media path, creation time in POSIX seconds) of every published media object of an org, by path."""
        with self._database.transaction() as connection:
            return [(path, created) for path, created in connection.execute(
                "SELECT path, created_at FROM media WHERE org = %s ORDER BY path", (org,))]

    def open(self, org, path):
        """The org's media at `path` opened to be served (OpenMedia), or None when it has none there. Nothing is read
        from the bucket until the file is sought or read; an object deleted meanwhile is then MediaNotFound."""
        with self._database.transaction() as connection:
            row = connection.execute("SELECT object_key, size, COALESCE(etag, sha256), created_at FROM media "
                                     "WHERE org = %s AND path = %s", (org, path)).fetchone()
        if row is None:
            return None
        key, size, etag, created_at = row
        # The SHA-256 of the bytes is a strong validator by definition.
        return OpenMedia(ObjectReader(self._objects, key, size, missing=MediaNotFound), size, etag, created_at)

    def delete(self, org, path):
        """Remove a published media object of an org; False when there was none. Its path is kept for its identity, so
        that uploading the same bytes again publishes them there again.

        The object goes inside the transaction that deletes the row: if the store fails, the row stays (503, nothing
        changed); readers that still saw the row find no object and answer 404."""
        with self._database.transaction() as connection:
            row = connection.execute("DELETE FROM media WHERE org = %s AND path = %s "
                                     "RETURNING object_key, identity, sha256, size", (org, path)).fetchone()
            if row is None:
                return False
            key, identity, sha256, size = row
            if identity is not None:
                connection.execute(
                    "INSERT INTO collected_media (org, identity, sha256, size, path) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (org, identity, sha256) DO UPDATE SET size = EXCLUDED.size, path = EXCLUDED.path",
                    (org, identity, sha256, size, path))
            self._objects.delete(key)
        return True

    def new_incoming(self, org, head_size):
        """A spool file of this node for a single-request upload: received to disk, hashed and sniffed as it arrives,
        then published to the bucket."""
        return IncomingFile(self._spool, head_size)

    def publish(self, org, path, source, sha256):
        """Upload the whole local file `source` (hex `sha256`) to the object of `path`, then index it, unless the org
        has media of the same MediaIdentity: then upload nothing and answer that media's path (its creation time, the
        age media garbage collection reads, starts again). The path that holds the bytes; None, storing nothing, if
        `path` is taken by other bytes."""
        size = os.stat(source).st_size
        identity = MediaIdentity.of(path, size, sha256)
        with self._database.transaction() as connection:
            same = self._same_media(connection, org, identity)
            if same is not None:
                return same
            path = self._collected_path(connection, org, identity) or path
            if self._path_taken(connection, org, path):
                return None
        key = self.media_key(org, path)
        with open(source, "rb") as file:
            # Never over another object: the key may belong to a concurrent publish of the same path.
            if not self._objects.put_file_if_absent(key, file, size):
                return None
        try:
            with self._database.transaction() as connection:
                published, indexed = self.register(connection, org, path, key, size, sha256)
        except BaseException:
            # The request fails and no client learns this path: its object would be an orphan.
            self._remove_object(key)
            raise
        if not indexed:
            self._remove_object(key)
        return published

    def register(self, connection, org, path, key, size, sha256):
        """Index the whole object `key` at `path` (or at the path the org's media of the same MediaIdentity had when it
        was deleted), inside the caller's transaction on `connection`, unless the org has media of that identity.
        Registered(path that holds the bytes, or None when `path` is taken by other bytes; whether `key` is indexed
        there: if not, the caller's object is not needed).

        The unique index on the identity makes a concurrent identical insert wait for this one and then conflict."""
        identity = MediaIdentity.of(path, size, sha256)
        collected = self._collected_path(connection, org, identity)
        path = collected or path
        inserted = connection.execute(
            "INSERT INTO media (org, path, object_key, size, sha256, created_at, identity) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
            (org, path, key, size, sha256, self._clock(), identity and identity.folder_name)).fetchone()
        if inserted is None:
            return Registered(self._same_media(connection, org, identity), False)
        if collected:
            connection.execute("DELETE FROM collected_media WHERE org = %s AND identity = %s AND sha256 = %s",
                               (org, identity.folder_name, identity.sha256))
        return Registered(path, True)

    @staticmethod
    def _collected_path(connection, org, identity):
        """The path the org's media of `identity` had when it was deleted, unless other media has it now; else None."""
        if identity is None:
            return None
        row = connection.execute(
            "SELECT path FROM collected_media AS collected WHERE org = %s AND identity = %s AND sha256 = %s "
            "AND size = %s AND NOT EXISTS (SELECT 1 FROM media WHERE media.org = collected.org "
            "AND media.path = collected.path)", (org, identity.folder_name, identity.sha256, identity.size)).fetchone()
        return row and row[0]

    def _same_media(self, connection, org, identity):
        """The path of the org's media of `identity`, its age started again; None when it has none (or no identity)."""
        if identity is None:
            return None
        row = connection.execute(
            "UPDATE media SET created_at = %s WHERE org = %s AND identity = %s AND sha256 = %s AND size = %s "
            "RETURNING path", (self._clock(), org, identity.folder_name, identity.sha256, identity.size)).fetchone()
        return row and row[0]

    @staticmethod
    def _path_taken(connection, org, path):
        return connection.execute("SELECT 1 FROM media WHERE org = %s AND path = %s", (org, path)).fetchone() \
            is not None

    def unpublish(self, org, path):
        """Take back a media object whose publishing request failed; best effort, since the engines may be failing."""
        with contextlib.suppress(StorageFailed):
            self.delete(org, path)

    def remove_all(self):
        """Every org's media rows and objects (test mode)."""
        with self._database.transaction() as connection:
            connection.execute("DELETE FROM media")
            connection.execute("DELETE FROM collected_media")
        for key in list(self._objects.keys(MEDIA_FOLDER)):
            self._objects.delete(key)

    def put_all(self, media):
        """Put each StagedMedia's file at its path's object (test mode's replace_state, after remove_all), PUT_THREADS
        at a time; the rows that index_all then writes."""
        def put(item):
            key = self.media_key(item.org, item.path)
            with open(item.file, "rb") as file:
                self._objects.put_file(key, file, item.size)
            return key

        media = list(media)
        with concurrent.futures.ThreadPoolExecutor(PUT_THREADS) as pool:
            keys = list(pool.map(put, media))
        rows, identities, now = [], set(), self._clock()
        for item, key in zip(media, keys):
            identity = MediaIdentity.of(item.path, item.size, item.sha256)
            # Of several media with one identity, the first keeps it: the others are never answered by deduplication,
            # like copies stored before it existed.
            if identity is not None and (item.org, identity) in identities:
                identity = None
            identities.add((item.org, identity))
            rows.append((item.org, item.path, key, item.size, item.sha256, now, identity and identity.folder_name))
        return rows

    @staticmethod
    def index_all(connection, rows):
        """Index the media that put_all stored, created now, inside the caller's transaction on `connection`."""
        with connection.cursor() as cursor:
            cursor.executemany("INSERT INTO media (org, path, object_key, size, sha256, created_at, identity) "
                               "VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)

    def import_file(self, org, path, file_path, etag):
        """Copy a media file of a file data directory to `path` (`wis migrate`): "copied", or "unchanged" when the
        path already holds the same bytes under the same ETag. The object is read back and checked against the file's
        SHA-256 before it is indexed; its creation time is the file's modification time, so media garbage keeps its
        age, and it is served with `etag`, the ETag the file backend served, so cached copies stay valid."""
        size, sha256 = file_sha256(file_path)
        with self._database.transaction() as connection:
            row = connection.execute("SELECT sha256, etag FROM media WHERE org = %s AND path = %s",
                                     (org, path)).fetchone()
        if row is not None and row[0] == sha256:
            if row[1] == etag:
                return "unchanged"
            # Copied by a version that kept no ETag: the bytes are there, only the ETag is added.
            with self._database.transaction() as connection:
                connection.execute("UPDATE media SET etag = %s WHERE org = %s AND path = %s", (etag, org, path))
            return "copied"
        key = self.media_key(org, path)
        with open(file_path, "rb") as file:
            self._objects.put_file(key, file, size)
        stored_size, stored_sha256 = self._object_sha256(key)
        if (stored_size, stored_sha256) != (size, sha256):
            raise ObjectStoreUnavailable(
                f"the object store returned other bytes for {key} than {file_path} holds ({stored_size} bytes with "
                f"SHA-256 {stored_sha256}, not {size} bytes with {sha256}); nothing was indexed, run the migration again")
        identity = MediaIdentity.of(path, size, sha256)
        with self._database.transaction() as connection:
            if identity is not None and connection.execute(
                    "SELECT 1 FROM media WHERE org = %s AND identity = %s AND sha256 = %s AND path <> %s",
                    (org, identity.folder_name, sha256, path)).fetchone():
                identity = None  # a copy of media the org has at another path (uploaded before deduplication)
            connection.execute(
                "INSERT INTO media (org, path, object_key, size, sha256, created_at, identity, etag) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (org, path) DO UPDATE SET object_key = EXCLUDED.object_key, size = EXCLUDED.size, "
                "sha256 = EXCLUDED.sha256, created_at = EXCLUDED.created_at, identity = EXCLUDED.identity, "
                "etag = EXCLUDED.etag",
                (org, path, key, size, sha256, os.stat(file_path).st_mtime, identity and identity.folder_name, etag))
        return "copied"

    def _object_sha256(self, key):
        digest = hashlib.sha256()
        size = 0
        blocks = self._objects.read(key)
        try:
            for block in blocks:
                digest.update(block)
                size += len(block)
        finally:
            blocks.close()
        return size, digest.hexdigest()

    def _remove_object(self, key):
        with contextlib.suppress(StorageFailed):
            self._objects.delete(key)
