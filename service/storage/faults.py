"""Faults injected through the test-mode API, kept in one file under a lock so they apply across workers."""
import re

import orjson

from service.storage.disk import atomic_write_bytes, lock

FAULTS_FILE = "test-mode/faults.json"


class FaultStore:
    def __init__(self, data_dir):
        self.path = data_dir / FAULTS_FILE

    def list(self):
        """Every pending fault, in the order they were added."""
        try:
            return orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return []

    def add(self, fault):
        with lock(self.path):
            self._write(self.list() + [fault])

    def take(self, method, path):
        """The first fault matching a request, with one of its uses taken, or None."""
        if not self.path.exists():
            return None
        with lock(self.path):
            faults = self.list()
            for fault in faults:
                if fault["method"] in (None, method) and re.search(fault["path"], path):
                    fault["times"] -= 1
                    self._write([f for f in faults if f["times"] > 0])
                    return fault
        return None

    def clear(self):
        with lock(self.path):
            self.path.unlink(missing_ok=True)

    def _write(self, faults):
        atomic_write_bytes(self.path, orjson.dumps(faults))
