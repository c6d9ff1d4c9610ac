"""Group commit of the file backend's changes with their events, between the threads of every worker process: whoever
holds the org's events lock commits every change queued (service.storage.files.commit_queue) as one batch: the events
appended to the log (service.storage.files.events) and fdatasynced once, then the changes put in place in seq order.
The batch's leader syncs their directories once the lock is released (once each), then tells its process's writers
of the batch: the lock is held for one sync a batch, not two. (A power cut may then undo the rename of a change whose
event is in the log, not yet acknowledged: the first look at the log after a reboot puts it in place from its
history entry, service.storage.files.reboot_check.)

A writer that finds the lock free leads at once, taking along whatever the queue holds: alone, it pays for nothing but
its own commit. One that finds it taken queues its change and waits: for a batch of its process to note its outcome
(in memory), or for the lock, one thread of a process at a time, in the kernel, which wakes it when the lock is
released. Then its change has committed in a batch before (its document is at its revision), or failed there (its
process's leader noted it), or it leads the next batch itself. Nobody polls, and nothing is written to tell a writer
its outcome.

The wait has no timeout of its own: the events lock is held only for the disk operations of one batch (or of one
look at the log's end); a process that dies holding it releases it, and a holder stuck in a disk operation holds it
as long as the disk does not answer, as the waiting writers' own syncs would wait. (A bounded wait polls the lock:
that, and a thread of each process waiting for the lock on behalf of the others, cost the waiting writers more CPU
than their commits.)
"""
import os
import secrets
import threading
import weakref

import orjson

from service.errors import StorageFailed, disk_errors
from service.storage.common.disk import LockTimeout, fsync_directory
from service.storage.files.commit_queue import QueuedChange, put_in_place

# A waiting writer's outcome not known yet (when its turn comes, it leads).
NOT_TOLD = object()


class _Batch:
    """What a batch did ({token: error} of the changes that failed, {token: folder} of those put in place), and its
    folders' syncs once its leader made them (synced set; {folder: error})."""

    def __init__(self, failed, placed):
        self.failed, self.placed = failed, placed
        self.synced, self.sync_errors = threading.Event(), {}

    def sync(self):
        """Once the lock is released, for the batch's leader (or finder): sync each folder where the batch put changes
        in place, once."""
        try:
            for directory in set(self.placed.values()):
                try:
                    with disk_errors():
                        fsync_directory(directory)
                except BaseException as error:  # (the change is in place with its event, as a failed fsync leaves it)
                    self.sync_errors[directory] = error
        finally:
            self.synced.set()

    def outcome(self, change):
        """The outcome of `change` once its folder is synced: None (committed) or an error."""
        if change.token not in self.placed:
            return self.failed.get(change.token, StorageFailed())
        self.synced.wait()
        return self.sync_errors.get(self.placed[change.token])


class _Waiter:
    """A writer of this process waiting for its batch: its org and change, what wakes it, its outcome once a batch of
    this process noted it (an error, or the _Batch that put it in place, whose folders' syncs it waits for), or the
    turn's holder found it put in place by another process's batch (a _Batch of those it found)."""

    __slots__ = ("org", "change", "woken", "outcome")

    def __init__(self, org, change):
        self.org, self.change, self.woken, self.outcome = org, change, threading.Event(), NOT_TOLD


_every_group_commit = weakref.WeakSet()
os.register_at_fork(after_in_child=lambda: [group._forget_threads() for group in list(_every_group_commit)])


class GroupCommit:
    """The group commit of one event log (service.storage.files.events.FileEventLog) in this process."""

    def __init__(self, log):
        self._log = log
        self._forget_threads()
        _every_group_commit.add(self)

    def _forget_threads(self):
        """(Also in a forked child, which has none of its parent's threads, and perhaps a lock one of them held.)"""
        self._guard = threading.Lock()
        # This process's writers waiting for their batch (token -> _Waiter), and the orgs for whose lock one of them
        # waits (its turn).
        self._waiting, self._turns = {}, set()

    def commit(self, org, new_event, source, target):
        """Commit a change with its event (the org's next seq) in the next batch (see the module's doc): its commit
        point is `source` renamed over `target` (with no `source`, `target` unlinked). When the change fails, neither
        it nor its event is there. The caller holds `target`'s lock until this returns."""
        mine = QueuedChange(new_event, source and str(source), str(target), secrets.token_hex(8))
        queue, log_lock = self._log.queue(org), self._log.lock(org)
        try:
            log_lock.acquire(timeout=0)
        except LockTimeout:
            outcome = self._queued(org, queue, log_lock, mine)
        else:
            try:
                batch = self._lead(org, queue, mine)
            finally:
                log_lock.release()
            self._log.ring()
            batch.sync()
            outcome = batch
        if isinstance(outcome, _Batch):  # put in place (whoever syncs its folder: that batch's leader or finder)
            outcome = outcome.outcome(mine)
        if outcome is not None:
            raise outcome

    def _queued(self, org, queue, log_lock, mine):
        """Queue `mine` and wait: for a batch of this process to note its outcome, or for the org's lock, one thread
        of the process at a time (the kernel wakes every waiter of a lock released: one a process, not all)."""
        mine.writer = self._log.marks.mine()
        waiter = _Waiter(org, mine)
        with self._guard:
            self._waiting[mine.token] = waiter
        try:
            queue.add([mine])
            outcome = self._wait_turn(waiter)
            if outcome is NOT_TOLD:
                found = batch = None
                try:
                    log_lock.acquire(timeout=-1)
                    try:
                        found, outcome = self._found(org, waiter)
                        if outcome is NOT_TOLD:
                            outcome = batch = self._lead(org, queue, mine)
                    finally:
                        log_lock.release()
                finally:
                    self._end_turn(waiter)
                if batch is not None:
                    self._log.ring()
                for each in (found, batch):
                    if each is not None:
                        each.sync()
        finally:
            with self._guard:
                del self._waiting[mine.token]
        return outcome

    def _wait_turn(self, waiter):
        """The outcome of the waiter's change once a batch of this process noted it; or NOT_TOLD once it is its turn
        to wait for its org's lock. Woken only for either."""
        while True:
            with self._guard:
                if waiter.outcome is not NOT_TOLD:
                    return waiter.outcome
                if waiter.org not in self._turns:
                    self._turns.add(waiter.org)
                    return NOT_TOLD
                waiter.woken.clear()
            waiter.woken.wait()

    def _end_turn(self, waiter):
        """Pass the turn to one writer of the org still waiting without an outcome."""
        with self._guard:
            self._turns.discard(waiter.org)
            after = next((other for other in self._waiting.values()
                          if other is not waiter and other.org == waiter.org and other.outcome is NOT_TOLD), None)
            if after is not None:
                after.woken.set()

    def _found(self, org, waiter):
        """Under the lock, for the turn's holder: (a _Batch of the changes of this process's waiting writers that
        another process's batch put in place, or None; the outcome of the holder's change, NOT_TOLD when it is in
        neither a batch before nor that). Those are settled for each of their writers at once, rather than each
        taking the lock in turn to find its own: they wait for the holder to sync their folders, once each, as a
        batch's leader does."""
        with self._guard:
            untold = [other for other in self._waiting.values() if other.org == org and other.outcome is NOT_TOLD]
        committed = [other for other in untold if self._log.committed(org, other.change.event)]
        placed = {other.change.token: os.path.dirname(other.change.target) for other in committed}
        found = _Batch({}, placed) if committed else None
        with self._guard:
            for other in committed:
                other.outcome = found
                other.woken.set()
            return found, waiter.outcome

    def _lead(self, org, queue, mine):
        """Under the lock: commit what the queue holds with `mine` (still queued, or not: never queued, failed in a
        batch before, or taken by a leader killed before it put it in place), and tell this process's writers of it
        (the batch itself for those put in place: they wait for its folders' syncs); the _Batch."""
        changes = queue.take()
        if all(change.token != mine.token for change in changes):
            changes.append(mine)
        batch = _Batch(*self._commit_queued(org, queue, changes, mine.token))
        with self._guard:
            for token in batch.failed.keys() | batch.placed.keys():
                if token != mine.token and (waiter := self._waiting.get(token)) is not None:
                    waiter.outcome = batch.failed.get(token, batch)
                    waiter.woken.set()
        return batch

    def _commit_queued(self, org, queue, changes, token):
        """Commit the changes, in batches of one log segment at most, but those whose writer's process is gone;
        answer ({token: error} of those failed, {token: its folder} of those put in place). A change that fails is
        left out and the rest go on; a failing append puts the changes back in the queue, for each writer to meet its
        own error, but that of `token` (this thread's), which meets this one."""
        alive = {}  # a process's mark, looked at once a batch

        def waited_for(change):
            if change.token == token:
                return True
            if change.writer not in alive:
                alive[change.writer] = self._log.marks.alive(change.writer)
            return alive[change.writer]

        pending = [change for change in changes if waited_for(change)]
        failed_changes, placed = {}, {}
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
                queue.add([change for change in left if change.token != token])
                failed_changes[token] = error
                return failed_changes, placed
            done, failed, error = put_in_place(batch)
            if failed is not None:
                self._log.recover(org)  # cuts the failed change's event and those after it
                failed_changes[failed.token] = error
                pending = batch[len(done) + 1:] + pending
            placed.update((change.token, os.path.dirname(change.target)) for change in done)
            self._log.verified(org, latest + len(done), *(end if failed is None else ()))
        return failed_changes, placed

