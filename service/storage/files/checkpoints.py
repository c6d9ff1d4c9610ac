"""Checkpoints of the file backend's write-ahead logs (service.storage.files.write_ahead): a change commits with one
sync of its org's write-ahead log, its files written without one; about CHECKPOINT_SECONDS after a batch commits, a
thread of the process syncs the file system once (syncfs(2)) and notes, for each org that committed meanwhile, the last
seq that sync covers, so that a replay after a power cut starts there and the segments before it are removed.

The thread runs only while there is something to checkpoint: it ends when a round finds nothing new. A failed sync (a
failing disk) notes nothing: the records stay, and a replay covers them. Nothing is lost when a process ends before its
checkpoint: the records stay until a later one, and the first look at the log after a reboot replays them. Closing the
repository makes the checkpoint due at once and waits for the thread: nothing of it writes in the data directory after
(an embedded server's stop removes that directory next: service.testing.ThreadedServer).
"""
import threading

from service.storage.common.disk import sync_filesystem
from service.storage.common.forks import reset_in_forked_child

# How long after a commit its changes are synced in place: a checkpoint covers every batch of that time. None: no
# checkpoint (the records stay, and a replay after a reboot covers them): the test suite's in-process default, where
# another test's background sync would be counted among the syncs a test counts.
CHECKPOINT_SECONDS = 1.0

class Checkpoints:
    """The checkpoints of one event log (service.storage.files.events.FileEventLog) by this process."""

    def __init__(self, log):
        self._log = log
        self._start_fresh()
        reset_in_forked_child(self, "_start_fresh")

    def _start_fresh(self):
        """(Also in a forked child, which has none of its parent's threads, and perhaps a lock one of them held.)"""
        self._guard = threading.Lock()
        self._due, self._running = {}, False  # org -> the last seq committed by this process, not checkpointed yet
        self._thread, self._closing = None, threading.Event()  # (set: the next round now, and the last)

    def forget(self):
        """Nothing due (test mode's reset): a round under way finds nothing and ends."""
        with self._guard:
            self._due.clear()

    def committed(self, org, seq):
        """Note that a batch of this process committed the org's changes through `seq`."""
        if CHECKPOINT_SECONDS is None:
            return
        with self._guard:
            self._due[org] = max(seq, self._due.get(org, 0))
            if self._running or self._closing.is_set():
                return
            self._running = True
            self._thread = threading.Thread(target=self._run, name="wis-checkpoints", daemon=True)
            try:
                self._thread.start()
            except RuntimeError:  # no thread to be had now: the next commit tries again (the records wait meanwhile)
                self._running, self._thread = False, None

    def close(self):
        """Checkpoint what is due now and wait for it; no checkpoint after (what commits later waits for a replay)."""
        self._closing.set()
        with self._guard:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self):
        while True:
            self._closing.wait(CHECKPOINT_SECONDS or 0)
            with self._guard:
                due, self._due = self._due, {}
                last = not due or self._closing.is_set()
                self._running = not last
            if due:
                try:
                    sync_filesystem(self._log.orgs_root)
                    for org, seq in due.items():
                        self._log.checkpointed(org, seq)
                except Exception:  # noqa: BLE001 (a failing disk: the records stay for a later checkpoint or a replay)
                    pass
            if last:
                return
