"""PostgreSQL for the shared backend: a connection pool per worker process, short transactions, and the schema.

Connections are taken only for short transactions, never while a request body arrives. The pool is opened lazily in
the process that uses it: gunicorn forks workers after the app is built, and a connection must not cross a fork.
When the database cannot be reached, every operation raises DatabaseUnavailable (503): within a pool wait for the
requests that find out, at once for those that come while the database is known to be down (circuit.py), and the
process serves again within a second or so of the database's return, whatever the length of the outage.
"""
import contextlib
import logging
import os
import socket
import threading
import time

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from service.errors import ConfigurationError, DatabaseUnavailable
from service.storage.shared.circuit import Circuit
from service.storage.shared.schema import MIGRATIONS, UPGRADE_LOCK

log = logging.getLogger(__name__)

# Connections per worker process (WIS_DB_POOL_SIZE). gunicorn's threads wait for one here rather than opening more:
# nodes x workers x this must stay under the server's max_connections (100 by default).
POOL_SIZE = 4
# How long a request waits for a free pooled connection before it is a 503 (WIS_DB_POOL_WAIT_SECONDS). While the
# database is known to be down, nobody waits: see circuit.py.
POOL_WAIT_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 5
# A request waiting for a connection looks at the circuit this often, so an outage found meanwhile refuses it at once.
WAIT_SLICE_SECONDS = 0.2
# /readyz takes an idle pooled connection for a round trip if one comes within this long; none means every connection
# is serving requests, which is busy, not down.
READY_WAIT_SECONDS = 0.1
# Any one statement longer than this is a database in trouble; the request answers 503 instead of hanging.
STATEMENT_TIMEOUT_MS = 30_000
# What PostgreSQL says when max_connections is reached (SQLSTATE 53300, which libpq does not pass on at connect time):
# the server is up and the pool's connections still serve, so this is not an outage.
_SERVER_FULL = ("too many clients", "remaining connection slots are reserved")
# TCP keepalives of a connection that waits for notifications: a database host that vanished without closing the
# connection (a network cut, a power loss) is noticed within about 25 s, and the waiter connects again.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}


def utc_text(instant="clock_timestamp()"):
    """SQL for a time of the database's clock as text, in the format of service.storage.contract.utc_timestamp
    (2024-05-01T12:00:00.123Z): one clock for every node. Text in this format sorts as the times do."""
    return f"""to_char(({instant}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""


def _is_unavailable(error):
    """True for errors that mean the database is out of reach (not a mistake in what was asked)."""
    return isinstance(error, (psycopg.OperationalError, PoolTimeout)) and not isinstance(
        error, psycopg.errors.QueryCanceled)


def _is_down(error):
    """True for a connection error that means the server is gone, not merely full."""
    return isinstance(error, psycopg.OperationalError) and not any(words in str(error) for words in _SERVER_FULL)


def _with_statement_timeout(url):
    """`url` with a statement timeout added to the libpq `options` it may already carry (a search_path, say)."""
    options = conninfo_to_dict(url).get("options") or ""
    return make_conninfo(url, options=f"{options} -c statement_timeout={STATEMENT_TIMEOUT_MS}".strip())


def application_name(node_name=None):
    """How this process appears in pg_stat_activity: `wis <node> <pid>`, the node being WIS_NODE_NAME or the host
    name (PostgreSQL keeps 63 bytes of it)."""
    return f"wis {node_name or socket.gethostname()} {os.getpid()}"[:63]


def _reporting_connection_class(on_connect_failure):
    """psycopg's Connection, but a failed connect (the pool's, in its own thread) is reported to the process's circuit
    before it is raised: the pool retries quietly, and the circuit must hear of it at once."""
    class ReportingConnection(psycopg.Connection):
        @classmethod
        def connect(cls, *args, **kwargs):
            try:
                return super().connect(*args, **kwargs)
            except psycopg.OperationalError as error:
                on_connect_failure(error)
                raise
    return ReportingConnection


class Database:
    """The service's PostgreSQL database at `url` (a libpq URL or conninfo string), with a connection pool of
    `pool_size` per process and a circuit that knows when the database is down (circuit.py)."""

    def __init__(self, url, pool_size=POOL_SIZE, pool_wait_seconds=POOL_WAIT_SECONDS, node_name=None,
                 variable="WIS_DATABASE_URL"):
        self.url = url
        self.pool_size = pool_size
        self.pool_wait_seconds = pool_wait_seconds
        self.node_name = node_name
        # The environment variable the URL came from, for messages (DATABASE_URL on Procfile platforms).
        self.variable = variable
        self._pool = None
        self._pid = None
        self._circuit = None
        self._opening = threading.Lock()

    def _for_this_process(self):
        """The pool and circuit of this process. gunicorn forks workers after the app is built, and neither a connection
        nor a thread crosses a fork: each worker makes its own on first use."""
        if self._pid != os.getpid():
            with self._opening:
                if self._pid != os.getpid():
                    self._pool = None
                    self._circuit = Circuit(self._probe, self._went_down, self._came_back)
                    self._pid = os.getpid()
        return self._circuit

    def _connection_pool(self):
        circuit = self._for_this_process()
        pool = self._pool
        if pool is None:
            with self._opening:
                if self._pool is None:
                    self._pool = ConnectionPool(
                        _with_statement_timeout(self.url), min_size=1, max_size=self.pool_size,
                        timeout=self.pool_wait_seconds, open=False, name=f"wis-{os.getpid()}",
                        connection_class=_reporting_connection_class(self._connect_failed),
                        # A connection that died with the server is noticed when it is taken, not by a request.
                        check=self._check_connection,
                        kwargs={"connect_timeout": CONNECT_TIMEOUT_SECONDS, "autocommit": False,
                                "application_name": application_name(self.node_name)})
                    self._pool.open(wait=False)
                pool = self._pool
        return pool, circuit

    def _check_connection(self, connection):
        try:
            ConnectionPool.check_connection(connection)
        except psycopg.OperationalError:
            self._circuit.suspect()
            raise

    def _connect_failed(self, error):
        if _is_down(error):
            self._circuit.suspect()

    def _probe(self):
        """Raise when the database does not answer. A server that answers it is full (max_connections) is up: the
        pool's connections still serve, and dropping them would turn a full server into an outage."""
        try:
            psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_SECONDS, application_name=application_name(
                self.node_name)).close()
        except psycopg.OperationalError as error:
            if _is_down(error):
                raise

    def _went_down(self, _cause):
        # The pool would go on retrying with a backoff that grows to minutes, and logging each attempt: drop it, and
        # let the circuit find out when the database is back.
        with self._opening:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=1)

    def _came_back(self):
        self._connection_pool()  # connecting starts now, before the first request asks

    @staticmethod
    def _unavailable(kind):
        error = DatabaseUnavailable()
        error.kind = kind
        return error

    def _take_connection(self):
        """A pooled connection, waiting at most pool_wait_seconds for one; DatabaseUnavailable at once while the
        database is known to be down."""
        deadline = time.monotonic() + self.pool_wait_seconds
        while True:
            pool, circuit = self._connection_pool()
            if circuit.cause is not None:
                raise self._unavailable("down")
            try:
                return pool, pool.getconn(timeout=max(0.01, min(WAIT_SLICE_SECONDS, deadline - time.monotonic())))
            except PoolClosed:
                continue  # dropped by the circuit meanwhile: the next turn refuses, naming the cause
            except PoolTimeout:
                if time.monotonic() >= deadline:
                    raise self._unavailable("busy") from None

    @contextlib.contextmanager
    def transaction(self):
        """A connection inside one transaction: committed when the block ends, rolled back if it raises. An
        unreachable database is DatabaseUnavailable."""
        pool, connection = self._take_connection()
        try:
            with connection.transaction():
                yield connection
        except Exception as error:
            if _is_unavailable(error):
                # Logged once here; an outage is logged once by the circuit, whatever the requests it refuses.
                log.warning("a database call failed: %s", " ".join(str(error).split()))
                self._circuit.suspect()
                raise self._unavailable("lost") from error
            raise
        finally:
            pool.putconn(connection)

    def problem(self):
        """None while this process can serve from the database, else why not. Asks the process's own pool (a round
        trip on an idle pooled connection), never opens a connection: a full max_connections or a busy pool is not
        an outage."""
        pool, circuit = self._connection_pool()
        if circuit.cause is not None:
            return circuit.cause
        try:
            connection = pool.getconn(timeout=READY_WAIT_SECONDS)
        except PoolTimeout:
            # Every connection is serving requests (busy, not down), or none could be made: then the circuit is
            # checking, and its verdict comes within a connection attempt.
            circuit.settle(CONNECT_TIMEOUT_SECONDS)
            return circuit.cause
        except PoolClosed:
            return circuit.cause
        try:
            connection.execute("SELECT 1")
            connection.rollback()
            return None
        except psycopg.OperationalError as error:
            circuit.suspect()
            return " ".join(str(error).split())
        finally:
            pool.putconn(connection)

    def stats(self):
        """This process's pool and circuit: pool_size, pool_available, requests_waiting (psycopg_pool's names),
        down (0 or 1) and outages (how many this process has seen)."""
        circuit = self._for_this_process()
        pool = self._pool
        stats = pool.get_stats() if pool is not None else {}
        return {"pool_size": stats.get("pool_size", 0), "pool_available": stats.get("pool_available", 0),
                "requests_waiting": stats.get("requests_waiting", 0), "down": int(circuit.cause is not None),
                "outages": circuit.outages}

    def close(self):
        if self._pid == os.getpid():
            self._circuit.close()
            if self._pool is not None:
                self._pool.close()
        self._pool = None
        self._pid = None

    def listening_connection(self):
        """A connection of its own, outside the pool, in autocommit, for LISTEN (service.storage.shared.events): it
        waits for notifications as long as its watcher lives, which would take a pooled connection from requests.
        psycopg.OperationalError when it cannot be made."""
        return psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS,
                               application_name=application_name(self.node_name), **KEEPALIVES)

    # -- schema ------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _one_off_transaction(self):
        """A connection of its own, outside the pool, inside one transaction: for the schema check at start-up and
        `wis db upgrade`. They run once, in gunicorn's master among others, which must not keep a pool (and its
        threads) across the fork; and a database out of reach must be said at once, with libpq's reason."""
        try:
            connection = psycopg.connect(_with_statement_timeout(self.url), connect_timeout=CONNECT_TIMEOUT_SECONDS,
                                         application_name=application_name(self.node_name))
        except psycopg.ProgrammingError as error:  # not a URL or conninfo string libpq can read
            raise ConfigurationError(f"{self.variable} is not a PostgreSQL URL: {error}") from None
        except psycopg.OperationalError as error:
            reason = " ".join(str(error).split())
            raise DatabaseUnavailable(
                f"cannot connect to the database (PostgreSQL) at {self.variable}: {reason}") from error
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
                f"the database at {self.variable} has schema version {version}, this service needs "
                f"{len(MIGRATIONS)}: run `wis db upgrade` first (a Procfile `release: wis db upgrade` line does it on "
                "every deploy)")
        if version > len(MIGRATIONS):
            raise ConfigurationError(
                f"the database has schema version {version}, newer than this service knows ({len(MIGRATIONS)}): "
                "deploy the newer service")
