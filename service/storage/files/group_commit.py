"""Group commit between the threads of a process: callers that arrive while a commit is under way wait, and the next
commit takes all of them at once (as a database's log writer does), so that N concurrent changes pay for one sync of
the log, not N syncs one after another.

The first caller with nothing under way leads: it commits batches until its own work is done, then hands the lead to
the first caller still waiting (which goes on the same way) or, when none is, lets the next arrival lead. No thread of
its own, nothing to stop: a process that forks or ends has no committer to look after.
"""
import threading


class Waiting:
    """One caller's work in the queue of its key, then its outcome: `error` (None when it committed)."""

    __slots__ = ("work", "error", "finished", "_ready")

    def __init__(self, work):
        self.work = work
        self.error = None
        self.finished = False
        self._ready = threading.Event()  # set when finished, or when handed the lead


class _Queue:
    __slots__ = ("waiting", "leading")

    def __init__(self):
        self.waiting = []
        self.leading = False


class GroupCommit:
    """Runs `commit_batch(key, batch)` for the waiting work of a key, a batch at a time: it sets the `error` of each
    Waiting that failed and answers those it could not commit in this batch (they go first in the next one)."""

    def __init__(self, commit_batch, batch_limit):
        self._commit_batch = commit_batch
        self._batch_limit = batch_limit
        self._mutex = threading.Lock()
        self._queues = {}

    def run(self, key, work):
        """Have `work` committed with whatever else of `key` is waiting (at most `batch_limit` at once); raise the
        error its commit met."""
        mine = Waiting(work)
        with self._mutex:
            queue = self._queues.setdefault(key, _Queue())
            queue.waiting.append(mine)
            lead = not queue.leading
            queue.leading = True
        if not lead:
            mine._ready.wait()
        if not mine.finished:  # leading from the start, or handed the lead
            self._lead(key, queue, mine)
        if mine.error is not None:
            raise mine.error

    def _lead(self, key, queue, mine):
        try:
            while not mine.finished:
                with self._mutex:
                    batch = queue.waiting[:self._batch_limit]
                    del queue.waiting[:len(batch)]
                left = self._commit(key, batch)
                with self._mutex:
                    queue.waiting[:0] = left
        finally:
            with self._mutex:
                if queue.waiting:
                    queue.waiting[0]._ready.set()  # not finished: it leads
                else:
                    queue.leading = False
                    del self._queues[key]  # the next arrival makes a new queue

    def _commit(self, key, batch):
        """Commit a batch; answer the Waiting left for the next one. A failure of the committer itself (a bug, a
        signal) fails the whole batch: no caller waits for ever."""
        try:
            left = self._commit_batch(key, batch)
        except BaseException as error:
            for waiting in batch:
                waiting.error = waiting.error or error
            left = []
        kept = {id(waiting) for waiting in left}
        for waiting in batch:
            if id(waiting) not in kept:
                waiting.finished = True
                waiting._ready.set()
        return left
