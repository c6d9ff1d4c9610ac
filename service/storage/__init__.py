"""The repository: every store of the service, rooted in one data directory."""
import os
import shutil
import threading
import time
from pathlib import Path

from service.storage import names
from service.storage.documents import DocumentStore
from service.storage.faults import FaultStore
from service.storage.media import MediaStore
from service.storage.streams import StreamStore

# Each process sweeps expired streams at most this often (besides the first request it serves, and `wis gc`).
SWEEP_INTERVAL_SECONDS = 300


class Repository:
    """What views and resolvers hand to domain functions; the only object that touches disk."""

    def __init__(self, data_dir, stream_ttl_seconds=24 * 3600, clock=time.time):
        self.data_dir = Path(data_dir)
        self.orgs_root = self.data_dir / "orgs"
        self.orgs_root.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.documents = DocumentStore(self.orgs_root)
        self.media = MediaStore(self.orgs_root, names)
        self.streams = StreamStore(self.orgs_root, self.media, stream_ttl_seconds, clock)
        self.faults = FaultStore(self.data_dir)
        # Due at once: the first request a process serves sweeps what expired while it was down.
        self._next_sweep = clock()
        self._sweep_schedule = threading.Lock()

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
        with self._sweep_schedule:
            now = self.clock()
            if now < self._next_sweep:
                return False
            self._next_sweep = now + SWEEP_INTERVAL_SECONDS
            return True

    def reset(self):
        """Remove every org's documents, media and streams, and every pending fault (test mode)."""
        for org_directory in list(self.orgs_root.iterdir()):
            shutil.rmtree(org_directory, ignore_errors=True)
        self.faults.clear()


def init_app(app):
    app.extensions["repository"] = Repository(app.config["DATA_DIR"], app.config["STREAM_TTL_HOURS"] * 3600)


def get_repository(app):
    return app.extensions["repository"]
