"""Reading one page of 100 processes out of 10,000 stored, on the file backend and on the shared one (run by hand).

Starts ours twice under the shipped gunicorn configuration: on the file backend (a fresh data directory) and on the
shared backend (PostgreSQL + SeaweedFS from tests/support/engines.py, bench/shared_backend.py). Stores `--processes`
processes of `--steps` steps x 5 actions (bench/payload.py) in each through processCreate (4 clients), then reads
pages: `processes(first: 100, after: <id>)` with the page's start drawn at random (the same sequence for both), one
request at a time over one keep-alive connection. After a discarded warm-up of 20 pages per server, the servers
alternate `--runs` times, `--pages` pages each. Per server and run: median and p90 milliseconds per page, and CPU
milliseconds per page of the server's process tree (and of PostgreSQL for the shared backend), from /proc.

    .venv/bin/python bench/page_bench.py [--processes 10000] [--steps 2] [--runs 3] [--pages 100]
"""
import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graphql_bench import TOKEN, graphql, start  # noqa: E402 (bench/ is not a package)
from payload import request_body  # noqa: E402
from shared_backend import SharedBackend, tree_cpu_seconds  # noqa: E402
from upload_bench import Sessions, stop  # noqa: E402

PAGE = ("query Page($after: String) { processes(first: 100, after: $after) { id name revision "
        "steps { id name actions { id } } } }")
HEADERS = {"Content-Type": "application/json", "x-service-api-org": TOKEN}


def identifier(number):
    return f"process_{number:06d}"


def store(url, count, steps):
    sessions = Sessions()

    def create(number):
        response = sessions.session.post(url, data=request_body(identifier(number), steps), headers=HEADERS,
                                         timeout=60)
        if response.status_code != 200 or "errors" in response.json():
            raise SystemExit(f"processCreate {number}: {response.status_code} {response.text[:300]}")

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(create, range(count)))


def read_pages(server, starts):
    """[(seconds per page)] and the CPU seconds of the server (and its database) over the reads."""
    session = requests.Session()
    cpu, db = tree_cpu_seconds(server["process"].pid), server["db_cpu"]()
    seconds = []
    for start_number in starts:
        after = identifier(start_number - 1) if start_number else None
        body = json.dumps({"query": PAGE, "variables": {"after": after}})
        began = time.perf_counter()
        response = session.post(server["url"], data=body, headers=HEADERS, timeout=60)
        seconds.append(time.perf_counter() - began)
        page = response.json()["data"]["processes"]
        if [process["id"] for process in page] != [identifier(n) for n in range(start_number, start_number + 100)]:
            raise SystemExit(f"{server['name']}: wrong page after {after}")
    return seconds, tree_cpu_seconds(server["process"].pid) - cpu, server["db_cpu"]() - db


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=2, help="steps of 5 actions per stored process")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pages", type=int, default=100, help="pages read per server and run")
    args = parser.parse_args()
    rng = random.Random(1)

    with tempfile.TemporaryDirectory(prefix="wis-page-bench-") as temp, contextlib.ExitStack() as stack:
        temp = Path(temp)
        shared = stack.enter_context(SharedBackend())
        servers = []
        for name, env, db_cpu in (("file", None, lambda: 0.0),
                                  ("shared", shared.server_env(), lambda: shared.cpu_seconds()["postgres"])):
            process, url = start("service:create_app()", temp / name, env=env)
            stack.callback(stop, process)
            servers.append({"name": name, "process": process, "url": url, "db_cpu": db_cpu})
        for server in servers:
            began = time.perf_counter()
            store(server["url"], args.processes, args.steps)
            print(f"{server['name']}: stored {args.processes} processes in {time.perf_counter() - began:.0f} s",
                  flush=True)
            graphql(server["url"], json.dumps({"query": PAGE, "variables": {"after": None}}).encode())
        last_start = args.processes - 100
        for server in servers:
            read_pages(server, [rng.randrange(last_start + 1) for _ in range(20)])
        runs = {server["name"]: [] for server in servers}
        for number in range(args.runs):
            starts = [rng.randrange(last_start + 1) for _ in range(args.pages)]
            for server in servers if number % 2 == 0 else servers[::-1]:
                seconds, cpu, db = read_pages(server, starts)
                seconds.sort()
                figures = {"median_ms": statistics.median(seconds) * 1000,
                           "p90_ms": seconds[int(len(seconds) * 0.9)] * 1000,
                           "cpu_ms_per_page": cpu * 1000 / len(starts), "db_cpu_ms_per_page": db * 1000 / len(starts)}
                runs[server["name"]].append(figures)
                print(f"run {number + 1} {server['name']:6} " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()),
                      flush=True)
    medians = {name: {key: statistics.median(run[key] for run in figures) for key in figures[0]}
               for name, figures in runs.items()}
    print(f"\npage of 100 out of {args.processes} processes of {args.steps} steps, medians of {args.runs} runs of "
          f"{args.pages} pages")
    for name, figures in medians.items():
        print(f"  {name:6} " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items())
              + f"; median vs file {figures['median_ms'] / medians['file']['median_ms']:.2f}")


if __name__ == "__main__":
    main()
