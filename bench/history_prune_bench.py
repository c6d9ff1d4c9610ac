"""What keeping a long history costs a write on the file backend (run by hand, not a test).

Saves one station again and again (a new revision each time, its history entry written and the entry that leaves the
kept revisions removed) with `--keep` revisions kept, once the history is that long, and prints the CPU and wall
milliseconds per save. `--baseline-tree DIR` runs the same in another checkout, alternated with this one in
subprocesses, and prints each round's ratio.

    .venv/bin/python bench/history_prune_bench.py [--keep 100] [--saves 400] [--rounds 4] [--baseline-tree DIR]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MEASURE = """
import resource, sys, time
from service.domain.stations import upsert_station
from service.storage.files import FileRepository
keep, saves, data_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
repo = FileRepository(data_dir, history_revisions=keep)
for number in range(keep + 20):
    upsert_station(repo, "default", {"id": "st_1", "name": f"Station {number}"})
before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for number in range(saves):
    upsert_station(repo, "default", {"id": "st_1", "name": f"Station again {number}"})
after, ended = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
print(cpu / saves * 1000, (ended - started) / saves * 1000)
"""


def measure(tree, keep, saves):
    """(CPU ms, wall ms) per save of the code in `tree`, in a fresh data directory."""
    with tempfile.TemporaryDirectory(prefix="wis-prune-") as data_dir:
        # -P: the code measured is `tree`'s, whatever the current directory holds.
        output = subprocess.run([sys.executable, "-P", "-c", MEASURE, str(keep), str(saves), data_dir], check=True,
                                capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)}).stdout
    cpu, wall = map(float, output.split())
    return cpu, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=int, default=100, help="revisions kept (WIS_HISTORY_REVISIONS)")
    parser.add_argument("--saves", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--baseline-tree", type=Path)
    args = parser.parse_args()
    trees = {"ours": ROOT} | ({"baseline": args.baseline_tree} if args.baseline_tree else {})
    figures = {name: [] for name in trees}
    for number in range(args.rounds + 1):  # the first round warms the disk and the caches up, and is not counted
        order = list(trees.items()) if number % 2 == 0 else list(trees.items())[::-1]
        for name, tree in order:
            cpu, wall = measure(tree, args.keep, args.saves)
            if number:
                figures[name].append((cpu, wall))
                print(f"round {number} {name:8} {cpu:.3f} CPU ms, {wall:.3f} ms per save", flush=True)
    print(f"\n{args.keep} revisions kept, medians of {args.rounds} rounds")
    for name, rounds in figures.items():
        print(f"  {name:8} {statistics.median(r[0] for r in rounds):.3f} CPU ms, "
              f"{statistics.median(r[1] for r in rounds):.3f} ms per save")
    if args.baseline_tree:
        ratios = [ours[0] / base[0] for ours, base in zip(figures["ours"], figures["baseline"])]
        print(f"  CPU per save against the baseline: {statistics.median(ratios):.2f} x "
              f"({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
