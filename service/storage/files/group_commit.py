"""Group commit of the file backend's changes with their events, between the threads of one worker process: the
org's changes waiting in this process are committed as one batch under the org's events lock: their events appended
to the log (service.storage.files.events), their records to the write-ahead log (service.storage.files.write_ahead)
and fdatasynced once, the batch's commit point, then the changes put in place in seq order. The lock is released and
the batch's writers answer: a batch waits for one sync, whatever the number of its changes, and nothing else is synced
on its way (a checkpoint syncs the file system later: service.storage.files.checkpoints).

The writer that finds no batch of its org forming in its process leads the next one: it waits for the org's lock in
the kernel, which wakes it when the lock is released, then takes every change its process's writers of the org
queued meanwhile (in memory), commits them, and hands the lead to a writer that came since. The others wait for the
batch that takes their change. So one thread of a process at a time waits for the lock (a release wakes every waiter
there, one a process, not all), nobody polls. The batches of different processes take the lock in turn: writers of two
processes never share a batch (a queue file that let one process's batch carry another's changes cost each of those
writers a second turn at the lock to learn its outcome).

The wait has no timeout of its own: the events lock is held only for the disk operations of one batch (or of one
look at the log's end); a process that dies holding it releases it, and a holder stuck in a disk operation holds it
as long as the disk does not answer, as the waiting writers' own syncs would wait.
"""
import contextlib
import os
import threading

import orjson

from service.errors import disk_errors
from service.storage.common.forks import reset_in_forked_child

# A writer's outcome not known yet.
NOT_TOLD = object()


class _Change:
    """One change: its event, its history entry (for the write-ahead log), the temporary to rename over `target` (None:
    unlink `target`)."""

    __slots__ = ("event", "entry", "source", "target")

    def __init__(self, event, entry, source, target):
        self.event, self.entry, self.source, self.target = event, entry, source, target


class _Writer:
    """A writer of this process: its change, whether it leads a batch, its outcome once a batch noted it (None, or an
    error), and what wakes it for either."""

    __slots__ = ("change", "leads", "outcome", "woken")

    def __init__(self, change):
        self.change, self.leads, self.outcome, self.woken = change, False, NOT_TOLD, threading.Event()


class GroupCommit:
    """The group commit of one event log (service.storage.files.events.FileEventLog) in this process."""

    def __init__(self, log):
        self._log = log
        self._forget_threads()
        reset_in_forked_child(self, "_forget_threads")

    def _forget_threads(self):
        """(Also in a forked child, which has none of its parent's threads, and perhaps a lock one of them held.)"""
        self._guard = threading.Lock()
        # org -> the writers of this process waiting for the org's next batch; an org is here while a batch of it forms
        # (its leader waits for the lock, or commits).
        self._forming = {}

    def commit(self, org, new_event, entry, source, target):
        """Commit a change with its event (the org's next seq) and its history entry `entry` in the next batch of this
        process (see the module's doc): `source` renamed over `target` (with no `source`, `target` unlinked). When the
        change fails, neither it nor its event is there. The caller holds `target`'s lock until this returns."""
        mine = _Writer(_Change(new_event, entry, source and str(source), str(target)))
        with self._guard:
            forming = self._forming.get(org)
            if forming is None:
                self._forming[org], mine.leads = [mine], True
            else:
                forming.append(mine)
        if not mine.leads:
            mine.woken.wait()  # set once: told its outcome, or handed the lead
        if mine.leads:
            self._lead(org)
        if mine.outcome is not None:
            raise mine.outcome

    def _lead(self, org):
        """Take the org's lock, commit the changes of this process's writers queued by then (this thread's among
        them), release it, hand the lead on, tell each writer."""
        writers, failed, last = [], {}, None
        log_lock = self._log.lock(org)
        try:
            log_lock.acquire(timeout=-1)
            try:
                writers = self._take_all(org)
                failed, last = self._commit_all(org, [writer.change for writer in writers])
            finally:
                log_lock.release()
        except BaseException as error:  # (the lock not taken, or a batch that failed whole: every writer meets it)
            self._tell(writers or self._take_all(org), lambda change, error=error: error)
            raise
        finally:
            self._hand_on(org)
        self._log.ring()
        self._tell(writers, failed.get)
        if last is not None:
            self._log.checkpoints.committed(org, last)

    def _take_all(self, org):
        """The writers of the org queued by now (the batch's), the next batch's forming from then on."""
        with self._guard:
            writers, self._forming[org] = self._forming[org], []
        return writers

    def _hand_on(self, org):
        """The lead to the first writer that came since the batch was taken, or the org no longer forming."""
        with self._guard:
            waiting = self._forming.pop(org)
            if waiting:
                self._forming[org] = waiting
                waiting[0].leads = True
                waiting[0].woken.set()

    @staticmethod
    def _tell(writers, outcome_of):
        for writer in writers:
            writer.outcome = outcome_of(writer.change)
            writer.woken.set()

    def _commit_all(self, org, changes):
        """Under the lock: commit the changes, in batches of one log segment at most; answer ({change: error} of those
        failed, the last seq committed or None). A change that fails is left out and the rest go on; when the logs
        cannot be appended to or their end not checked, every change not yet put in place fails."""
        pending, failed_changes, last = list(changes), {}, None
        try:
            while pending:
                latest = self._log.recover(org)  # (also cuts what a failure below left of a batch)
                batch = pending[:self._log.room_after(latest)]
                lines = [orjson.dumps({"seq": seq, **change.event._asdict()}) + b"\n"
                         for seq, change in enumerate(batch, latest + 1)]
                with disk_errors():
                    end = self._log.append(org, latest + 1, b"".join(lines))
                    self._log.wal.append(org, latest + 1, lines, [change.entry for change in batch])
                done, failed, error = put_in_place(batch)
                pending = pending[len(done):]
                if done:
                    last = latest + len(done)
                if failed is not None:
                    failed_changes[pending.pop(0)] = error
                    self._log.recover(org)  # cuts the failed change's event and record, and those after it
                else:
                    self._log.verified(org, latest + len(done), *end)
        except Exception as error:  # noqa: BLE001 (a disk error, or the log's end not read: told to each writer)
            failed_changes.update((change, error) for change in pending)
            # The events and records appended whose changes are not in place are cut by the next look at the end.
            with contextlib.suppress(Exception):
                self._log.recover(org)
        return failed_changes, last


def put_in_place(batch):
    """Put the batch's changes in place in seq order until one fails; (those done, the one that failed or None, its
    error). A rename or unlink that fails did nothing."""
    done = []
    for change in batch:
        try:
            with disk_errors():
                if change.source is None:
                    os.unlink(change.target)
                else:
                    os.replace(change.source, change.target)
        except BaseException as error:
            return done, change, error
        done.append(change)
    return done, None, None
