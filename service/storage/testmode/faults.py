"""Faults injected through the test-mode API, kept in one file under a lock so they apply across workers.

A fault with a `rate` fires on each matching request with that probability. Its draws come from `random` unless a test
seed is set; then the n-th draw of a fault is hash(seed, the fault's definition, n), so it is the same on every run and
whichever worker draws it. `matched` counts the requests a fault has matched, `times` the firings it has left.
"""
import hashlib
import random

import orjson

from service.errors import InvalidRequest
from service.storage.testmode.fault_paths import matches
from service.storage.common.disk import atomic_write_bytes, lock

FAULTS_FILE = "test-mode/faults.json"
# What changes as a fault is used, so not part of what defines it (and its seeded draws).
_COUNTERS = ("id", "times", "matched")
# Every request is searched against each pending fault (service.storage.testmode.fault_paths bounds one search).
MAX_FAULTS = 100


class FaultStore:
    def __init__(self, data_dir, seed=None):
        self.path = data_dir / FAULTS_FILE
        self.seed = seed

    def list(self):
        """Every pending fault, in the order they were added."""
        try:
            return orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return []

    def add(self, fault):
        """Store a fault after the pending ones; return it as stored. InvalidRequest when MAX_FAULTS are pending."""
        stored = dict(fault, matched=0)
        with lock(self.path):
            pending = self.list()
            if len(pending) >= MAX_FAULTS:
                raise InvalidRequest(f"{len(pending)} faults are pending, the most a server keeps (each is searched in "
                                     "every request); DELETE /_test/faults clears them")
            self._write(pending + [stored])
        return stored

    def take(self, method, path):
        """The first fault matching a request that fires, with one of its uses taken, or None."""
        if not self.path.exists():
            return None
        # Searched before the lock is taken (the file is replaced whole, so it reads whole without it): a pattern's
        # search holds up this request only, never every worker's.
        matching = {fault["id"] for fault in self.list()
                    if fault["method"] in (None, method) and matches(fault["path"], path)}
        if not matching:
            return None
        with lock(self.path):
            faults = self.list()  # a fault added since is left to the next requests
            for fault in faults:
                if fault["id"] not in matching:
                    continue
                fault["matched"] += 1
                if "rate" not in fault or self._draw(fault) < fault["rate"]:
                    fault["times"] -= 1
                    self._write([f for f in faults if f["times"] > 0])
                    return fault
            self._write(faults)
        return None

    def clear(self):
        with lock(self.path):
            self.path.unlink(missing_ok=True)

    def _draw(self, fault):
        """A number in [0, 1) for the fault's current match."""
        if self.seed is None:
            return random.random()
        definition = orjson.dumps({key: value for key, value in fault.items() if key not in _COUNTERS},
                                  option=orjson.OPT_SORT_KEYS)
        digest = hashlib.blake2b(b"%d:%d:%s" % (self.seed, fault["matched"], definition), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2 ** 64

    def _write(self, faults):
        atomic_write_bytes(self.path, orjson.dumps(faults))
