"""A test's starting state from a snapshot (CONTRACT 12, issue 23): `POST /_test/restore` of a snapshot of
`--processes` processes and `--media-mb` MB of media, against `POST /_test/reset` of the same state, in the same run.

The embedded server of the pytest fixtures (service.testing.ThreadedServer, file backend, a temporary data directory)
is filled once over the API: `--media-mb` MB of incompressible PNG images in files of `--file-mb` MB, and the processes
(one step each, its image one of those files, round-robin). `POST /_test/snapshot` of it is kept. Then, each round,
the state is restored untimed, and in alternating order one of
- `POST /_test/reset`: what the `wis_clean` fixture does before a test (the full state emptied);
- `POST /_test/restore` of the snapshot: what the `wis_snapshot` marker does instead (the full state replaced);
is timed from the request to its answer, after a restore that puts the full state back. `POST /_test/snapshot` is
timed too. The first round is a warm-up, left out of the medians. The process's CPU seconds (client and server
threads both) are reported beside the wall-clock seconds.

    .venv/bin/python bench/snapshot_bench.py [--processes 100] [--media-mb 20] [--file-mb 1] [--rounds 6]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from service.client import Client
from service.testing import ThreadedServer

MB = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n"


def fill(server, processes, media_mb, file_mb, directory):
    """Fill the server over the API; the media's total bytes."""
    files = max(1, media_mb // file_mb)
    with Client(server.url, server.token) as client:
        paths = []
        for number in range(files):
            image = Path(directory) / f"frame_{number}.png"
            image.write_bytes(PNG + os.urandom(file_mb * MB - len(PNG)))
            paths.append(client.upload(image))
        for number in range(processes):
            client.create_process({"id": f"process_{number:05d}", "name": f"Process {number}",
                                   "steps": [{"id": "step_1", "primaryImage": {"path": paths[number % files]}}]})
    return files * file_mb * MB


def timed(call):
    """(wall-clock seconds, CPU seconds of this process) of `call()`."""
    cpu, start = time.process_time(), time.perf_counter()
    call()
    return time.perf_counter() - start, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=100)
    parser.add_argument("--media-mb", type=int, default=20)
    parser.add_argument("--file-mb", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    options = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory, ThreadedServer() as server:
        media = fill(server, options.processes, options.media_mb, options.file_mb, directory)
        snapshot = server.snapshot()
        print(f"state: {options.processes} processes, {media / MB:.0f} MB of media; snapshot {len(snapshot) / MB:.1f} MB",
              flush=True)
        results = {"reset": [], "restore": [], "snapshot": []}
        calls = {"reset": server.reset, "restore": lambda: server.restore(snapshot),
                 "snapshot": server.snapshot}
        for number in range(options.rounds + 1):
            order = ["reset", "restore", "snapshot"] if number % 2 else ["restore", "reset", "snapshot"]
            for name in order:
                server.restore(snapshot)  # the full state, whatever the last call left
                seconds, cpu = timed(calls[name])
                if number:  # round 0 warms up
                    results[name].append((seconds, cpu))
            print(f"round {number}{' (warm-up)' if not number else ''}: "
                  + ", ".join(f"{name} {results[name][-1][0]:.3f} s" if number else name for name in order),
                  flush=True)
        print(f"\nmedians of {options.rounds} rounds (wall-clock s / CPU s of client and server):")
        for name, timings in results.items():
            print(f"  {name:9} {statistics.median(t[0] for t in timings):.3f} s / "
                  f"{statistics.median(t[1] for t in timings):.3f} s")
        return 0


if __name__ == "__main__":
    sys.exit(main())
