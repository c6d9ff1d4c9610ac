"""A/B of our upload path between checkouts: the same 500 MB file uploaded in turn to each checkout's service (run by
hand), to measure one change against the code before it without a reference server in the rounds.

Each checkout runs under the shipped gunicorn configuration for the whole benchmark (bench/tus_bench.py's `Ours`:
tus PATCHes, or bench/chunk_bench.py's `Chunks`: the SPEC multipart chunks, in order; with `--in-flight`, its
`ChunksInFlight`: four at once, the completing PATCH then the last to finish). Rounds alternate the order of
the checkouts; each upload is verified by SHA-256 and followed by a sync, outside the timing. Per upload: MB/s, server
CPU seconds per GB (utime+stime of the server's process tree), median PATCH, completing PATCH (ms, and / median). The
first round is a warm-up and left out of the medians. With `--again` the stored media stay, so every round after the
first is answered by deduplication.

    .venv/bin/python bench/ab_bench.py --trees . /path/to/other/checkout [--rounds 7] [--chunks [--in-flight]]
        [--size-mb 500] [--again]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chunk_bench  # noqa: E402
import tus_bench  # noqa: E402
from upload_bench import MB, generate, sha256_seconds  # noqa: E402

GB = 1024 * MB


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", nargs="+", required=True, help="checkouts to compare (the first is the baseline)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--chunk-mb", type=int, default=5)
    parser.add_argument("--chunks", action="store_true", help="the SPEC multipart chunks instead of tus PATCHes")
    parser.add_argument("--in-flight", action="store_true", help="with --chunks: four chunks at once, each on a "
                        "connection of its own (chunk_bench.ChunksInFlight), instead of one after another")
    parser.add_argument("--again", action="store_true", help="keep the stored media: uploads of the same file after "
                        "the first are answered by deduplication")
    options = parser.parse_args()
    client = (chunk_bench.ChunksInFlight if options.in_flight else chunk_bench.Chunks) if options.chunks \
        else tus_bench.Ours
    size, chunk = options.size_mb * MB, options.chunk_mb * MB
    with tempfile.TemporaryDirectory(prefix="ab-bench-") as temp:
        temp = Path(temp)
        source = temp / "source.mp4"
        generate(source, size)
        sha = sha256_seconds(source)[0]
        trees = [str(Path(tree).resolve()) for tree in options.trees]
        servers = [client(temp, name=f"tree{number}", root=tree, again=options.again)
                   for number, tree in enumerate(trees)]
        results = {tree: [] for tree in trees}
        try:
            for round_number in range(options.rounds):
                order = list(zip(trees, servers))
                for tree, server in (order if round_number % 2 == 0 else order[::-1]):
                    cpu_before, start = tus_bench.cpu_seconds(server.process.pid), time.perf_counter()
                    latencies, verify = server.upload(source, size, chunk, sha)
                    elapsed = time.perf_counter() - start
                    cpu = tus_bench.cpu_seconds(server.process.pid) - cpu_before
                    verify()
                    os.sync()
                    median = statistics.median(latencies)
                    figures = (size / MB / elapsed, cpu / (size / GB), median * 1000, latencies[-1] / median,
                               latencies[-1] * 1000)
                    results[tree].append(figures)
                    print(f"round {round_number + 1}, {tree}: {figures[0]:.0f} MB/s, {figures[1]:.2f} CPU s/GB, "
                          f"median PATCH {figures[2]:.2f} ms, completing PATCH {figures[4]:.2f} ms "
                          f"({figures[3]:.2f} x the median)", flush=True)
        finally:
            for server in servers:
                server.stop()
    print(f"\nmedians of rounds 2-{options.rounds}:")
    baseline = statistics.median(figures[0] for figures in results[trees[0]][1:])
    for tree in trees:
        kept = results[tree][1:]
        throughput = statistics.median(figures[0] for figures in kept)
        print(f"  {tree}: {throughput:.0f} MB/s ({throughput / baseline:.2f} x the first), "
              f"{statistics.median(figures[1] for figures in kept):.2f} CPU s/GB, "
              f"median PATCH {statistics.median(figures[2] for figures in kept):.2f} ms, "
              f"completing PATCH {statistics.median(figures[4] for figures in kept):.2f} ms "
              f"({statistics.median(figures[3] for figures in kept):.2f} x the median)")


if __name__ == "__main__":
    main()
