"""When a process sweeps expired streams: the first request it serves, then at most every SWEEP_INTERVAL_SECONDS."""
import threading

# Each process sweeps expired streams at most this often (besides the first request it serves, and `wis gc`).
SWEEP_INTERVAL_SECONDS = 300


class SweepSchedule:
    """Shared by the threads of a worker: `due()` is True for exactly one caller per interval."""

    def __init__(self, clock):
        self._clock = clock
        # Due at once: the first request a process serves sweeps what expired while it was down.
        self._next_sweep = clock()
        self._lock = threading.Lock()

    def due(self):
        with self._lock:
            now = self._clock()
            if now < self._next_sweep:
                return False
            self._next_sweep = now + SWEEP_INTERVAL_SECONDS
            return True
