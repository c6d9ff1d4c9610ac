"""PostgreSQL for the shared backend: a connection pool per worker process, short transactions, and the schema.

Connections are taken only for short transactions, never while a request body arrives. The pool is opened lazily in
the process that uses it: gunicorn forks workers after the app is built, and a connection must not cross a fork.
When the database cannot be reached, every operation raises DatabaseUnavailable (503); the pool reconnects by itself
once it is back.
"""
import contextlib
import os
import threading

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from service.errors import ConfigurationError, DatabaseUnavailable

# Connections per worker process. gunicorn's threads wait for one here rather than opening more: nodes x workers x
# this must stay under the server's max_connections (100 by default).
POOL_SIZE = 4
# How long a request waits for a pooled connection before it is a 503.
POOL_WAIT_SECONDS = 5
CONNECT_TIMEOUT_SECONDS = 5
# Any one statement longer than this is a database in trouble; the request answers 503 instead of hanging.
STATEMENT_TIMEOUT_MS = 30_000

# Changes of the schema, in order; `upgrade` applies those not yet applied. Never edit one that has shipped.
# Ids sort in byte order (COLLATE "C"), as file names do on the file backend.
MIGRATIONS = [
    """
    CREATE TABLE documents (
        org text COLLATE "C" NOT NULL,
        kind text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        body text NOT NULL,
        created_at text NOT NULL,
        updated_at text NOT NULL,
        revision bigint NOT NULL,
        PRIMARY KEY (org, kind, id)
    );
    CREATE TABLE media (
        org text COLLATE "C" NOT NULL,
        path text COLLATE "C" NOT NULL,
        object_key text NOT NULL,
        size bigint NOT NULL,
        sha256 text NOT NULL,
        created_at double precision NOT NULL,
        PRIMARY KEY (org, path)
    );
    CREATE TABLE streams (
        org text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        meta text NOT NULL,
        protocol text NOT NULL,
        state text NOT NULL,
        touched_at double precision NOT NULL,
        merged integer NOT NULL DEFAULT 0,
        length bigint NOT NULL DEFAULT 0,
        hash_state bytea NOT NULL,
        head bytea NOT NULL DEFAULT '',
        upload_id text,
        parts text NOT NULL DEFAULT '[]',
        tail text NOT NULL DEFAULT '[]',
        PRIMARY KEY (org, id)
    );
    CREATE INDEX streams_touched ON streams (touched_at);
    CREATE TABLE stream_chunks (
        org text COLLATE "C" NOT NULL,
        stream_id text COLLATE "C" NOT NULL,
        index integer NOT NULL,
        size bigint NOT NULL,
        object_key text,
        state_after bytea,
        PRIMARY KEY (org, stream_id, index)
    );
    """,
    # The sweep's count of the open streams, read by every scrape of /metrics at the cost of one row.
    """
    CREATE TABLE open_streams_count (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        streams bigint NOT NULL
    )
    """,
    # Test mode (CONTRACT 12): how many names the server made up since the last reset, when a test seed makes them.
    """
    CREATE TABLE test_counters (
        name text COLLATE "C" PRIMARY KEY,
        value bigint NOT NULL
    );
    """,
    # Secrets made once for every node: the key that signs the preview pages' session cookies (CONTRACT 11).
    """
    CREATE TABLE secrets (
        name text COLLATE "C" PRIMARY KEY,
        value text NOT NULL
    );
    """,
    # The history of every document (CONTRACT 10): one row per revision, written in the transaction that writes the
    # document; `body` is NULL for a deletion. Each document stored so far starts its history at its revision.
    """
    CREATE TABLE revisions (
        org text COLLATE "C" NOT NULL,
        kind text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        revision bigint NOT NULL,
        change text NOT NULL,
        saved_at text NOT NULL,
        created_at text NOT NULL,
        body text,
        PRIMARY KEY (org, kind, id, revision)
    );
    INSERT INTO revisions (org, kind, id, revision, change, saved_at, created_at, body)
    SELECT org, kind, id, revision, CASE WHEN revision = 1 THEN 'CREATED' ELSE 'UPDATED' END, updated_at, created_at,
           body
    FROM documents;
    """,
    # Media deduplication (CONTRACT 10): `<images|videos>/<cleaned name>` of each media, unique with its org and
    # SHA-256 (service.storage.contract.MediaIdentity). Existing media get it too, the oldest of each identity only:
    # the copies that re-uploads made before this version stay as they are and are never answered.
    r"""
    ALTER TABLE media ADD COLUMN identity text COLLATE "C";
    UPDATE media SET identity = oldest.identity FROM (
        SELECT DISTINCT ON (org, identity, sha256) org, path, identity FROM (
            SELECT org, path, sha256, created_at,
                   regexp_replace(path, '^/api/v1/(images|videos)/[^-/]+-(.+)$', '\1/\2') AS identity
            FROM media WHERE path ~ '^/api/v1/(images|videos)/[^-/]+-.+$') AS named
        ORDER BY org, identity, sha256, created_at, path) AS oldest
    WHERE media.org = oldest.org AND media.path = oldest.path;
    CREATE UNIQUE INDEX media_identity ON media (org, identity, sha256);
    """,
]
# Taken by `upgrade` for its transaction, so several nodes running it at once apply each migration once.
UPGRADE_LOCK = 0x5749_5301


def _is_unavailable(error):
    """True for errors that mean the database is out of reach (not a mistake in what was asked)."""
    return isinstance(error, (psycopg.OperationalError, PoolTimeout)) and not isinstance(
        error, psycopg.errors.QueryCanceled)


def _with_statement_timeout(url):
    """`url` with a statement timeout added to the libpq `options` it may already carry (a search_path, say)."""
    options = conninfo_to_dict(url).get("options") or ""
    return make_conninfo(url, options=f"{options} -c statement_timeout={STATEMENT_TIMEOUT_MS}".strip())


class Database:
    """The service's PostgreSQL database at `url` (a libpq URL or conninfo string)."""

    def __init__(self, url, pool_size=POOL_SIZE):
        self.url = url
        self._pool_size = pool_size
        self._pool = None
        self._pool_pid = None
        self._opening = threading.Lock()

    def _connection_pool(self):
        # A pool made before a fork belongs to the parent: each worker opens its own on first use.
        if self._pool is None or self._pool_pid != os.getpid():
            with self._opening:
                if self._pool is None or self._pool_pid != os.getpid():
                    self._pool = ConnectionPool(
                        _with_statement_timeout(self.url), min_size=1, max_size=self._pool_size, timeout=POOL_WAIT_SECONDS, open=False,
                        # A connection that died with the server is noticed when it is taken, not by a request.
                        check=ConnectionPool.check_connection,
                        kwargs={"connect_timeout": CONNECT_TIMEOUT_SECONDS, "autocommit": False})
                    self._pool.open(wait=False)
                    self._pool_pid = os.getpid()
        return self._pool

    @contextlib.contextmanager
    def transaction(self):
        """A connection inside one transaction: committed when the block ends, rolled back if it raises. An
        unreachable database is DatabaseUnavailable."""
        try:
            with self._connection_pool().connection() as connection:
                with connection.transaction():
                    yield connection
        except Exception as error:
            if _is_unavailable(error):
                raise DatabaseUnavailable() from error
            raise

    def ping(self):
        """Raise DatabaseUnavailable unless the database answers now: on a connection of its own, so a readiness probe
        gets its answer within CONNECT_TIMEOUT_SECONDS, not after the pool's POOL_WAIT_SECONDS."""
        with self._one_off_transaction() as connection:
            connection.execute("SELECT 1")

    def close(self):
        if self._pool is not None and self._pool_pid == os.getpid():
            self._pool.close()
        self._pool = None

    # -- schema ------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _one_off_transaction(self):
        """A connection of its own, outside the pool, inside one transaction: for the schema check at start-up and
        `wis db upgrade`. They run once, in gunicorn's master among others, which must not keep a pool (and its
        threads) across the fork; and a database out of reach must be said at once, with libpq's reason, not after
        the pool's POOL_WAIT_SECONDS of retries."""
        try:
            connection = psycopg.connect(_with_statement_timeout(self.url), connect_timeout=CONNECT_TIMEOUT_SECONDS)
        except psycopg.ProgrammingError as error:  # not a URL or conninfo string libpq can read
            raise ConfigurationError(f"WIS_DATABASE_URL (or DATABASE_URL) is not a PostgreSQL URL: {error}") from None
        except psycopg.OperationalError as error:
            reason = " ".join(str(error).split())
            raise DatabaseUnavailable(
                f"cannot connect to the database (PostgreSQL) at WIS_DATABASE_URL (or DATABASE_URL): {reason}") from error
        with connection, connection.transaction():
            yield connection

    def schema_version(self):
        """How many migrations the database has; 0 for an empty one."""
        with self._one_off_transaction() as connection:
            exists = connection.execute("SELECT to_regclass('wis_schema') IS NOT NULL").fetchone()[0]
            if not exists:
                return 0
            return connection.execute("SELECT version FROM wis_schema").fetchone()[0]

    def upgrade(self):
        """Apply the migrations the database lacks; return (version before, version after). Safe to run from several
        nodes at once: a transaction-scoped advisory lock lets one apply them while the others wait, then find
        nothing left to do."""
        with self._one_off_transaction() as connection:
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (UPGRADE_LOCK,))
            connection.execute("CREATE TABLE IF NOT EXISTS wis_schema (version integer NOT NULL)")
            row = connection.execute("SELECT version FROM wis_schema").fetchone()
            if row is None:
                connection.execute("INSERT INTO wis_schema VALUES (0)")
            before = row[0] if row else 0
            for migration in MIGRATIONS[before:]:
                connection.execute(migration)
            connection.execute("UPDATE wis_schema SET version = %s", (len(MIGRATIONS),))
        return before, len(MIGRATIONS)

    def check_schema(self):
        """ConfigurationError unless the schema is the one this code needs (start-up check)."""
        version = self.schema_version()
        if version < len(MIGRATIONS):
            raise ConfigurationError(
                f"the database at WIS_DATABASE_URL has schema version {version}, this service needs "
                f"{len(MIGRATIONS)}: run `wis db upgrade` first (a Procfile `release: wis db upgrade` line does it on "
                "every deploy)")
        if version > len(MIGRATIONS):
            raise ConfigurationError(
                f"the database has schema version {version}, newer than this service knows ({len(MIGRATIONS)}): "
                "deploy the newer service")
