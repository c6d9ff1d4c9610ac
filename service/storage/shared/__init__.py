"""The shared backend (CONTRACT 8): documents, stream state and the media index in PostgreSQL, media and upload bytes
in an S3-compatible bucket. No node keeps anything another node needs: its data directory holds only what is received
before it goes to the store (spooled request bodies), and the test-mode faults and request journal of that node (a
test that wants one view of them talks to one node; the count of made-up names is in the database, shared).

Modules, each importing only those after it: `streams` (upload streams, a package of its own), `media` (published
media), `documents`, `events` (change events, which the documents store records with each change), `counter` (test
mode's count of made-up names), `secrets` (the session-signing key), `tokens` (the API tokens `wis token create`
made), `database` (PostgreSQL: pool, transactions, schema), `objects` (the bucket).
"""
import shutil
import time
from pathlib import Path

from service.errors import ObjectStoreUnavailable
from service.storage.contract import DEFAULT_EVENTS_RETENTION, DEFAULT_HISTORY_REVISIONS, utc_timestamp
from service.storage.common.disk import lock
from service.storage.testmode.faults import FaultStore
from service.storage.testmode.fresh_names import name_source
from service.storage.testmode.journal_store import JournalStore
from service.storage.common.node_local import NodeLocal
from service.storage.common.schedule import SweepSchedule
from service.storage.shared.counter import DatabaseCounter
from service.storage.shared.database import Database
from service.storage.shared.documents import SharedDocumentStore
from service.storage.shared.events import SharedEventStore
from service.storage.shared.media import SharedMediaStore
from service.storage.shared.objects import ObjectStore
from service.storage.shared.secrets import shared_secret
from service.storage.shared.streams import SharedStreamStore
from service.storage.shared.webhooks import SharedWebhookStore
from service.storage.shared.streams.spool import remove_orphans
from service.storage.shared.tokens import SharedTokenStore

# Where this node spools request bodies on their way to the bucket.
SPOOL = "spool"
# Held while a new state replaces the old one, so that two replacements on this node never interleave.
REPLACING_LOCK = "test-mode/replacing-state"


class SharedRepository(NodeLocal):
    """The stores of the shared backend (service.storage.contract.Repository)."""

    def __init__(self, data_dir, database_url, bucket, prefix="", stream_ttl_seconds=24 * 3600, clock=time.time,
                 max_open_streams=1000, test_seed=None, history_revisions=DEFAULT_HISTORY_REVISIONS,
                 events_retention_seconds=DEFAULT_EVENTS_RETENTION, database_options=None):
        """`database_options`: Database's keyword arguments (pool size and wait, node name, the URL's variable)."""
        self.data_dir = Path(data_dir)
        self.spool = self.data_dir / SPOOL
        self.spool.mkdir(parents=True, exist_ok=True)
        # What killed processes left in the spool goes as soon as the node's next process opens the repository.
        remove_orphans(self.spool)
        self.clock = clock
        self.database = Database(database_url, **(database_options or {}))
        self.objects = ObjectStore(bucket, prefix)
        self.names_counter = DatabaseCounter(self.database, "names")
        self.new_hex = name_source(test_seed, self.names_counter)
        self.events = SharedEventStore(self.database, events_retention_seconds)
        self.documents = SharedDocumentStore(self.database, self.events, history_revisions)
        self.webhooks = SharedWebhookStore(self.database)
        self.media = SharedMediaStore(self.database, self.objects, self.spool, clock)
        self.streams = SharedStreamStore(self.database, self.objects, self.media, self.spool, stream_ttl_seconds,
                                         max_open_streams, self.new_hex)
        self.tokens = SharedTokenStore(self.database)
        self.faults = FaultStore(self.data_dir, test_seed)
        self.journal = JournalStore(self.data_dir)
        self._sweep_schedule = SweepSchedule(lambda: self.clock())  # the clock may be replaced (tests)

    def orgs(self):
        """Every org that has stored something, sorted."""
        with self.database.transaction() as connection:
            rows = connection.execute(
                "SELECT org FROM documents UNION SELECT org FROM media UNION SELECT org FROM streams ORDER BY 1")
            return [org for (org,) in rows]

    def sweep(self):
        """Remove expired streams (aborting their multipart uploads, removing their staged objects), spooled bodies
        their worker left and events past their retention; return how many streams."""
        cutoff = self.clock() - self.streams.ttl_seconds
        for leftover in self.spool.iterdir():
            try:
                if leftover.stat().st_mtime < cutoff:
                    leftover.unlink()
            except FileNotFoundError:
                pass
        self.events.prune()
        self.webhooks.prune()
        return self.streams.sweep()

    def sweep_due(self):
        return self._sweep_schedule.due()

    def engine_stats(self):
        return self.database.stats()

    def check_ready(self):
        """{engine: None when it answers, else why not} for the database (this process's pool and circuit: no new
        connection) and the object store."""
        try:
            self.objects.check()
            objects = None
        except ObjectStoreUnavailable as error:  # the store's own words say why
            objects = " ".join(str(error.__cause__ or error).split())
        except Exception as error:  # a refusal (no such bucket, access denied) says what to fix
            objects = str(error)
        return {"database": self.database.problem(), "objects": objects}

    def check_start(self):
        """At start-up: ConfigurationError naming the database URL or the bucket when either is wrong (the schema not
        upgraded, no such bucket, credentials refused); DatabaseUnavailable or ObjectStoreUnavailable, naming the
        setting, when either engine does not answer."""
        self.database.check_schema()
        try:
            self.objects.check()
        except ObjectStoreUnavailable as error:
            raise ObjectStoreUnavailable(
                f"the object store does not answer for bucket {self.objects.bucket!r}: check AWS_ENDPOINT_URL_S3 "
                f"({error.__cause__ or error})") from error

    def secret_key(self):
        """The key that signs session cookies when WIS_SECRET_KEY is unset: made once, kept in the database, so every
        node shares it."""
        return shared_secret(self.database, "session-key")

    def close(self):
        """Close this process's database connections (an embedding caller or test that is done with the app)."""
        self.database.close()

    def reset(self):
        """Remove every org's documents, events, media, streams and webhooks, this node's pending faults and request journal,
        and count made-up names and seqs from the start again (test mode)."""
        self.streams.remove_all()
        self.media.remove_all()
        self.documents.remove_all()
        with self.database.transaction() as connection:
            self.webhooks.remove_all(connection)
        shutil.rmtree(self.spool, ignore_errors=True)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.forget_test_state()

    def replace_state(self, documents, media):
        """Make these the whole state (service.storage.contract.Repository.replace_state): streams and media go, the
        new media's objects are put, then one transaction replaces every document and indexes the new media. A failing
        engine half way leaves the old documents with fewer media, or no media at all; the request answers 503."""
        with lock(self.data_dir / REPLACING_LOCK):
            self.streams.remove_all()
            self.media.remove_all()
            rows = self.media.put_all(media)
            with self.database.transaction() as connection:
                self.media.index_all(connection, rows)
                self.documents.load_all(connection, documents, utc_timestamp())
                self.webhooks.remove_all(connection)
            shutil.rmtree(self.spool, ignore_errors=True)
            self.spool.mkdir(parents=True, exist_ok=True)
            self.forget_test_state()
