"""Group commit of the file backend's changes with their events, between the threads of every worker process: a
writer queues its change (service.storage.files.commit_queue) and waits; whoever holds the org's events lock next
commits every change queued as one batch: the events appended to the log (service.storage.files.events) and
fdatasynced once, the changes put in place in seq order, their directories synced once each; then each writer learns
its outcome, at once when the batch was its own process's, through its mark otherwise.

In a process, one waiting thread of an org looks for all of them (its lock, every waiting thread's mark); the others
sleep until an outcome comes or the look is theirs.
"""
import contextlib
import secrets
import time

import orjson

from service.errors import StorageFailed, disk_errors
from service.storage.common.disk import LockTimeout
from service.storage.files.commit_queue import (
    NOT_TOLD, QueuedChange, put_in_place, sync_directories)

# How soon a writer waiting for its change's batch looks again at its mark and the log's lock, then twice as long each
# time up to LAST_LOOK: a batch of another process takes 1-3 ms, and a look costs 1 to 4 system calls.
FIRST_LOOK, LAST_LOOK = 0.0002, 0.001
# How long a writer waits for its change's batch before it gives up (StorageBusy, 503), as for any lock.
LOOK_TIMEOUT = 30


class GroupCommit:
    """The group commit of one event log (service.storage.files.events.FileEventLog) in this process."""

    def __init__(self, log):
        self._log = log
        self._rung = log.rung
        # The changes this process's threads wait for (token -> (org, told)), the outcomes found for them, and the orgs
        # for which one of those threads looks (at the log's lock and every waiting thread's mark) for all of them.
        self._awaited, self._outcomes, self._looking = {}, {}, set()

    def commit(self, org, new_event, source, target):
        """Commit a change with its event (the org's next seq) in the next batch (see the module's doc): its commit
        point is `source` renamed over `target` (with no `source`, `target` unlinked). When the change fails, neither
        it nor its event is there. The caller holds `target`'s lock until this returns."""
        mine = QueuedChange(new_event, source and str(source), str(target), secrets.token_hex(8))
        queue = self._log.queue(org)
        with queue.waiting(mine.token) as told, self._awaiting(org, mine.token, told):
            queue.add([mine])
            error = self._outcome(org, queue, mine, told)
        if error is not None:
            raise error

    @contextlib.contextmanager
    def _awaiting(self, org, token, told):
        """A thread of this process waits for the outcome of `token`: a batch of this process tells it at once."""
        with self._rung:
            self._awaited[token] = (org, told)
        try:
            yield
        finally:
            with self._rung:
                del self._awaited[token]
                self._outcomes.pop(token, None)

    def _outcome(self, org, queue, mine, told):
        """The error of a queued change, or None once it committed. One waiting thread of the process looks for all
        of the org's (`_look`); the others sleep until an outcome comes or the look is theirs."""
        deadline = time.monotonic() + LOOK_TIMEOUT
        while True:
            with self._rung:
                if mine.token in self._outcomes:
                    return self._outcomes.pop(mine.token)
                if org in self._looking:
                    if time.monotonic() > deadline:
                        raise LockTimeout()
                    self._rung.wait(LAST_LOOK * 4)  # woken by an outcome, or when the look is free
                    continue
                self._looking.add(org)
            try:
                return self._look(org, queue, mine, told, deadline)
            finally:
                with self._rung:
                    self._looking.discard(org)
                    self._rung.notify_all()

    def _look(self, org, queue, mine, told, deadline):
        """Until the outcome of `mine`: tell the process's waiting threads what their marks say (a batch of another
        process told them), and commit the queue when the org's lock is free."""
        log_lock, retry = self._log.lock(org), FIRST_LOOK
        while True:
            with self._rung:
                if mine.token in self._outcomes:
                    return self._outcomes.pop(mine.token)
                waiting = [(token, look) for token, (of, look) in self._awaited.items() if of == org]
            found = {token: outcome for token, look in waiting if (outcome := look()) is not NOT_TOLD}
            if found:
                with self._rung:  # only for threads still waiting: a mark read after its thread left is not its
                    self._outcomes.update((token, error) for token, error in found.items() if token in self._awaited)
                    self._rung.notify_all()
                continue
            try:
                log_lock.acquire(timeout=0)
            except LockTimeout:
                if time.monotonic() > deadline:
                    raise
                with self._rung:  # woken at once by a batch of this process, else looks again
                    if mine.token not in self._outcomes:
                        self._rung.wait(retry)
                retry = min(2 * retry, LAST_LOOK)
                continue
            try:
                outcome, outcomes = self._lead(org, queue, mine, told)
            finally:
                log_lock.release()
            with self._rung:
                self._outcomes.update((other, error) for other, error in outcomes.items() if other in self._awaited)
            if outcomes:
                self._log.ring()
            return outcome

    def _lead(self, org, queue, mine, told):
        """Under the org's lock: commit what the queue holds; (the outcome of `mine`, {token: error or None} of the
        changes committed or failed)."""
        outcome = told()  # told by a batch that ended before this thread got the lock
        if outcome is not NOT_TOLD:
            return outcome, {}
        changes = queue.take()
        if all(change.token != mine.token for change in changes):
            # Taken by a batch whose leader was killed before it told: its change is there, or it queues again.
            self._log.recover(org)
            if self._log.committed(org, mine.event):
                return sync_directories([mine])[mine.token], {}  # synced again: that batch may not have
            changes.append(mine)
        outcomes = self._commit_queued(org, queue, changes, mine.token)
        for other, error in outcomes.items():
            if other != mine.token:
                queue.tell(other, error)
        return outcomes.get(mine.token, StorageFailed()), outcomes

    def _commit_queued(self, org, queue, changes, token):
        """Commit the changes taken from the queue, whose writers still wait, in batches of one log segment at most;
        answer {token: error or None} of those committed or failed. A change that fails is left out and the rest go
        on; a failing append puts the changes back in the queue, for each writer to meet its own error, but that of
        `token` (this thread's), which meets this one."""
        pending = [change for change in changes if change.token == token or queue.writer_waiting(change.token)]
        outcomes = {}
        while pending:
            latest = self._log.recover(org)
            room = self._log.room_after(latest)
            batch, pending = pending[:room], pending[room:]
            try:
                with disk_errors():
                    self._log.append(org, latest + 1, b"".join(
                        orjson.dumps({"seq": seq, **change.event._asdict()}) + b"\n"
                        for seq, change in enumerate(batch, latest + 1)))
            except BaseException as error:
                self._log.recover(org)  # cuts the events appended: none of their changes committed
                left = batch + pending
                queue.add([change for change in left if change.token != token])
                outcomes.update((change.token, error) for change in left if change.token == token)
                return outcomes
            done, failed, error = put_in_place(batch)
            if failed is not None:
                self._log.recover(org)  # cuts the failed change's event and those after it
                outcomes[failed.token] = error
                pending = batch[len(done) + 1:] + pending
            outcomes.update(sync_directories(done))
            self._log.verified(org, latest + len(done))
        return outcomes
