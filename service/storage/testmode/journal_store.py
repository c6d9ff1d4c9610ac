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

from service.errors import disk_errors
from service.storage.common.disk import lock

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
        with self._locked(), _opened(self._state) as state:
            last, count = _unpack(os.pread(state, 2 * _STATE_WIDTH, 0))
            if count + len(entries) > self.keep:
                self._rotate()
                count = 0
            # The state first: a worker killed before its lines are written skips those seqs, never repeats them.
            os.pwrite(state, _pack(last + len(entries), count + len(entries)), 0)
            lines = b"".join(orjson.dumps({"seq": last + number, **entry}) + b"\n"
                             for number, entry in enumerate(entries, 1))
            with _opened(self._current, os.O_APPEND) as current:
                size = os.fstat(current).st_size
                if size and os.pread(current, 1, size - 1) != b"\n":
                    lines = b"\n" + lines  # after a line torn by a killed worker: only that line is lost
                os.write(current, lines)

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
        with self._locked(), _opened(self._state) as state:
            last, _ = _unpack(os.pread(state, 2 * _STATE_WIDTH, 0))
            self._current.unlink(missing_ok=True)
            self._previous.unlink(missing_ok=True)
            os.pwrite(state, _pack(last, 0), 0)

    @contextlib.contextmanager
    def _locked(self):
        """The journal's lock (taking it makes the directory), disk errors turned into the service's (507, 503)."""
        with disk_errors(), lock(self.directory / "journal"):
            yield

    def _rotate(self):
        if self._current.exists():
            os.replace(self._current, self._previous)


@contextlib.contextmanager
def _opened(path, flags=0):
    """A file descriptor of `path`, opened for reading and writing (made if missing), closed after the block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o644)
    try:
        yield fd
    finally:
        os.close(fd)


def _pack(last, count):
    return last.to_bytes(_STATE_WIDTH, "big") + count.to_bytes(_STATE_WIDTH, "big")


def _unpack(state):
    """(last seq, entries in `current`) of the state file's bytes; (0, 0) for a new file."""
    return int.from_bytes(state[:_STATE_WIDTH], "big"), int.from_bytes(state[_STATE_WIDTH:], "big")


def _read_or_empty(path):
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
