"""The request journal of test mode (CONTRACT 12): what each request was, shared by every worker of a node, bounded.

Files under `<data>/test-mode/journal/`, all changed under one lock:
- `state`          16 bytes: the last `seq` given out, and how many entries `current` holds;
- `current.jsonl`  the newest entries, one JSON object a line, appended in one write per request;
- `previous.jsonl` the segment before it.
When `current` would pass KEEP entries it becomes `previous` (replacing the older one): the two segments always hold
at least the last KEEP entries and never more than 2 x KEEP, so the journal takes a bounded room on disk however
long a test suite runs. `seq` is given out under the lock, so it grows by one per entry across workers; it is never
given out twice, not even across a reset (which empties the segments but keeps the count), so a reader paging with
`since` never mistakes a new entry for one it has seen.

Nothing is fsynced: the journal serves a test run, and a machine that crashes ends that run anyway. A worker killed
while appending may leave a torn line: the next append starts on a new line, and readers skip any line that is not a
whole entry, so only the entries of that worker's request are lost.
"""
import contextlib
import os

import orjson

from service.storage.files import disk_errors, lock

JOURNAL_DIR = "test-mode/journal"
# How many entries a reader can get: the last KEEP.
KEEP = 10_000
_STATE_WIDTH = 8


class JournalStore:
    def __init__(self, data_dir, keep=KEEP):
        self.directory = data_dir / JOURNAL_DIR
        self.keep = keep
        self._state = self.directory / "state"
        self._current = self.directory / "current.jsonl"
        self._previous = self.directory / "previous.jsonl"

    def append(self, entries):
        """Record `entries` (dicts, at most KEEP of them) in order, each given the next `seq` (its first key)."""
        if not entries:
            return
        with self._locked():
            last, count = self._read_state()
            if count + len(entries) > self.keep:
                self._rotate()
                count = 0
            # The state first: a worker killed before its lines are written skips those seqs, never repeats them.
            self._write_state(last + len(entries), count + len(entries))
            lines = b"".join(orjson.dumps({"seq": last + number, **entry}) + b"\n"
                             for number, entry in enumerate(entries, 1))
            fd = os.open(self._current, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    lines = b"\n" + lines  # after a line torn by a killed worker: only that line is lost
                os.write(fd, lines)
            finally:
                os.close(fd)

    def read(self, since=0):
        """The entries whose seq is above `since`, oldest first, at most the last KEEP."""
        with self._locked():
            texts = [_read_or_empty(self._previous), _read_or_empty(self._current)]
        entries = []
        for text in texts:
            for line in text.splitlines():
                try:
                    entry = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # torn by a worker killed mid-write
                if isinstance(entry, dict) and isinstance(entry.get("seq"), int) and entry["seq"] > since:
                    entries.append(entry)
        return entries[-self.keep:]

    def clear(self):
        """Forget every entry; `seq` goes on from where it was."""
        with self._locked():
            last, _ = self._read_state()
            self._current.unlink(missing_ok=True)
            self._previous.unlink(missing_ok=True)
            self._write_state(last, 0)

    @contextlib.contextmanager
    def _locked(self):
        """The journal's lock (taking it makes the directory), disk errors turned into the service's (507, 503)."""
        with disk_errors(), lock(self.directory / "journal"):
            yield

    def _rotate(self):
        if self._current.exists():
            os.replace(self._current, self._previous)

    def _read_state(self):
        try:
            data = self._state.read_bytes()
        except FileNotFoundError:
            return 0, 0
        return int.from_bytes(data[:_STATE_WIDTH], "big"), int.from_bytes(data[_STATE_WIDTH:], "big")

    def _write_state(self, last, count):
        fd = os.open(self._state, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, last.to_bytes(_STATE_WIDTH, "big") + count.to_bytes(_STATE_WIDTH, "big"), 0)
        finally:
            os.close(fd)


def _read_or_empty(path):
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
