"""The list pages' search by name (run by hand, not a test): what the store's `names()` costs against the listing of
ids alone (the search of ids before it) and against opening every document, on each backend, in process.

Stores `--processes` processes of `--steps` steps x 5 actions (bench/payload.py, each with a name of its own)
straight through the document store, then times, `--repeat` times each, medians in milliseconds of wall time and of
this process's CPU time (the shared backend's database work is in PostgreSQL's processes: its wall time counts it):

    ids             documents.ids(org, kind)                     the listing of ids (the search before: ids only)
    names           documents.names(org, kind)                   (id, name) from the start of each document
    every document  [d["name"] for d in documents.each(...)]     the naive search: parse every document
    search page     page_of_objects(..., contains="4242")        a search page as the list page asks it

    .venv/bin/python bench/names_bench.py [--processes 10000] [--steps 20] [--repeat 5] [--backend file|shared|both]
"""
import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from payload import process  # noqa: E402 (bench/ is not a package)
from service import create_app  # noqa: E402
from service.interface.kinds import PROCESSES  # noqa: E402
from service.domain.reads import page_of_objects  # noqa: E402
from service.storage import get_repository  # noqa: E402

ORG = "default"


def measure(call, repeat):
    """(median wall ms, median CPU ms) of `repeat` calls."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def run(name, settings, data_dir, arguments):
    app = create_app({"DATA_DIR": str(data_dir), "API_TOKENS": f"{ORG}:bench-token-of-the-names-bench", **settings})
    repo = get_repository(app)
    documents = repo.documents
    body = process("x", arguments.steps)
    for number in range(arguments.processes):
        identifier = f"process_{number:06d}"
        documents.save(ORG, PROCESSES, identifier, {**body, "id": identifier, "name": f"Process {number}: gearbox"})
    size = len(Path(data_dir, "orgs", ORG, PROCESSES, "process_000000.json").read_bytes()) if name == "file" else None
    kinds = {
        "ids": lambda: documents.ids(ORG, PROCESSES),
        "names": lambda: documents.names(ORG, PROCESSES),
        "every document": lambda: [document["name"] for document in documents.each(ORG, PROCESSES)],
        "search page": lambda: page_of_objects(repo, ORG, PROCESSES, contains="4242"),
    }
    print(f"{name}: {arguments.processes} processes of {arguments.steps} steps"
          + (f" ({size} bytes each)" if size else ""))
    for kind, call in kinds.items():
        wall, cpu = measure(call, arguments.repeat)
        print(f"  {kind:15} {wall:9.1f} ms wall {cpu:9.1f} ms CPU")
    with contextlib.suppress(AttributeError):
        repo.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backend", choices=("file", "shared", "both"), default="file")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="names-bench-") as temporary:
        if arguments.backend in ("file", "both"):
            run("file", {}, Path(temporary) / "file", arguments)
        if arguments.backend in ("shared", "both"):
            from shared_backend import SharedBackend

            with SharedBackend() as shared:
                environment = shared.server_env()
                settings = {"DATABASE_URL": environment["WIS_DATABASE_URL"], "S3_BUCKET": environment["WIS_S3_BUCKET"],
                            "S3_PREFIX": environment["WIS_S3_PREFIX"]}
                run("shared", settings, Path(temporary) / "shared", arguments)


if __name__ == "__main__":
    main()
