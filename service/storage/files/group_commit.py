"""Group commit of the file backend's changes with their events, between the threads of every worker process: whoever
holds the org's events lock commits every change queued (service.storage.files.commit_queue) as one batch: the events
appended to the log (service.storage.files.events) and fdatasynced once, the changes put in place in seq order, their
directories synced once each; then each writer learns its outcome, in memory when it waits in the leader's process,
through its mark otherwise.

A writer that finds the lock free leads at once, taking along whatever the queue holds: alone, it pays for nothing but
its own commit. One that finds it taken queues its change and sleeps until told. In each process one thread of the org
(its looker, started for as long as writers of the process wait) waits for the lock in the kernel, which wakes it
when the lock is released: it then tells the process's waiting writers what their marks say (another process's batch
committed them) and commits what is still queued. Nobody polls: a waiting writer is woken once, by its outcome.
"""
import os
import secrets
import threading
import weakref

import orjson

from service.errors import StorageFailed, disk_errors
from service.storage.common.disk import LockTimeout
from service.storage.files.commit_queue import NOT_TOLD, QueuedChange, put_in_place, sync_directories

# How long a writer waits for its change's batch before it gives up (LockTimeout: 503), as for any lock.
LOOK_TIMEOUT = 30
# How long a looker with nobody waiting stays for the next (starting a thread costs more than waking one).
LOOKER_IDLE_SECONDS = 10


class _Waiter:
    """A writer of this process waiting for its queued change's outcome: `told` reads its mark."""

    __slots__ = ("change", "told", "outcome", "done")

    def __init__(self, change, told):
        self.change, self.told = change, told
        self.outcome = None
        self.done = threading.Event()


_every_group_commit = weakref.WeakSet()


def _after_fork_in_child():
    for group_commit in list(_every_group_commit):
        group_commit._forget_threads()


os.register_at_fork(after_in_child=_after_fork_in_child)


class GroupCommit:
    """The group commit of one event log (service.storage.files.events.FileEventLog) in this process."""

    def __init__(self, log):
        self._log = log
        self._forget_threads()
        _every_group_commit.add(self)

    def _forget_threads(self):
        """(Also in a forked child, which has none of its parent's threads: its waiters and lookers are not there.)"""
        self._guard = threading.Lock()
        # org -> {token: _Waiter} of this process's writers waiting for their batch; the orgs whose looker runs, and
        # what wakes an idle one.
        self._waiting, self._looking = {}, set()
        self._wanted = threading.Condition(self._guard)

    def commit(self, org, new_event, source, target):
        """Commit a change with its event (the org's next seq) in the next batch (see the module's doc): its commit
        point is `source` renamed over `target` (with no `source`, `target` unlinked). When the change fails, neither
        it nor its event is there. The caller holds `target`'s lock until this returns."""
        mine = QueuedChange(new_event, source and str(source), str(target), secrets.token_hex(8))
        queue, log_lock = self._log.queue(org), self._log.lock(org)
        try:
            log_lock.acquire(timeout=0)
        except LockTimeout:
            error = self._queued(org, queue, mine)
        else:
            try:
                outcomes = self._commit_queued(org, queue, [*queue.take(), mine], {mine.token})
                self._tell(org, queue, outcomes, leader=mine.token)
            finally:
                log_lock.release()
            if outcomes:
                self._log.ring()
            error = outcomes.get(mine.token, StorageFailed())
        if error is not None:
            raise error

    def _queued(self, org, queue, mine):
        """Queue `mine` and wait for the batch that commits it (led by this process's looker or by another process);
        its error, or None once it committed."""
        with queue.waiting(mine.token) as told:
            waiter = _Waiter(mine, told)
            # Known to the looker once queued: a batch that takes it before tells its mark, which the looker reads.
            queue.add([mine])
            with self._guard:
                self._waiting.setdefault(org, {})[mine.token] = waiter
                start_looking = org not in self._looking
                self._looking.add(org)
                self._wanted.notify_all()
            try:
                if start_looking:
                    self._start_looker(org, queue)
                waiter.done.wait(LOOK_TIMEOUT)
            finally:
                with self._guard:
                    waiting = self._waiting[org]
                    del waiting[mine.token]
                    if not waiting:
                        del self._waiting[org]
        if not waiter.done.is_set():
            raise LockTimeout()  # its line stays in the queue, to be dropped: nobody waits for it any more
        return waiter.outcome

    def _start_looker(self, org, queue):
        try:
            threading.Thread(target=self._look, args=(org, queue), name="group-commit", daemon=True).start()
        except BaseException:
            with self._guard:  # (no thread left to start: the next waiting writer tries again)
                self._looking.discard(org)
            raise

    def _look(self, org, queue):
        """The org's looker: while writers of this process wait for their batch, wait for the org's lock and lead;
        with none waiting for LOOKER_IDLE_SECONDS, end."""
        log_lock = self._log.lock(org)
        try:
            while True:
                with self._guard:
                    while not self._waiting.get(org):
                        if not self._wanted.wait(LOOKER_IDLE_SECONDS) and not self._waiting.get(org):
                            self._looking.discard(org)
                            return
                log_lock.acquire(timeout=-1)
                try:
                    committed = self._lead(org, queue)
                finally:
                    log_lock.release()
                if committed:
                    self._log.ring()
        except BaseException as error:  # noqa: BLE001 (a disk refusing the lock's file: the waiting writers meet it)
            with self._guard:
                self._looking.discard(org)
                waiters = list(self._waiting.get(org, {}).values())
            for waiter in waiters:
                waiter.outcome = error
                waiter.done.set()

    def _lead(self, org, queue):
        """Under the org's lock: tell this process's waiting writers what their marks say, and commit the queue when
        one of them is still untold. True when this committed a change."""
        with self._guard:
            waiting = list(self._waiting.get(org, {}).values())
        untold = {}
        for waiter in waiting:
            if (outcome := waiter.told()) is NOT_TOLD:
                untold[waiter.change.token] = waiter.change
            else:
                waiter.outcome = outcome
                waiter.done.set()
        if not untold:
            return False
        changes = queue.take()
        outcomes = {}
        taken = {change.token for change in changes}
        if lost := [change for token, change in untold.items() if token not in taken]:
            # Taken by a batch whose leader was killed before it told: committed, or queued again.
            self._log.recover(org)
            for change in lost:
                if self._log.committed(org, change.event):
                    outcomes.update(sync_directories([change]))  # synced again: that batch may not have
                else:
                    changes.append(change)
        outcomes.update(self._commit_queued(org, queue, changes, set(untold)))
        self._tell(org, queue, outcomes)
        return bool(outcomes)

    def _tell(self, org, queue, outcomes, leader=None):
        """Tell each writer of a batch its outcome (before the lock is released, so that a looker it wakes finds it
        told): in memory when it waits in this process, through its mark otherwise; not `leader`, who led it."""
        with self._guard:
            waiting = dict(self._waiting.get(org, {}))
        for token, error in outcomes.items():
            if (waiter := waiting.get(token)) is not None:
                waiter.outcome = error
                waiter.done.set()
            elif token != leader:
                queue.tell(token, error)

    def _commit_queued(self, org, queue, changes, ours):
        """Commit the changes taken from the queue, whose writers still wait, in batches of one log segment at most;
        answer {token: error or None} of those committed or failed. `ours`: the tokens of this process's writers (so
        waiting). A change that fails is left out and the rest go on; a failing append puts the other processes'
        changes back in the queue, for each writer to meet its own error, and answers it for ours."""
        pending = [change for change in changes if change.token in ours or queue.writer_waiting(change.token)]
        outcomes = {}
        while pending:
            latest = self._log.recover(org)
            room = self._log.room_after(latest)
            batch, pending = pending[:room], pending[room:]
            try:
                with disk_errors():
                    end = self._log.append(org, latest + 1, b"".join(
                        orjson.dumps({"seq": seq, **change.event._asdict()}) + b"\n"
                        for seq, change in enumerate(batch, latest + 1)))
            except BaseException as error:
                self._log.recover(org)  # cuts the events appended: none of their changes committed
                left = batch + pending
                queue.add([change for change in left if change.token not in ours])
                outcomes.update((change.token, error) for change in left if change.token in ours)
                return outcomes
            done, failed, error = put_in_place(batch)
            if failed is not None:
                self._log.recover(org)  # cuts the failed change's event and those after it
                outcomes[failed.token] = error
                pending = batch[len(done) + 1:] + pending
            outcomes.update(sync_directories(done))
            self._log.verified(org, latest + len(done), *(end if failed is None else ()))
        return outcomes
