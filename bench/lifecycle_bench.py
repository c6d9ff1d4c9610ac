"""Read costs of CONTRACT 10 (run by hand, not a test): a page of 100 processes (derived data now computed when read,
from the stored input) against the code before, and a past revision and a history page with 100 revisions stored.

Each checkout is measured in a subprocess of its own, importing `service` from that tree, in process through the
Flask test client on the file backend (a fresh data directory). The processes are bench/payload.py's (20 steps x 5 actions, about 60 KB of JSON each).
Figures: the median milliseconds of `--repeat` reads.

    .venv/bin/python bench/lifecycle_bench.py [--baseline-tree DIR] [--repeat 20]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0001"
PAGE = "{ processes(first: 100) { id name revision steps { id actions { id kind torque } torqueGroups { actions { id } } } " \
       "billOfMaterials { quantity } } }"
PAST = '{ process(id: "proc_000", revision: 50) { id name revision steps { id actions { id kind torque } } ' \
       "billOfMaterials { quantity } } }"
HISTORY = '{ processHistory(id: "proc_000", first: 100) { revision savedAt change } }'


def median_ms(client, headers, query, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.post("/graph/v2", headers=headers, json={"query": query})
        times.append(time.perf_counter() - start)
        assert response.status_code == 200 and "errors" not in response.get_json(), response.data[:300]
    return round(statistics.median(times) * 1000, 2)


def worker(repeat):
    """Runs inside the tree's interpreter: print the figures as JSON."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from payload import MUTATION, process
    from service import create_app

    with tempfile.TemporaryDirectory() as temp:
        app = create_app({"DATA_DIR": temp, "API_TOKENS": f"default:{TOKEN}"})
        client, headers = app.test_client(), {"x-service-api-org": TOKEN}
        for number in range(100):
            body = {"query": MUTATION, "variables": {"input": {"process": process(f"proc_{number:03d}")}}}
            assert "errors" not in client.post("/graph/v2", headers=headers, json=body).get_json()
        figures = {"page_of_100_ms": median_ms(client, headers, PAGE, repeat)}
        if "processHistory" in (Path(sys.modules["service"].__file__).parent / "schema.graphql").read_text():
            for revision in range(99):
                changed = {**process("proc_000"), "name": f"revision {revision + 2}"}
                client.post("/graph/v2", headers=headers,
                            json={"query": MUTATION, "variables": {"input": {"process": changed}}})
            figures["past_revision_of_100_ms"] = median_ms(client, headers, PAST, repeat)
            figures["history_page_of_100_ms"] = median_ms(client, headers, HISTORY, repeat)
        print(json.dumps(figures))


def measure(tree, repeat):
    output = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", "--repeat", str(repeat)],
                            cwd=tree, check=True, capture_output=True, text=True).stdout
    return json.loads(output.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-tree", type=Path, help="also measure this checkout (e.g. the code before)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        sys.path.insert(0, str(Path.cwd()))  # `service` from the tree measured
        return worker(args.repeat)
    for name, tree in (("baseline", args.baseline_tree), ("this", ROOT)):
        if tree is not None:
            print(name, measure(tree, args.repeat))


if __name__ == "__main__":
    main()
