"""The preview pages with many processes (run by hand, not a test): the list page of 100 with and without a search,
and the page of a 200-step process against the GraphQL read of the same process with every field.

Starts ours under the shipped gunicorn configuration on the file backend (a fresh data directory) and, with
`--backend shared` or `both`, on the shared backend (PostgreSQL + SeaweedFS from tests/support/engines.py). Stores
`--processes` processes of `--steps` steps x 5 actions (bench/payload.py, 4 clients) and one process of
`--big-steps` steps, signs in through the login form, then measures, one request at a time over one keep-alive
connection, after a discarded warm-up of 10 requests each, `--runs` runs of `--requests` requests of each kind in
turn (the order of the kinds alternates from run to run):

    list            GET /view/processes?after=<random id>            (a page of 100)
    list+search     GET /view/processes?q=<a digit pair>&after=...    (the id and name filter over documents.names())
    process page    GET /view/processes/<the big process>
    process GraphQL POST /graph/v2 { process(id) { ...every field } }

Per kind: median and p90 milliseconds, and CPU milliseconds per request of the server's process tree (gunicorn
master and workers, from /proc); then the medians of the runs, and the process page against its GraphQL read
(the target: under 10x).

    .venv/bin/python bench/pages_bench.py [--processes 10000] [--steps 2] [--big-steps 200] [--runs 3]
        [--requests 50] [--backend file|shared|both]
"""
import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graphql_bench import TOKEN, graphql, start  # noqa: E402 (bench/ is not a package)
from page_bench import HEADERS, identifier, store  # noqa: E402
from payload import request_body  # noqa: E402
from shared_backend import SharedBackend, tree_cpu_seconds  # noqa: E402
from upload_bench import stop  # noqa: E402

BIG = "big_process"
PART = "id description serial { id name pattern }"
TEXT = "text bold italic underline color"
ACTION = (f"id kind description {{ {TEXT} }} inputParts {{ part {{ {PART} }} quantity }} outputPart {{ {PART} }} "
          "toolUsed { id name description } measurement { measured units min max } confirmation { confirmed } "
          f"scanPart {{ {PART} }} torque")
EVERY_FIELD = (
    "query Read($id: String!) { process(id: $id) { id name description partNumber startBehavior endBehavior "
    "autoSignoutMinutes image { path } createdAt updatedAt revision "
    f"billOfMaterials {{ part {{ {PART} }} quantity }} "
    f"steps {{ id name instructionText {{ {TEXT} }} primaryImage {{ path }} video {{ path title autoplay loop }} "
    f"alerts {{ severity title text }} notes {{ title text }} actions {{ {ACTION} }} "
    f"torqueGroups {{ tool {{ id name description }} actions {{ id }} }} }} }} }}")
KINDS = ("list", "list+search", "process page", "process GraphQL")


def sign_in(base):
    """A requests session holding a page session of the bench's org."""
    session = requests.Session()
    response = session.post(f"{base}/view/login", data={"token": TOKEN}, allow_redirects=False, timeout=30)
    if response.status_code != 303:
        raise SystemExit(f"login: {response.status_code}")
    return session


def requests_of(kind, base, rng, count, last_start):
    """`count` (method, url, body) of one kind."""
    made = []
    for _ in range(count):
        after = identifier(rng.randrange(last_start + 1))
        if kind == "list":
            made.append(("GET", f"{base}/view/processes?after={after}", None))
        elif kind == "list+search":
            made.append(("GET", f"{base}/view/processes?q={rng.randrange(100):02d}&after={after}", None))
        elif kind == "process page":
            made.append(("GET", f"{base}/view/processes/{BIG}", None))
        else:
            made.append(("POST", f"{base}/graph/v2", json.dumps({"query": EVERY_FIELD, "variables": {"id": BIG}})))
    return made


def measure(server, session, made):
    """([seconds per request], CPU seconds of the server tree) of sending `made` one at a time."""
    cpu = tree_cpu_seconds(server["process"].pid)
    seconds = []
    for method, url, body in made:
        began = time.perf_counter()
        response = session.request(method, url, data=body, headers=HEADERS if body else None, timeout=120,
                                   allow_redirects=False)
        seconds.append(time.perf_counter() - began)
        if response.status_code != 200:
            raise SystemExit(f"{server['name']}: {method} {url}: {response.status_code}")
    return seconds, tree_cpu_seconds(server["process"].pid) - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=2, help="steps of 5 actions per stored process")
    parser.add_argument("--big-steps", type=int, default=200, help="steps of the process whose page is read")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=50, help="requests of each kind per run")
    parser.add_argument("--backend", choices=("file", "shared", "both"), default="file")
    args = parser.parse_args()
    rng = random.Random(1)

    with tempfile.TemporaryDirectory(prefix="wis-pages-bench-") as temp, contextlib.ExitStack() as stack:
        temp = Path(temp)
        servers = []
        for name in ("file", "shared") if args.backend == "both" else (args.backend,):
            env = stack.enter_context(SharedBackend()).server_env() if name == "shared" else None
            process, url = start("service:create_app()", temp / name, env=env)
            stack.callback(stop, process)
            servers.append({"name": name, "process": process, "url": url, "base": url.rsplit("/graph/v2", 1)[0]})
        for server in servers:
            began = time.perf_counter()
            store(server["url"], args.processes, args.steps)
            graphql(server["url"], request_body(BIG, args.big_steps))
            print(f"{server['name']}: stored {args.processes} processes and one of {args.big_steps} steps in "
                  f"{time.perf_counter() - began:.0f} s", flush=True)
            server["session"] = sign_in(server["base"])
        last_start = args.processes - 1
        for server in servers:
            for kind in KINDS:
                measure(server, server["session"], requests_of(kind, server["base"], rng, 10, last_start))
        runs = {(server["name"], kind): [] for server in servers for kind in KINDS}
        for number in range(args.runs):
            for server in servers:
                for kind in KINDS if number % 2 == 0 else KINDS[::-1]:
                    seconds, cpu = measure(server, server["session"],
                                           requests_of(kind, server["base"], rng, args.requests, last_start))
                    seconds.sort()
                    figures = {"median_ms": statistics.median(seconds) * 1000,
                               "p90_ms": seconds[int(len(seconds) * 0.9)] * 1000,
                               "cpu_ms": cpu * 1000 / len(seconds)}
                    runs[server["name"], kind].append(figures)
                    print(f"run {number + 1} {server['name']:6} {kind:16} "
                          + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()), flush=True)
    medians = {key: {field: statistics.median(run[field] for run in figures) for field in figures[0]}
               for key, figures in runs.items()}
    print(f"\n{args.processes} processes of {args.steps} steps; the process page of {args.big_steps} steps; medians "
          f"of {args.runs} runs of {args.requests} requests")
    for (name, kind), figures in medians.items():
        print(f"  {name:6} {kind:16} " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()))
    for server in servers:
        page, read = medians[server["name"], "process page"], medians[server["name"], "process GraphQL"]
        print(f"  {server['name']:6} process page / GraphQL read: {page['median_ms'] / read['median_ms']:.2f}x time, "
              f"{page['cpu_ms'] / read['cpu_ms']:.2f}x CPU")


if __name__ == "__main__":
    main()
