"""The repository: every store of the service. The file backend (this module's Repository, rooted in one data
directory) is the default; the shared backend (service.storage.shared) keeps everything in PostgreSQL and an S3
bucket. Both offer the same stores with the same methods (`documents`, `media`, `streams`, and test mode's `faults`,
`journal` and `names_counter`), `new_hex` (the source of the names the server makes up), and `orgs`, `sweep`,
`sweep_due`, `reset`, `check_ready` and `secret_key`; nothing above this package knows which one it talks to."""
import logging
import os
import shutil
import time
from pathlib import Path

from service.storage import names
from service.storage.counter import FileCounter
from service.storage.documents import DocumentStore
from service.storage.faults import FaultStore
from service.storage.fresh_names import name_source
from service.storage.journal import JournalStore
from service.storage.media import MediaStore
from service.storage.schedule import SWEEP_INTERVAL_SECONDS, SweepSchedule
from service.storage.streams import StreamStore
from service.storage.tokens import ensure_secret_key

__all__ = ["Repository", "SWEEP_INTERVAL_SECONDS", "open_repository", "init_app", "get_repository"]

log = logging.getLogger(__name__)

# How many names the server made up since the state was emptied, when a test seed makes them (fresh_names).
NAMES_COUNTER = "test-mode/names-counter"


class Repository:
    """What views and resolvers hand to domain functions; the only object that touches disk."""

    def __init__(self, data_dir, stream_ttl_seconds=24 * 3600, clock=time.time, test_seed=None):
        self.data_dir = Path(data_dir)
        self.orgs_root = self.data_dir / "orgs"
        self.orgs_root.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.names_counter = FileCounter(self.data_dir / NAMES_COUNTER)
        self.new_hex = name_source(test_seed, self.names_counter)
        self.documents = DocumentStore(self.orgs_root)
        self.media = MediaStore(self.orgs_root, names)
        self.streams = StreamStore(self.orgs_root, self.media, stream_ttl_seconds, clock, self.new_hex)
        self.faults = FaultStore(self.data_dir, test_seed)
        self.journal = JournalStore(self.data_dir)
        self._sweep_schedule = SweepSchedule(lambda: self.clock())  # the clock may be replaced (tests)

    def orgs(self):
        """Every org that has stored something, sorted."""
        with os.scandir(self.orgs_root) as entries:
            stored = [entry.name for entry in entries if entry.is_dir() and names.SAFE_NAME.fullmatch(entry.name)]
        return sorted(names.name_to_id(name) for name in stored)

    def sweep(self):
        """Remove expired streams and the temporaries that killed workers left (as old as an expired stream);
        return how many streams."""
        self.documents.sweep_temporaries(self.clock() - self.streams.ttl_seconds)
        return self.streams.sweep()

    def sweep_due(self):
        """True for exactly one caller once SWEEP_INTERVAL_SECONDS have passed since the last sweep was claimed
        (the 32 threads of a worker share this repository)."""
        return self._sweep_schedule.due()

    def check_ready(self):
        """{engine: None or its problem} of each engine to check: none, the data directory is this process's own disk
        (a failing one answers 503 per request)."""
        return {}

    def secret_key(self):
        """The key that signs session cookies when WIS_SECRET_KEY is unset: made once, kept in the data directory."""
        return ensure_secret_key(self.data_dir)

    def close(self):
        """Nothing held open between requests."""

    def reset(self):
        """Remove every org's documents, media and streams, every pending fault and the request journal, and count
        made-up names from the start again (test mode)."""
        for org_directory in list(self.orgs_root.iterdir()):
            shutil.rmtree(org_directory, ignore_errors=True)
        self.faults.clear()
        self.journal.clear()
        self.names_counter.reset()


def open_repository(config, clock=time.time):
    """The repository the configuration names: the shared backend with a database URL, else the data directory."""
    ttl_seconds = config["STREAM_TTL_HOURS"] * 3600
    if config.get("DATABASE_URL"):
        from service.storage.shared import SharedRepository  # psycopg and boto3 load only when used

        return SharedRepository(config["DATA_DIR"], config["DATABASE_URL"], config["S3_BUCKET"],
                                config["S3_PREFIX"], ttl_seconds, clock, config.get("TEST_SEED"))
    return Repository(config["DATA_DIR"], ttl_seconds, clock, config.get("TEST_SEED"))


def init_app(app):
    """Open the configured repository for the app, and sweep its expired streams after responses, when one is due."""
    repository = open_repository(app.config)
    app.extensions["repository"] = repository

    def sweep_when_due(response):
        """After the first response a worker sends, and then at most every SWEEP_INTERVAL_SECONDS (the repository
        keeps the time), sweep expired streams once the response has gone out: no request waits for it."""
        if repository.sweep_due():
            response.call_on_close(lambda: _sweep(repository, app.extensions["metrics"].streams_expired))
        return response

    app.after_request(sweep_when_due)


def _sweep(repository, expired_counter):
    try:
        expired_counter.inc(repository.sweep())
    except Exception:
        log.exception("sweeping expired upload streams failed")


def get_repository(app):
    return app.extensions["repository"]
