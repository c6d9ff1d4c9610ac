"""How long the first look at an org takes after a power cut (run by hand, not a test): the file backend puts back
every change its write-ahead log holds after the last checkpoint (service.storage.files.reboot_check).

Writes `--changes` revisions of the benchmark's 60 KB process (spread over 64 ids) with no checkpoint, so that every
one of them is after the last; then makes what a power cut may leave (each document written since emptied, the event
log cut back to nothing, another boot named) and times the first read in a new repository, which replays them all.
For scale, the same read on the same data without a replay (the boot the log names) is timed beside it. Each figure
is the median of `--runs` alternated runs after a discarded warm-up, wall and CPU seconds (this process's).

    .venv/bin/python bench/replay_bench.py [--changes 200] [--runs 5]
"""
import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from payload import request_body  # noqa: E402 (bench/ is not a package)
from service.domain.input_form import normalised  # noqa: E402
from service.storage.files import FileRepository, checkpoints  # noqa: E402

ORG = "default"


def written(data_dir, changes):
    """A data directory holding `changes` revisions, none checkpointed."""
    checkpoints.CHECKPOINT_SECONDS = None
    repo = FileRepository(data_dir)
    body = normalised(json.loads(request_body())["variables"]["input"]["process"])
    for number in range(changes):
        repo.documents.save(ORG, "processes", f"bench_{number % 64}", {**body, "name": f"Gearbox {number}"})
    return repo


def power_cut(repo):
    """Each document written emptied, the event log cut to nothing, another boot named: all of it to put back."""
    for path in (repo.orgs_root / ORG / "processes").glob("*.json"):
        path.write_bytes(b"")
    for segment in (repo.orgs_root / ORG / "events").glob("*.jsonl"):
        segment.write_bytes(b"")
    (repo.orgs_root / ORG / "events" / "boot").write_text("the boot before")


def first_read(data_dir):
    """(wall, CPU) seconds of the first read of an org in a new repository."""
    repo = FileRepository(data_dir)
    wall, cpu = time.perf_counter(), time.process_time()
    assert repo.documents.get(ORG, "processes", "bench_0") is not None
    return time.perf_counter() - wall, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        template = Path(temp) / "template"
        written(template, args.changes)
        results = {"replay": [], "no replay": []}
        for run in range(args.runs + 1):
            for name in (("replay", "no replay") if run % 2 else ("no replay", "replay")):
                data_dir = Path(temp) / f"run-{run}-{name.replace(' ', '-')}"
                shutil.copytree(template, data_dir)
                if name == "replay":
                    power_cut(FileRepository(data_dir))
                figures = first_read(data_dir)
                if run:  # (the first run warms up)
                    results[name].append(figures)
                shutil.rmtree(data_dir)
    print(f"{args.changes} changes of 60 KB after the last checkpoint, {args.runs} runs, medians")
    for name, figures in results.items():
        wall = statistics.median(wall for wall, _ in figures)
        cpu = statistics.median(cpu for _, cpu in figures)
        print(f"  first read, {name:9}: {wall * 1000:8.1f} ms wall, {cpu * 1000:8.1f} ms CPU"
              f" ({wall / args.changes * 1000:.2f} and {cpu / args.changes * 1000:.2f} ms a change)")


if __name__ == "__main__":
    main()
