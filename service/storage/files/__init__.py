"""The file backend, the default: every org's documents, media and upload streams as files under one data directory
(`<data>/orgs/<org>/`), written atomically and locked across worker processes with flock(2).

Modules: `streams` (upload streams, a package of its own), `media` (published media), `documents`, `events`, `tokens`
(the API tokens `wis token create` made), `names` (ids as file names).
"""
import os
import shutil
import time
from pathlib import Path

import orjson

from service.errors import disk_errors
from service.storage.contract import DEFAULT_EVENTS_RETENTION, DEFAULT_HISTORY_REVISIONS, utc_timestamp
from service.storage.files.counter import FileCounter
from service.storage.common.disk import lock, remove_stale_temporaries
from service.storage.testmode.faults import FaultStore
from service.storage.files import names
from service.storage.files.documents import FileDocumentStore
from service.storage.files.events import FileEventLog
from service.storage.files.media import FileMediaStore
from service.storage.files.streams import FileStreamStore
from service.storage.files.webhooks import FileWebhookStore
from service.storage.files.tokens import FileTokenStore
from service.storage.testmode.fresh_names import name_source
from service.storage.testmode.journal_store import JournalStore
from service.storage.common.node_local import NodeLocal
from service.storage.common.schedule import SweepSchedule
from service.storage.common.data_dir_secrets import ensure_secret_key

# Test mode's count of the names made up since the state was emptied (service.storage.testmode.fresh_names).
NAMES_COUNTER = "test-mode/names-counter"
# Held while a new state replaces the old one, so that two replacements never interleave.
REPLACING_LOCK = "test-mode/replacing-state"
# Webhook subscriptions and their deliveries (service.storage.files.webhooks): not an org's objects, so not in orgs/.
WEBHOOKS = "webhooks"


class FileRepository(NodeLocal):
    """The stores of the file backend (service.storage.contract.Repository), rooted in one data directory; the only
    object that touches it."""

    def __init__(self, data_dir, stream_ttl_seconds=24 * 3600, clock=time.time, max_open_streams=1000, test_seed=None,
                 history_revisions=DEFAULT_HISTORY_REVISIONS, events_retention_seconds=DEFAULT_EVENTS_RETENTION):
        self.data_dir = Path(data_dir)
        self.orgs_root = self.data_dir / "orgs"
        self.orgs_root.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.names_counter = FileCounter(self.data_dir / NAMES_COUNTER)
        self.new_hex = name_source(test_seed, self.names_counter)
        self.media = FileMediaStore(self.orgs_root)
        self.documents = FileDocumentStore(self.orgs_root, history_revisions, self.media)
        self.events = FileEventLog(self.orgs_root, self.documents.committed_revision, self.documents.put_forward,
                                   events_retention_seconds, clock)
        self.documents.events = self.events
        self.webhooks = FileWebhookStore(self.data_dir / WEBHOOKS, self.events, lambda: self.clock())
        self.events.needed = self.webhooks.oldest_needed
        self.streams = FileStreamStore(self.orgs_root, self.media, stream_ttl_seconds, clock, max_open_streams,
                                       new_hex=self.new_hex)
        self.tokens = FileTokenStore(self.data_dir)
        self.faults = FaultStore(self.data_dir, test_seed)
        self.journal = JournalStore(self.data_dir)
        self._sweep_schedule = SweepSchedule(lambda: self.clock())  # the clock may be replaced (tests)

    def orgs(self):
        """Every org that has stored something, sorted."""
        with os.scandir(self.orgs_root) as entries:
            stored = [entry.name for entry in entries if entry.is_dir() and names.SAFE_NAME.fullmatch(entry.name)]
        return sorted(names.name_to_id(name) for name in stored)

    def sweep(self):
        """Remove expired streams and the temporaries that killed workers left (as old as an expired stream); return
        how many streams."""
        cutoff = self.clock() - self.streams.ttl_seconds
        self.documents.sweep_temporaries(cutoff)
        remove_stale_temporaries(self.data_dir, cutoff)  # of the sweep's own count of open streams
        self.events.prune()
        self.webhooks.prune()
        return self.streams.sweep()

    def sweep_due(self):
        """True for exactly one caller once SWEEP_INTERVAL_SECONDS have passed since the last sweep was claimed
        (the 32 threads of a worker share this repository)."""
        return self._sweep_schedule.due()

    def engine_stats(self):
        """No engine: the data directory is this process's own disk."""
        return {}

    def check_ready(self):
        """{engine: None or its problem} of each engine to check: none, the data directory is this process's own disk
        (a failing one answers 503 per request)."""
        return {}

    def secret_key(self):
        """The key that signs session cookies when WIS_SECRET_KEY is unset: made once, kept in the data directory."""
        return ensure_secret_key(self.data_dir)

    def close(self):
        """Nothing is held open between requests: the checkpoint due is made now, and none after
        (service.storage.files.checkpoints)."""
        self.events.checkpoints.close()

    def reset(self):
        """Remove every org's documents, media, streams and webhooks, every pending fault and the request journal, and
        count made-up names from the start again (test mode)."""
        for org_directory in list(self.orgs_root.iterdir()):
            shutil.rmtree(org_directory, ignore_errors=True)
        self.webhooks.remove_all()
        self.events.forget()
        self.forget_test_state()

    def replace_state(self, documents, media):
        """Make these the whole state (service.storage.contract.Repository.replace_state): the new orgs' folders are
        built beside the data directory's `orgs`, then each old org's folder is moved out and each new one in (renames:
        the time the state is neither old nor new does not grow with its size)."""
        with lock(self.data_dir / REPLACING_LOCK), self.staging_directory() as new_root:
            new_documents, new_media, now = FileDocumentStore(new_root), FileMediaStore(new_root), utc_timestamp()
            for document in documents:
                new_documents.load(document.org, document.kind, document.identifier, orjson.loads(document.body), now)
            for item in media:
                new_media.load(item.org, item.path, item.file)
            with self.staging_directory() as old_root, disk_errors():
                for org_directory in list(self.orgs_root.iterdir()):
                    os.replace(org_directory, old_root / org_directory.name)
                for org_directory in list(new_root.iterdir()):
                    os.replace(org_directory, self.orgs_root / org_directory.name)
            self.webhooks.remove_all()
            self.events.forget()
            self.forget_test_state()
