"""`wis import` and `wis export` of one org (CONTRACT 10) against `tar czf` of the same data directory, in the same run.

An archive of `--processes` processes (one step each, every step's image one of the media files, round-robin) and
`--media-mb` MB of incompressible PNG media in files of `--file-mb` MB is made once with service.interface.archive. Each round
starts an empty server under the shipped gunicorn configuration (file backend), then times:
- `wis import` of that archive into it (media uploaded, paths rewritten, objects created);
- `wis export` of the org it now holds into a new archive, and `tar czf` of the server's data directory, in
  alternating order.
Each timing is of the `wis` or `tar` process run to its end: MB/s of media (the same bytes for all three), the
client's CPU seconds (the `wis` or `tar` process) and the server's (gunicorn's process tree, not for tar). The first
round is a warm-up, left out of the medians.

    .venv/bin/python bench/archive_bench.py [--processes 1000] [--media-mb 200] [--file-mb 1] [--rounds 4]
"""
import argparse
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tus_bench import cpu_seconds  # noqa: E402
from upload_bench import MB, TOKEN, start_ours, stop  # noqa: E402

from service.interface.archive import ArchiveWriter  # noqa: E402

WIS = Path(sys.executable).with_name("wis")
PNG = b"\x89PNG\r\n\x1a\n"


def make_archive(path, processes, media_mb, file_mb):
    """The archive every round imports; the media's total size in bytes."""
    files = max(1, media_mb // file_mb)
    paths = [f"/api/v1/images/{number:016x}-frame_{number}.png" for number in range(files)]
    with ArchiveWriter(path, "default") as writer:
        for number in range(processes):
            process_id = f"process_{number:05d}"
            writer.add_object("processes", process_id, {
                "id": process_id, "name": f"Process {number}",
                "steps": [{"id": "step_1", "name": "Step 1", "primaryImage": {"path": paths[number % files]}}]})
        for media_path in paths:
            data = PNG + os.urandom(file_mb * MB - len(PNG))
            writer.add_media(media_path, io.BytesIO(data), len(data))
    return files * file_mb * MB


def timed(argv, server=None):
    """Run a command to its end: (seconds, its CPU seconds, the server's CPU seconds meanwhile, exit status)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = cpu_seconds(server.pid) if server else 0.0
    start = time.perf_counter()
    status = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_cpu = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    server_cpu = cpu_seconds(server.pid) - server_before if server else 0.0
    if status.returncode != 0:
        print(f"  {' '.join(map(str, argv[:2]))} exited with {status.returncode}: {status.stderr.strip()[-300:]}")
    return elapsed, client_cpu, server_cpu, status.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=1000)
    parser.add_argument("--media-mb", type=int, default=200)
    parser.add_argument("--file-mb", type=int, default=1, help="size of each media file (at most 8, an image's limit)")
    parser.add_argument("--rounds", type=int, default=4)
    options = parser.parse_args()
    results = {"import": [], "export": [], "tar czf": []}
    with tempfile.TemporaryDirectory(prefix="archive-bench-") as temp:
        temp = Path(temp)
        seed = temp / "seed.tar.gz"
        media_bytes = make_archive(seed, options.processes, options.media_mb, options.file_mb)
        print(f"{options.processes} processes, {media_bytes / MB:.0f} MB of media; "
              f"archive {seed.stat().st_size / MB:.0f} MB", flush=True)
        for round_number in range(options.rounds):
            data_dir = temp / f"data-{round_number}"
            process, url = start_ours(data_dir)
            try:
                server = ["--url", url, "--token", TOKEN, "--no-progress"]
                figures = {"import": timed([WIS, "import", seed, *server], process)}
                jobs = {"export": lambda: timed([WIS, "export", temp / "out.tar.gz", *server], process),
                        "tar czf": lambda: timed(["tar", "czf", temp / "data.tar.gz", "-C", temp, data_dir.name])}
                for name in (list(jobs) if round_number % 2 == 0 else list(jobs)[::-1]):
                    os.sync()
                    figures[name] = jobs[name]()
            finally:
                stop(process)
            for name, (elapsed, client_cpu, server_cpu, status) in figures.items():
                if status == 0:
                    results[name].append((media_bytes / MB / elapsed, client_cpu, server_cpu))
                print(f"round {round_number + 1}, {name}: {elapsed:.2f} s, {media_bytes / MB / elapsed:.1f} MB/s, "
                      f"client {client_cpu:.2f} CPU s, server {server_cpu:.2f} CPU s"
                      + ("" if status == 0 else " (failed)"), flush=True)
            shutil.rmtree(data_dir, ignore_errors=True)
    print(f"\nmedians of rounds 2-{options.rounds} (media MB/s; CPU seconds of the client, of the server):")
    for name, kept in results.items():
        kept = kept[1:]
        if not kept:
            print(f"  {name}: no successful round after the warm-up")
            continue
        print(f"  {name}: {statistics.median(f[0] for f in kept):.1f} MB/s, "
              f"client {statistics.median(f[1] for f in kept):.2f} CPU s, "
              f"server {statistics.median(f[2] for f in kept):.2f} CPU s")


if __name__ == "__main__":
    main()
