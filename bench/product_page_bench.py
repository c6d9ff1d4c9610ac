"""The product page of large products (run by hand, not a test): time, CPU, page bytes and the gunicorn worker's peak
memory, for the two shapes that cost the drawing most (tests/support/products.py):

    chain   p0 -> p1 -> ... -> final, and every process also straight to the final one
    wide    every process feeds the final one

Stores `--sizes` products of each shape over one set of processes (the largest size; file backend, a fresh data
directory) through this checkout's GraphQL, then for each shape and size starts one gunicorn of one worker per
contestant on that data directory (this checkout, and with `--baseline-tree` another checkout, e.g. a `git worktree`
of main), each fresh so that its worker's high-water mark is this page's. Each worker first draws a product of 2
processes (networkx imported, templates compiled): its VmHWM then is the idle worker's. Then one discarded warm-up
request of the page, then `--runs` requests each, alternating contestants (the order turns each run). Per contestant:
the median wall time and CPU seconds of the server's processes per request, the page's bytes (and per process), and
the worker's VmHWM before and after (from /proc/<pid>/status). The baseline is skipped above
`--baseline-max-chain` for the chain, where the old layout's slots grow with the square of the size.

    .venv/bin/python bench/product_page_bench.py [--sizes 100,1000,5000] [--runs 3] [--baseline-tree DIR]
        [--baseline-max-chain 1000]
"""
import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from graphql_bench import TOKEN, start  # noqa: E402 (bench/ is not a package)
from shared_backend import tree_cpu_seconds  # noqa: E402
from support.products import (PROCESS_MUTATION, PRODUCT_MUTATION, SHAPES, process_ids, process_input,  # noqa: E402
                              product_input)
from upload_bench import stop  # noqa: E402

SMALL = "small_2"
TIMEOUT = 900


def post(base, query, value):
    response = requests.post(f"{base}/graph/v2", headers={"x-service-api-org": TOKEN}, timeout=TIMEOUT,
                             json={"query": query, "variables": {"input": value}})
    if response.status_code != 200 or "errors" in response.json():
        raise SystemExit(f"{response.status_code} {response.text[:500]}")


def store(base, sizes):
    """The processes of the largest size, a product of each shape and size, and one of 2 processes."""
    ids = process_ids(max(sizes))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda identifier: post(base, PROCESS_MUTATION, {"process": process_input(identifier)}), ids))
    post(base, PRODUCT_MUTATION, {"product": product_input("wide", SMALL, ids[:2])})
    for shape in SHAPES:
        for size in sizes:
            post(base, PRODUCT_MUTATION, {"product": product_input(shape, f"{shape}_{size}", ids[:size])})


class Contestant:
    """One checkout's gunicorn of one worker on the data directory, signed in."""

    def __init__(self, name, tree, data_dir):
        self.name = name
        self.process, url = start("service:create_app()", data_dir, env={"WIS_WORKERS": "1"}, tree=tree)
        self.base = url.rsplit("/graph/v2", 1)[0]
        self.session = requests.Session()
        response = self.session.post(f"{self.base}/view/login", data={"token": TOKEN}, allow_redirects=False)
        if response.status_code != 303:
            raise SystemExit(f"{name}: login {response.status_code}")
        self.times, self.cpu, self.size = [], [], None
        self.page(SMALL)
        self.idle_hwm = self.hwm()

    def worker(self):
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return int(children[0])

    def hwm(self):
        """The worker's peak resident memory so far, in MB."""
        for line in Path(f"/proc/{self.worker()}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise SystemExit("no VmHWM")

    def page(self, product_id, record=False):
        cpu, started = tree_cpu_seconds(self.process.pid), time.perf_counter()
        response = self.session.get(f"{self.base}/view/products/{product_id}", timeout=TIMEOUT)
        elapsed, cpu = time.perf_counter() - started, tree_cpu_seconds(self.process.pid) - cpu
        if response.status_code != 200:
            raise SystemExit(f"{self.name} {product_id}: {response.status_code}")
        if record:
            self.times.append(elapsed)
            self.cpu.append(cpu)
        self.size = len(response.content)


def measure(shape, size, trees, data_dir, runs):
    """One row per contestant: shape, size, contestant, median s, median CPU s, bytes, idle and peak VmHWM MB."""
    with contextlib.ExitStack() as stack:
        contestants = []
        for name, tree in trees:
            contestants.append(Contestant(name, tree, data_dir))
            stack.callback(stop, contestants[-1].process)
        for contestant in contestants:  # the warm-up, discarded
            contestant.page(f"{shape}_{size}")
        for run in range(runs):
            for contestant in (contestants if run % 2 == 0 else contestants[::-1]):
                contestant.page(f"{shape}_{size}", record=True)
        return [{"shape": shape, "size": size, "contestant": c.name, "seconds": statistics.median(c.times),
                 "cpu_seconds": statistics.median(c.cpu), "bytes": c.size, "idle_mb": c.idle_hwm, "peak_mb": c.hwm()}
                for c in contestants]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline-tree", type=Path)
    parser.add_argument("--baseline-max-chain", type=int, default=1000)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as temp:
        data_dir = Path(temp) / "data"
        process, url = start("service:create_app()", data_dir)
        try:
            store(url.rsplit("/graph/v2", 1)[0], sizes)
        finally:
            stop(process)
        rows = []
        for shape in SHAPES:
            for size in sizes:
                trees = [("ours", ROOT)]
                if args.baseline_tree and (shape != "chain" or size <= args.baseline_max_chain):
                    trees.append(("baseline", args.baseline_tree))
                for row in measure(shape, size, trees, data_dir, args.runs):
                    rows.append(row)
                    print(f"{row['shape']:6} {row['size']:6} {row['contestant']:9} {row['seconds']:8.3f} s "
                          f"{row['cpu_seconds']:8.3f} CPU s {row['bytes']:>11,} B ({row['bytes'] / size:,.0f} B a "
                          f"process) worker {row['idle_mb']:.0f} -> {row['peak_mb']:.0f} MB", flush=True)
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
