"""The shared backend's schema: its migrations, in order, which `wis db upgrade` applies (service.storage.shared.database
`Database.upgrade`). Append only: never edit one that has shipped."""

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
    # One clock for stream expiry (CONTRACT 13): touched_at is the database's clock from now on, and each stream keeps
    # the time-to-live of the node that made it (streams made before this get the default, 24 h).
    """
    ALTER TABLE streams ADD COLUMN ttl double precision NOT NULL DEFAULT 86400;
    UPDATE streams SET touched_at = extract(epoch from clock_timestamp()) WHERE touched_at > extract(epoch from clock_timestamp());
    CREATE INDEX streams_expiry ON streams ((touched_at + ttl));
    DROP INDEX streams_touched;
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
    # Media ETags survive `wis migrate` (CONTRACT 13): a media file copied from a file data directory keeps the ETag
    # the file backend served for it; media published here have none and are served with their SHA-256.
    """
    ALTER TABLE media ADD COLUMN etag text;
    """,
    # Collected media come back at their path (CONTRACT 10, docs/operations.md): the path each identity's media had
    # when `wis gc --delete` removed it, so that uploading the same bytes again publishes them there and the revisions
    # naming that path can be restored.
    """
    CREATE TABLE collected_media (
        org text COLLATE "C" NOT NULL,
        identity text COLLATE "C" NOT NULL,
        sha256 text NOT NULL,
        size bigint NOT NULL,
        path text COLLATE "C" NOT NULL,
        PRIMARY KEY (org, identity, sha256)
    );
    """,
    # Change events (CONTRACT 14): one row per history entry, written in the transaction of its change, numbered per
    # org by `event_counters` (its row taken last in that transaction, so seqs follow commit order without a gap; it
    # keeps the latest seq when every event is pruned). `timestamp` is the entry's savedAt, which pruning compares.
    # `name`, `author` and `comment` hold JSON strings, as `body` holds JSON: PostgreSQL text cannot hold the NUL a
    # name may have.
    """
    CREATE TABLE events (
        org text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        timestamp text NOT NULL,
        kind text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        revision bigint NOT NULL,
        change text NOT NULL,
        name text,
        author text,
        comment text,
        PRIMARY KEY (org, seq)
    );
    CREATE INDEX events_age ON events (timestamp);
    CREATE TABLE event_counters (
        org text COLLATE "C" PRIMARY KEY,
        last bigint NOT NULL
    );
    """,
    # Who changed what (CONTRACT 16): the author (the name of the token that sent the change) and the comment of each
    # history entry, JSON strings as the events' are. The entries stored before read as made by nobody (null).
    """
    ALTER TABLE revisions ADD COLUMN author text, ADD COLUMN comment text;
    """,
    # API tokens made by `wis token create` (CONTRACT 16): the SHA-256 of each, never the token; a revoked one keeps
    # its row, so its name is never given again. `api_tokens_version` changes with every add and revoke, in their
    # transaction: each process reads that one row (at most once a second) before it reads the tokens again.
    """
    CREATE TABLE api_tokens (
        digest text COLLATE "C" PRIMARY KEY,
        org text COLLATE "C" NOT NULL,
        name text COLLATE "C" NOT NULL,
        scope text NOT NULL,
        created_at text NOT NULL,
        last_used_at text,
        revoked_at text,
        UNIQUE (org, name)
    );
    CREATE TABLE api_tokens_version (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        version bigint NOT NULL
    );
    INSERT INTO api_tokens_version (version) VALUES (0);
    """,
    # Webhooks (CONTRACT 15): each subscription with `logged_through`, the seq through which the org's events are logged
    # for it (its cursor over `events`: what comes after it is due, so a change's commit writes nothing for webhooks),
    # and the lease of the claim that holds it (the database's clock, seconds since the epoch); the delivery log, one
    # row per subscription and event. `headers`, `types` and `fragment` hold JSON, as `events` holds names.
    """
    CREATE TABLE webhook_subscriptions (
        org text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        url text NOT NULL,
        headers text NOT NULL,
        types text,
        fragment text,
        secret text NOT NULL,
        old_secret text,
        old_secret_until double precision,
        created_at text NOT NULL,
        disabled_at text,
        disabled_reason text,
        logged_through bigint NOT NULL,
        failing_since double precision,
        lease_until double precision,
        lease_token text,
        PRIMARY KEY (org, id)
    );
    CREATE TABLE webhook_deliveries (
        org text COLLATE "C" NOT NULL,
        subscription_id text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        type text NOT NULL,
        state text NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        last_status integer,
        last_error text,
        last_attempt_at double precision,
        next_attempt_at double precision,
        PRIMARY KEY (org, subscription_id, seq)
    );
    CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (org, subscription_id, next_attempt_at)
        WHERE state = 'PENDING';
    """,
    # How many times each delivery was redelivered (webhookRedeliver): an attempt in flight meanwhile is recorded
    # without undoing the redelivery (its finish compares the count with the one its claim read).
    """
    ALTER TABLE webhook_deliveries ADD COLUMN redeliveries integer NOT NULL DEFAULT 0;
    """,
]
# Taken by `upgrade` for its transaction, so several nodes running it at once apply each migration once.
UPGRADE_LOCK = 0x5749_5301
