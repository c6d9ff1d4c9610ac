"""The blocks of a tus PATCH body written by one thread and hashed by another while the request's thread receives the
next block: receiving (recv_into), writing (pwrite, early writeback) and hashing (OpenSSL's SHA-256) all release the
GIL, so the three overlap instead of following one another.

Tried on the multipart chunk path too and left out there: its request thread parses the body in Python (werkzeug's
decoder), which holds the GIL the writer thread needs between its calls; it cost 0.9 s more server CPU per GB and 8 %
of the throughput (500 MB in 5 MB chunks, medians of 5 alternated runs)."""
import queue
import threading

# Blocks waiting for each thread: with the one it works on and the one being received, a few blocks are held at most,
# so memory stays bounded whatever the body's size.
QUEUED = 1
# A block smaller than this, while no thread runs, is consumed in the caller's thread: a thread costs 0.1-0.2 ms to
# start and join, more than writing and hashing a small block, so a small body never starts one.
INLINE_LIMIT = 256 * 1024


class WriteBehind:
    """Runs every one of `consumers` (`consume(block)`) on every block handed to `put`, in order, each in a thread of
    its own started by the first large block: the writing and the hashing of a block go on side by side, and beside
    the receiving of the next. A failure of a consumer is raised by the next `put` or by `drain`, and the blocks after
    it are dropped."""

    def __init__(self, consumers, name):
        self._consumers = consumers
        self._name = name
        self._queues = self._threads = self._failure = None
        # Set at the first failure and kept: the blocks after it are dropped even once the failure has been raised.
        self._failed = False

    def put(self, block):
        self._raise_failure()
        if self._threads is None and len(block) < INLINE_LIMIT:
            for consume in self._consumers:
                consume(block)
            return
        if self._threads is None:
            self._queues = [queue.Queue(maxsize=QUEUED) for _ in self._consumers]
            self._threads = [threading.Thread(target=self._run, args=(consume, blocks), name=self._name, daemon=True)
                             for consume, blocks in zip(self._consumers, self._queues)]
            for thread in self._threads:
                thread.start()
        for blocks in self._queues:
            blocks.put(block)

    def _run(self, consume, blocks):
        while (block := blocks.get()) is not None:
            if not self._failed:
                try:
                    consume(block)
                except BaseException as exc:  # handed to the request's thread, which raises it
                    self._failure, self._failed = exc, True

    def drain(self):
        """Wait until every block handed to `put` is consumed; raise the failure of one, if any."""
        if self._threads is not None:
            for blocks in self._queues:
                blocks.put(None)
            for thread in self._threads:
                thread.join()
            self._threads = None
        self._raise_failure()

    def _raise_failure(self):
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
