"""Free 127.0.0.1 ports for the servers and engines the tests start.

Under pytest-xdist each worker takes its ports from a range of its own (gw0 from 10000, gw1 from 10600, ...), so two
workers never hand out the same port between one's check and its server's bind. The ranges lie below the kernel's
ephemeral ports (32768 and up, taken by outgoing connections) and below the SeaweedFS admin ports of engines.py
(15000 and up). A port is handed out only when it can be bound, and is not handed out again before the rest of the
range has been.
"""
import itertools
import os
import random
import socket

FIRST_PORT = 10000
PORTS_PER_WORKER = 600
WORKER_RANGES = 8


def _worker_index():
    """0 for gw0 (and for a run without xdist), 1 for gw1, ..."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker.removeprefix("gw")) % WORKER_RANGES


def _candidates():
    """This process's range, from a random place in it (two runs side by side seldom start at the same port)."""
    low = FIRST_PORT + _worker_index() * PORTS_PER_WORKER
    ports = list(range(low, low + PORTS_PER_WORKER))
    start = random.randrange(PORTS_PER_WORKER)
    return itertools.cycle(ports[start:] + ports[:start])


_ports = _candidates()


def port_is_free(port):
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port():
    """A port of this worker's range that nothing listens on or was connected through lately."""
    for _ in range(PORTS_PER_WORKER):
        port = next(_ports)
        if port_is_free(port):
            return port
    raise RuntimeError(f"no free port in this worker's range of {PORTS_PER_WORKER} from "
                       f"{FIRST_PORT + _worker_index() * PORTS_PER_WORKER}")
