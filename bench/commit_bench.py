"""The file backend's write path alone (run by hand, not a test): worker processes, each with threads, saving
documents of one org through FileRepository, as gunicorn's workers do, without HTTP or GraphQL in the way.

Each thread saves its own process (the benchmark's 60 KB payload, a new name each time: every save a new revision,
its history entry, its event) for `--seconds`; each process reports its saves and its CPU seconds (user + system,
getrusage), so a figure is saves per second of the whole and CPU ms per save. `--baseline-tree DIR` measures the code
of another checkout in the same run, the two alternated run by run after a discarded warm-up run; medians of the runs
and of each run's own ratio.

    .venv/bin/python bench/commit_bench.py [--processes 3] [--threads 2] [--seconds 4] [--runs 7] [--baseline-tree DIR]
"""
import argparse
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORG = "default"


def measure(data_dir, threads, seconds):
    """In this process (of a `tree` on sys.path): run the worker processes; (saves, CPU seconds)."""
    from payload import request_body
    from service.domain.input_form import normalised
    from service.storage.files import FileRepository

    # As the domain hands it to the store: no null member.
    body = normalised(json.loads(request_body())["variables"]["input"]["process"])

    def worker(index, results):
        repo = FileRepository(data_dir)
        counts = []

        def save_for(thread):
            count, stop = 0, time.monotonic() + seconds
            while time.monotonic() < stop:
                identifier = f"bench_{index}_{thread}"
                repo.documents.save(ORG, "processes", identifier, {**body, "id": identifier, "name": f"v{count}"})
                count += 1
            counts.append(count)

        running = [threading.Thread(target=save_for, args=(thread,)) for thread in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        results.put((sum(counts), usage.ru_utime + usage.ru_stime))

    return worker


def run_child(args):
    """The child of one measurement: `tree` first on sys.path."""
    tree, data_dir, processes, threads, seconds = args
    sys.path[:0] = [tree, str(ROOT / "bench")]
    from service.storage.files import FileRepository

    FileRepository(data_dir)  # its folders, before the workers race to make them
    worker = measure(data_dir, threads, seconds)
    results = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=worker, args=(index, results)) for index in range(processes)]
    for process in workers:
        process.start()
    reports = [results.get() for _ in workers]
    for process in workers:
        process.join()
    saves, cpu = sum(report[0] for report in reports), sum(report[1] for report in reports)
    print(json.dumps({"saves_per_s": saves / seconds, "cpu_ms_per_save": cpu * 1000 / saves}))


def one_run(tree, args):
    with tempfile.TemporaryDirectory(prefix="wis-commit-bench-") as temp:
        output = subprocess.run([sys.executable, __file__, "--child", str(tree), str(Path(temp) / "data"),
                                 str(args.processes), str(args.threads), str(args.seconds)],
                                check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        tree, data_dir, processes, threads, seconds = sys.argv[2:7]
        run_child((tree, data_dir, int(processes), int(threads), float(seconds)))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline-tree", type=Path)
    args = parser.parse_args()
    trees = {"ours": ROOT, **({"baseline": args.baseline_tree.resolve()} if args.baseline_tree else {})}
    print(f"{args.processes} processes x {args.threads} threads, {args.seconds} s a run, {args.runs} runs, "
          f"load average {os.getloadavg()[0]:.1f}")
    one_run(ROOT, args)  # warm-up: discarded
    runs = {name: [] for name in trees}
    for number in range(args.runs):
        order = list(trees) if number % 2 == 0 else list(reversed(trees))
        for name in order:
            figures = one_run(trees[name], args)
            runs[name].append(figures)
            print(f"run {number + 1} {name:8} {figures['saves_per_s']:.0f} saves/s, "
                  f"{figures['cpu_ms_per_save']:.2f} CPU ms a save")
    print("medians")
    for name, figures in runs.items():
        line = (f"  {name:8} {statistics.median(f['saves_per_s'] for f in figures):.0f} saves/s, "
                f"{statistics.median(f['cpu_ms_per_save'] for f in figures):.2f} CPU ms a save")
        if name != "baseline" and "baseline" in runs:
            pairs = list(zip(figures, runs["baseline"]))

            def ratio(key):
                return statistics.median(ours[key] / theirs[key] for ours, theirs in pairs)

            line += (f"; each run's own ratio: {ratio('saves_per_s'):.2f} x the saves, "
                     f"{ratio('cpu_ms_per_save'):.2f} x the CPU")
        print(line)


if __name__ == "__main__":
    main()
