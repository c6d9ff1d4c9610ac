"""The shared backend's change events (CONTRACT 14): table `events`, one row per history entry, and `event_counters`,
each org's latest seq (kept when every event is pruned, so the latest seq is never forgotten).

The document store records a change's event last in the change's transaction (`record`): the org's counter row is
taken by an upsert that adds one, so its row lock is held from there to the commit only. A writer of the same org on
any node waits for that commit, then takes the next seq: seqs follow commit order without a gap, and a change that
rolls back takes its event and its seq with it. The same statement notifies the deployment's channel, which
PostgreSQL delivers at the commit, and only if it commits.

A watcher LISTENs on a connection of its own and sleeps in select() until a notification comes. While it cannot
listen (the database is down, or has no connection slot left) it tries again every RELISTEN_SECONDS, and meanwhile
polls the counters through the pool every POLL_SECONDS: no commit goes unnoticed for longer, and once listening again
it reports that commits may have been missed, so a stream resumes after an outage.
"""
import time

import orjson
import psycopg
from psycopg import sql

from service.errors import DatabaseUnavailable
from service.storage.contract.events import DEFAULT_EVENTS_RETENTION, Event, EventBounds
from service.storage.shared.database import utc_text

# The channel of a deployment: its schema's, so deployments in schemas of one database do not wake each other (a
# channel's name is at most 63 bytes; a schema's name may be as long, hence the hash).
CHANNEL = "'wis_events_' || md5(current_schema())"
# Taken by `prune` when it can: one pruner at a time, the other workers and nodes skip their turn.
PRUNE_LOCK = 0x5749_5303
# While a watcher cannot listen: how often it tries to, and how often it polls the counters meanwhile.
RELISTEN_SECONDS = 1.0
POLL_SECONDS = 0.5

COLUMNS = "seq, timestamp, kind, id, revision, change, name, author, comment"
# The columns that hold what a client wrote, as JSON strings (PostgreSQL text cannot hold a NUL).
FREE_TEXTS = ("name", "author", "comment")
RECORD = f"""
    WITH counted AS (
        INSERT INTO event_counters AS counter (org, last) VALUES (%(org)s, 1)
        ON CONFLICT (org) DO UPDATE SET last = counter.last + 1
        RETURNING last
    ), logged AS (
        INSERT INTO events (org, {COLUMNS})
        SELECT %(org)s, last, %(timestamp)s, %(kind)s, %(id)s, %(revision)s, %(change)s, %(name)s, %(author)s,
               %(comment)s
        FROM counted
        RETURNING seq
    )
    SELECT seq, pg_notify({CHANNEL}, '') FROM logged
"""
BOUNDS = """
    SELECT (SELECT min(seq) FROM events WHERE org = %(org)s), (SELECT last FROM event_counters WHERE org = %(org)s)
"""
# Every event up to the newest old one of each org: what is kept stays a run of seqs without a hole, even where two
# writes of an org committed in the other order than they began (their timestamps, taken at the start, cross). An
# event a webhook subscription may still send (CONTRACT 15: a pending delivery, or one after an enabled subscription's
# cursor) is kept, and so is every later one.
PRUNE = f"""
    WITH needed AS (
        SELECT org, min(seq) AS seq FROM (
            SELECT org, logged_through + 1 AS seq FROM webhook_subscriptions WHERE disabled_at IS NULL
            UNION ALL
            SELECT org, seq FROM webhook_deliveries WHERE state = 'PENDING'
        ) AS wanted GROUP BY org
    ), old AS (
        SELECT events.org, max(seq) AS through FROM events
        WHERE timestamp < {utc_text("clock_timestamp() - make_interval(secs => %(retention)s)")}
        GROUP BY events.org
    )
    DELETE FROM events USING old LEFT JOIN needed ON needed.org = old.org
    WHERE events.org = old.org AND events.seq <= old.through AND (needed.seq IS NULL OR events.seq < needed.seq)
"""
# What changes with every commit of an event and with every reset: a watcher that cannot listen compares it.
COUNTERS = "SELECT count(*), coalesce(sum(last), 0) FROM event_counters"


class SharedEventStore:
    """Every org's events in the `events` table of `database` (service.storage.shared.database.Database):
    service.storage.contract.events.EventStore."""

    def __init__(self, database, retention_seconds=DEFAULT_EVENTS_RETENTION):
        self.database = database
        self.retention_seconds = retention_seconds

    @staticmethod
    def record(connection, org, new_event):
        """Add the event of a change, in the change's transaction on `connection`, as its last statement; its seq."""
        texts = {field: _json_text(getattr(new_event, field)) for field in FREE_TEXTS}
        return connection.execute(RECORD, {"org": org, **new_event._asdict(), **texts}).fetchone()[0]

    def read(self, org, after, first, wanted=None):
        """Up to `first` events with seq > `after`, oldest first, those of `wanted` (kind, change) pairs."""
        query = f"SELECT {COLUMNS} FROM events WHERE org = %(org)s AND seq > %(after)s"
        if wanted is not None:
            query += " AND (kind, change) IN (SELECT * FROM unnest(%(kinds)s::text[], %(changes)s::text[]))"
        pairs = sorted(wanted or ())
        with self.database.transaction() as connection:
            rows = connection.execute(query + " ORDER BY seq LIMIT %(first)s", {
                "org": org, "after": after, "first": max(first, 0),
                "kinds": [kind for kind, _ in pairs], "changes": [change for _, change in pairs]}).fetchall()
        return [event_of_row(*row) for row in rows]

    def bounds(self, org):
        """(the oldest seq kept, the latest): latest + 1 when none is kept, 0 before any event."""
        with self.database.transaction() as connection:
            oldest, latest = connection.execute(BOUNDS, {"org": org}).fetchone()
        latest = latest or 0
        return EventBounds(latest + 1 if oldest is None else oldest, latest)

    def prune(self):
        """Remove the events older than the retention, by the database's clock, from every org; how many. Skipped
        (0) while another worker or node prunes."""
        if not self.retention_seconds:
            return 0
        with self.database.transaction() as connection:
            if not connection.execute("SELECT pg_try_advisory_xact_lock(%s)", (PRUNE_LOCK,)).fetchone()[0]:
                return 0
            return connection.execute(PRUNE, {"retention": self.retention_seconds}).rowcount

    def watcher(self):
        return ListeningWatcher(self.database)

    @staticmethod
    def remove_all(connection):
        """Remove every org's events and counters, in the caller's transaction (test mode: seqs start again at 1),
        and wake the watchers at its commit."""
        connection.execute("DELETE FROM events")
        connection.execute("DELETE FROM event_counters")
        connection.execute(f"SELECT pg_notify({CHANNEL}, '')")


class ListeningWatcher:
    """Waits for commits of every node (service.storage.contract.events.CommitWatcher): a notification on the
    deployment's channel, heard on a connection of its own; the counters polled while it cannot listen."""

    def __init__(self, database):
        self._database = database
        self._connection = None
        self._next_listen = 0.0
        # The counters as last polled; None until a poll succeeds (then unknown changes to known: True).
        self._counters = None
        if not self._listen():
            self._counters_changed()  # what later polls compare: a commit from now on is noticed

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            if self._connection is None and time.monotonic() >= self._next_listen and self._listen():
                return True  # commits made while it was not listening went unheard
            if self._connection is not None:
                try:
                    return self._notified(deadline)
                except psycopg.Error:
                    self._drop()
                    continue
            if self._counters_changed():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, POLL_SECONDS))

    def close(self):
        self._drop()

    def _listen(self):
        """Open the listening connection; True when it listens."""
        self._next_listen = time.monotonic() + RELISTEN_SECONDS
        connection = None
        try:
            connection = self._database.listening_connection()
            channel = connection.execute(f"SELECT {CHANNEL}").fetchone()[0]
            connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except psycopg.Error:
            if connection is not None:
                connection.close()
            return False
        self._connection = connection
        return True

    def _notified(self, deadline):
        """True once a notification comes before `deadline` (those that came with it are taken too), else False."""
        heard = list(self._connection.notifies(timeout=max(0.0, deadline - time.monotonic()), stop_after=1))
        if heard:
            list(self._connection.notifies(timeout=0))  # one answer for every commit already told
        return bool(heard)

    def _drop(self):
        """Close the listening connection (lost, or the watcher is done); the next wait tries to listen at once."""
        if self._connection is not None:
            self._connection.close()
        self._connection = None
        self._next_listen = time.monotonic()

    def _counters_changed(self):
        """Poll the counters through the pool: True when they differ from the last poll that succeeded (or none had);
        False while the database does not answer."""
        try:
            with self._database.transaction() as connection:
                counters = connection.execute(COUNTERS).fetchone()
        except DatabaseUnavailable:
            return False
        changed, self._counters = counters != self._counters, counters
        return changed


def _json_text(value):
    return None if value is None else orjson.dumps(value).decode()


def event_of_row(seq, timestamp, kind, identifier, revision, change, *texts):
    """The Event of a row of COLUMNS."""
    return Event(seq, timestamp, kind, identifier, revision, change,
                 *(None if text is None else orjson.loads(text) for text in texts))
