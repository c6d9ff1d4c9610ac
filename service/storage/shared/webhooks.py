"""The shared backend's webhooks (CONTRACT 15): tables `webhook_subscriptions` (settings, the cursor `logged_through`
over the org's events, the lease of the claim that holds it) and `webhook_deliveries` (the log).

A claim is one short transaction: the subscriptions with work due and no live lease are locked with FOR UPDATE SKIP
LOCKED (another node's claim skips them instead of waiting), the events after each one's cursor are logged as
PENDING deliveries, and the lowest-seq due delivery is taken under a lease: `lease_until` (the database's clock) and a
token. No transaction is open during the attempt; `finish` records it only while the token is still the row's. A node
that dies mid-attempt leaves the lease to pass, and then any node claims the subscription again.

Every time is the database's clock (seconds since the epoch), so nodes with skewed clocks agree on what is due.
"""
import secrets

import orjson

from service.interface.kinds import SINGULAR
from service.storage.contract.webhooks import (
    Claim, Delivery, DeliveryState, Subscription, iso_of)
from service.storage.shared.database import utc_text
from service.storage.shared.events import CHANNEL, COLUMNS as EVENT_COLUMNS, event_of_row

NOW = "extract(epoch from clock_timestamp())"
# The first key of the advisory lock that serializes the subscribes of an org (the second: the org's hash), so that two
# nodes cannot both make the last subscription the org may have.
SUBSCRIBE_LOCK = 0x5749_5304
# Events logged for one subscription in one claim at most; the next claim logs the rest.
LOG_PAGE = 1000
SUBSCRIPTION_COLUMNS = ("org, id, url, headers, types, fragment, secret, old_secret, old_secret_until, created_at, "
                        "disabled_at, disabled_reason, failing_since")
DELIVERY_COLUMNS = "seq, type, state, attempts, last_status, last_error, last_attempt_at, next_attempt_at, redeliveries"
DUE = f"d.state = 'PENDING' AND d.next_attempt_at <= {NOW}"
# Enabled subscriptions that no live lease holds and that have work: events after their cursor, or a due delivery.
CLAIMABLE = f"""
    SELECT s.org, s.id, s.types, s.logged_through FROM webhook_subscriptions s
    WHERE s.disabled_at IS NULL AND (s.lease_until IS NULL OR s.lease_until < {NOW})
      AND (s.logged_through < coalesce((SELECT last FROM event_counters c WHERE c.org = s.org), 0)
           OR EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.org = s.org AND d.subscription_id = s.id AND {DUE}))
    ORDER BY s.lease_until NULLS FIRST, s.org, s.id
    LIMIT %(limit)s
    FOR UPDATE OF s SKIP LOCKED
"""
SUBSCRIBE = f"""
    INSERT INTO webhook_subscriptions AS s (org, id, url, headers, types, fragment, secret, created_at,
                                            logged_through)
    VALUES (%(org)s, %(id)s, %(url)s, %(headers)s, %(types)s, %(fragment)s, %(secret)s, {utc_text()},
            coalesce((SELECT last FROM event_counters WHERE org = %(org)s), 0))
    ON CONFLICT (org, id) DO UPDATE SET
        url = excluded.url, headers = excluded.headers, types = excluded.types, fragment = excluded.fragment,
        old_secret = CASE WHEN excluded.secret = s.secret OR %(keep)s THEN s.old_secret ELSE s.secret END,
        old_secret_until = CASE WHEN excluded.secret = s.secret OR %(keep)s THEN s.old_secret_until
                                ELSE {NOW} + %(grace)s END,
        secret = CASE WHEN %(keep)s THEN s.secret ELSE excluded.secret END,
        logged_through = CASE WHEN s.disabled_at IS NULL THEN s.logged_through ELSE excluded.logged_through END,
        disabled_at = NULL, disabled_reason = NULL, failing_since = NULL
    RETURNING (xmax = 0)
"""
# The org's oldest kept seq, or its latest + 1 when none is kept: the deliveries of older events go with them.
PRUNE = """
    WITH oldest AS (
        SELECT c.org, coalesce((SELECT min(seq) FROM events e WHERE e.org = c.org), c.last + 1) AS seq
        FROM event_counters c
    )
    DELETE FROM webhook_deliveries d USING oldest
    WHERE d.org = oldest.org AND d.seq < oldest.seq AND d.state <> 'PENDING'
"""


# The lowest-seq due delivery of a subscription, with its event (NULLs once the event was pruned).
DUE_DELIVERY = f"""
    SELECT {", ".join("d." + column for column in DELIVERY_COLUMNS.split(", "))},
           {", ".join("e." + column for column in EVENT_COLUMNS.split(", "))}
    FROM webhook_deliveries d LEFT JOIN events e ON e.org = d.org AND e.seq = d.seq
    WHERE d.org = %s AND d.subscription_id = %s AND {DUE} ORDER BY d.seq LIMIT 1
"""
# An attempt's outcome, while the claim's token is still the subscription's: its failures, its lease (extended for
# the next delivery, or released), the delivery's record (left PENDING and due when it was redelivered since the claim
# read it: sent again, as asked); the subscription's settings as they are now.
FINISH = f"""
    WITH s AS (
        UPDATE webhook_subscriptions SET
            failing_since = CASE WHEN %(succeeded)s THEN NULL ELSE coalesce(failing_since, {NOW}) END,
            lease_until = CASE WHEN %(keep)s THEN {NOW} + %(lease)s END,
            lease_token = CASE WHEN %(keep)s THEN lease_token END
        WHERE org = %(org)s AND id = %(id)s AND lease_token = %(token)s
        RETURNING {SUBSCRIPTION_COLUMNS}, types AS wanted_types, logged_through, {NOW}
    ), recorded AS (
        UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = %(status)s, last_error = %(error)s,
            last_attempt_at = {NOW},
            state = CASE WHEN redeliveries <> %(redeliveries)s THEN 'PENDING' ELSE %(state)s END,
            next_attempt_at = CASE WHEN redeliveries <> %(redeliveries)s THEN next_attempt_at
                                   WHEN %(state)s = 'PENDING' THEN {NOW} + %(retry_in)s END
        WHERE org = %(org)s AND subscription_id = %(id)s AND seq = %(seq)s AND EXISTS (SELECT 1 FROM s)
    )
    SELECT * FROM s
"""


class SharedWebhookStore:
    """Webhook subscriptions and deliveries in the database (service.storage.contract.webhooks.WebhookStore)."""

    def __init__(self, database):
        self.database = database

    # -- subscriptions -------------------------------------------------------------------------------------------------

    def subscribe(self, org, settings, new_secret, grace_seconds, max_subscriptions):
        values = {"org": org, "id": settings.id, "url": settings.url, "headers": _json(settings.headers),
                  "types": _json(settings.types), "fragment": _json(settings.fragment),
                  "secret": settings.secret or new_secret, "keep": settings.secret is None, "grace": grace_seconds}
        with self.database.transaction() as connection:
            connection.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (SUBSCRIBE_LOCK, org))
            count, exists = connection.execute(
                "SELECT count(*), coalesce(bool_or(id = %s), false) FROM webhook_subscriptions WHERE org = %s",
                (settings.id, org)).fetchone()
            if not exists and count >= max_subscriptions:
                return None
            return connection.execute(SUBSCRIBE, values).fetchone()[0]

    def unsubscribe(self, org, subscription_id):
        with self.database.transaction() as connection:
            connection.execute("DELETE FROM webhook_deliveries WHERE org = %s AND subscription_id = %s",
                               (org, subscription_id))
            return connection.execute("DELETE FROM webhook_subscriptions WHERE org = %s AND id = %s",
                                      (org, subscription_id)).rowcount == 1

    def subscriptions(self, org):
        with self.database.transaction() as connection:
            rows = connection.execute(
                f"SELECT {SUBSCRIPTION_COLUMNS}, {NOW} FROM webhook_subscriptions WHERE org = %s ORDER BY id",
                (org,)).fetchall()
        return [_subscription(row[:-1], now=row[-1]) for row in rows]

    def deliveries(self, org, subscription_id, first, before):
        with self.database.transaction() as connection:
            if connection.execute("SELECT 1 FROM webhook_subscriptions WHERE org = %s AND id = %s",
                                  (org, subscription_id)).fetchone() is None:
                return None
            rows = connection.execute(
                f"SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE org = %s AND subscription_id = %s "
                "AND seq < %s ORDER BY seq DESC LIMIT %s",
                (org, subscription_id, before if before is not None else 2 ** 62, first)).fetchall()
        return [_delivery(row) for row in rows]

    def redeliver(self, org, subscription_id, seq):
        with self.database.transaction() as connection:
            row = connection.execute(
                f"UPDATE webhook_deliveries SET state = 'PENDING', next_attempt_at = {NOW}, "
                "redeliveries = redeliveries + 1 "
                f"WHERE org = %s AND subscription_id = %s AND seq = %s RETURNING {DELIVERY_COLUMNS}",
                (org, subscription_id, seq)).fetchone()
            if row is not None:
                connection.execute(f"SELECT pg_notify({CHANNEL}, '')")  # the dispatchers wake at the commit
        return None if row is None else _delivery(row)

    # -- claims --------------------------------------------------------------------------------------------------------

    def subscribed(self):
        with self.database.transaction() as connection:
            return connection.execute("SELECT EXISTS (SELECT 1 FROM webhook_subscriptions)").fetchone()[0]

    def claim(self, limit, rules):
        claims = []
        with self.database.transaction() as connection:
            for org, identifier, types, logged_through in connection.execute(CLAIMABLE, {"limit": limit}).fetchall():
                due = self._due(connection, org, identifier, rules.wanted_of(_loads(types)), logged_through)
                if due is not None:
                    token = secrets.token_hex(8)
                    subscription = connection.execute(
                        f"""UPDATE webhook_subscriptions SET lease_until = {NOW} + %s, lease_token = %s
                            WHERE org = %s AND id = %s RETURNING {SUBSCRIPTION_COLUMNS}, {NOW}""",
                        (rules.lease_seconds, token, org, identifier)).fetchone()
                    claims.append(Claim(_subscription(subscription[:-1], now=subscription[-1]), *due, token))
        return claims

    def finish(self, claim, outcome, rules, claim_next=True):
        subscription = claim.subscription
        keep = claim_next and outcome.disable is None
        with self.database.transaction() as connection:
            row = connection.execute(FINISH, {
                "org": subscription.org, "id": subscription.id, "token": claim.hold, "seq": claim.delivery.seq,
                "succeeded": outcome.state is DeliveryState.SUCCEEDED, "keep": keep, "lease": rules.lease_seconds,
                "state": outcome.state.value, "status": outcome.status, "error": outcome.error,
                "retry_in": outcome.retry_in or 0, "redeliveries": claim.delivery.redeliveries}).fetchone()
            if row is None:
                return None  # unsubscribed meanwhile, or the lease passed to another claim
            *columns, types, logged_through, now = row
            if outcome.disable is not None:
                self._disable(connection, subscription.org, subscription.id, outcome.disable)
            if not keep:
                return None
            due = self._due(connection, subscription.org, subscription.id, rules.wanted_of(_loads(types)),
                            logged_through)
            if due is None:
                connection.execute("UPDATE webhook_subscriptions SET lease_until = NULL, lease_token = NULL "
                                   "WHERE org = %s AND id = %s", (subscription.org, subscription.id))
                return None
            return Claim(_subscription(columns, now=now), *due, claim.hold)

    def release(self, claim):
        with self.database.transaction() as connection:
            connection.execute("UPDATE webhook_subscriptions SET lease_until = NULL, lease_token = NULL "
                               "WHERE org = %s AND id = %s AND lease_token = %s",
                               (claim.subscription.org, claim.subscription.id, claim.hold))

    def pending_count(self):
        with self.database.transaction() as connection:
            return connection.execute("SELECT count(*) FROM webhook_deliveries WHERE state = 'PENDING'").fetchone()[0]

    def make_due_now(self):
        with self.database.transaction() as connection:
            made = connection.execute(
                f"UPDATE webhook_deliveries SET next_attempt_at = {NOW} WHERE state = 'PENDING'").rowcount
            connection.execute(f"SELECT pg_notify({CHANNEL}, '')")
        return made

    # -- upkeep (the repository's sweep and test mode) -----------------------------------------------------------------

    def prune(self):
        """Remove the deliveries of events no longer kept (never a PENDING one: its event is kept); how many."""
        with self.database.transaction() as connection:
            return connection.execute(PRUNE).rowcount

    @staticmethod
    def remove_all(connection):
        """Every subscription and delivery, in the caller's transaction (test mode's reset and restore)."""
        connection.execute("DELETE FROM webhook_deliveries")
        connection.execute("DELETE FROM webhook_subscriptions")

    # -- inside a claim's transaction ----------------------------------------------------------------------------------

    def _due(self, connection, org, identifier, wanted, logged_through):
        """(the lowest-seq due delivery of the locked subscription, its event or None); the events after its cursor
        are logged first when none is due (the ones logged before come first in seq order anyway). None when none is
        due."""
        row = connection.execute(DUE_DELIVERY, (org, identifier)).fetchone()
        if row is None and self._log_new_events(connection, org, identifier, wanted, logged_through):
            row = connection.execute(DUE_DELIVERY, (org, identifier)).fetchone()
        if row is None:
            return None
        event = row[len(DELIVERY_COLUMNS.split(", ")):]
        return _delivery(row[:len(DELIVERY_COLUMNS.split(", "))]), None if event[0] is None else event_of_row(*event)

    @staticmethod
    def _log_new_events(connection, org, identifier, wanted, after):
        """The events after the subscription's cursor (a page at most) as PENDING deliveries, due now; whether any
        event came after the cursor."""
        rows = connection.execute("SELECT seq, kind, change FROM events WHERE org = %s AND seq > %s ORDER BY seq "
                                  "LIMIT %s", (org, after, LOG_PAGE)).fetchall()
        if not rows:
            return False
        due = [(seq, f"{SINGULAR[kind]}.{change.lower()}") for seq, kind, change in rows
               if wanted is None or (kind, change) in wanted]
        connection.execute(
            f"""INSERT INTO webhook_deliveries (org, subscription_id, seq, type, state, next_attempt_at)
                SELECT %s, %s, seq, type, 'PENDING', {NOW} FROM unnest(%s::bigint[], %s::text[]) AS t (seq, type)
                ON CONFLICT DO NOTHING""",
            (org, identifier, [seq for seq, _ in due], [kind for _, kind in due]))
        connection.execute("UPDATE webhook_subscriptions SET logged_through = %s WHERE org = %s AND id = %s",
                           (rows[-1][0], org, identifier))
        return True

    @staticmethod
    def _disable(connection, org, identifier, reason):
        connection.execute(f"UPDATE webhook_subscriptions SET disabled_at = {utc_text()}, disabled_reason = %s "
                           "WHERE org = %s AND id = %s", (reason, org, identifier))
        connection.execute("UPDATE webhook_deliveries SET state = 'FAILED', next_attempt_at = NULL "
                           "WHERE org = %s AND subscription_id = %s AND state = 'PENDING'", (org, identifier))


def _json(value):
    return None if value is None else orjson.dumps(value).decode()


def _loads(text):
    return None if text is None else orjson.loads(text)


def _subscription(row, now):
    (org, identifier, url, headers, types, fragment, secret, old_secret, old_secret_until, created_at, disabled_at,
     disabled_reason, failing_since) = row
    signing_old = old_secret if old_secret_until is not None and old_secret_until > now else None
    return Subscription(org, identifier, url, orjson.loads(headers), _loads(types), _loads(fragment), secret,
                        signing_old, created_at, disabled_at, disabled_reason, failing_since)


def _delivery(row):
    seq, kind, state, attempts, last_status, last_error, last_attempt_at, next_attempt_at, redeliveries = row
    return Delivery(seq, kind, DeliveryState(state), attempts, last_status, last_error, iso_of(last_attempt_at),
                    iso_of(next_attempt_at), redeliveries)
