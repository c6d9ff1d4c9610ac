"""processCreate benchmark of each backend against a do-nothing Ariadne mutation (run by hand, not a test).

Starts, each on a free 127.0.0.1 port with the gunicorn configuration the project ships
(`-c python:service.gunicorn_config`): bench/noop_app.py (Ariadne's WSGI app over the same schema.graphql,
resolvers answering CREATED), and ours (`service:create_app()`) on the file backend (a fresh data directory,
every document fsynced) and/or the shared backend (PostgreSQL + SeaweedFS from tests/support/engines.py, bench/
shared_backend.py). wrk sends the same realistic processCreate (bench/payload.py: 20 steps x 5 actions, about 60 KB
of JSON) over a fixed number of keep-alive connections, cycling through `--ids` process ids (1: every client writes
the same process, so writers queue on its lock). Each run measures every server in turn after a discarded 2 s
warm-up; the order of the servers alternates from run to run. Per server and run: requests/s, p50 and p99 latency,
CPU ms per request of the server's process tree (gunicorn master and workers; and PostgreSQL's processes for the
shared backend), from /proc before and after; then the medians of the runs and the ratios against the noop app and
the file backend.

`--baseline-tree DIR` adds the backend measured (the file backend with `--backend both`) served from another checkout
(e.g. /work/main), to compare a change with the code before it in the same run; on the shared backend it gets a
database of its own on the same PostgreSQL, its schema made by that checkout. `--also-tree NAME=DIR` (repeatable) adds
the file backend of further checkouts, each named, to compare several versions in one run. `--busy-disk` has another
process write 500 MB to the servers' disk (1 MB writes, then one fsync) during each measurement, every contestant's
alike: the write path as it meets a disk busy with an upload or a backup.

    sudo apt-get install -y wrk        # Debian/Ubuntu; wrk 4 with LuaJIT
    .venv/bin/python bench/graphql_bench.py [--backend file|shared|both] [--runs 3] [--seconds 10] \
        [--connections 8] [--ids 64] [--baseline-tree DIR] [--also-tree NAME=DIR] \
        [--changing] [--slices 1] [--busy-disk]
"""
import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from payload import request_body  # noqa: E402 (bench/ is not a package)
from shared_backend import SharedBackend, tree_cpu_seconds  # noqa: E402
from upload_bench import free_port, stop, wait_ready  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0001"
RESULT = re.compile(r"RESULT requests=(\d+) seconds=([\d.]+) p50_ms=([\d.]+) p99_ms=([\d.]+) failed=(\d+)")
WARM_UP_SECONDS = 2


def start(app, data_dir, extra_args=(), env=None, tree=ROOT):
    """gunicorn with the shipped configuration serving `app` from checkout `tree` on a free port; (process, url)."""
    port = free_port()
    env = dict(os.environ, WIS_DATA_DIR=str(data_dir), WIS_API_TOKENS=f"default:{TOKEN}",
               WIS_BIND=f"127.0.0.1:{port}", **(env or {}))
    # `python -m` puts the working directory first on sys.path: `service` is imported from `tree`.
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:service.gunicorn_config",
                                *extra_args, app], cwd=tree, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/graph/v2"
    wait_ready(url, process, app)
    return process, url


def graphql(url, body, timeout=60):
    response = requests.post(url, data=body, timeout=timeout, headers={
        "Content-Type": "application/json", "x-service-api-org": TOKEN})
    if response.status_code != 200 or "errors" in response.json():
        raise SystemExit(f"{url}: {response.status_code} {response.text[:500]}")
    return response.json()["data"]


def wrk(url, body_file, seconds, connections, ids, changing=False):
    """(requests/s, p50 ms, p99 ms, requests) of one wrk run."""
    output = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s", "-s",
         str(ROOT / "bench" / "graphql_post.lua"), url, "--", str(body_file), TOKEN, str(ids),
         "1" if changing else "0"],
        check=True, capture_output=True, text=True).stdout
    match = RESULT.search(output)
    if match is None:
        raise SystemExit(f"unexpected wrk output:\n{output}")
    count, elapsed, p50, p99, failed = match.groups()
    if int(failed):
        raise SystemExit(f"{failed} requests failed:\n{output}")
    return int(count) / float(elapsed), float(p50), float(p99), int(count)


class Server:
    """One server under test: a name, its gunicorn process and URL, and what else spends CPU for it."""

    def __init__(self, name, process, url, engine_cpu=None):
        self.name, self.process, self.url = name, process, url
        self.engine_cpu = engine_cpu  # () -> CPU seconds of the database it uses, or None

    def cpu(self):
        return tree_cpu_seconds(self.process.pid), self.engine_cpu() if self.engine_cpu else 0.0


def start_servers(args, temp, stack):
    servers = []
    noop, url = start("noop_app:create_app()", temp / "unused", ["--chdir", str(ROOT / "bench")])
    stack.callback(stop, noop)
    servers.append(Server("noop", noop, url))
    shared = stack.enter_context(SharedBackend()) if args.backend in ("shared", "both") else None
    postgres_cpu = (lambda: shared.cpu_seconds()["postgres"]) if shared else None
    if args.baseline_tree:
        on_shared = args.backend == "shared"
        process, url = start("service:create_app()", temp / "baseline", tree=args.baseline_tree,
                             env=shared.server_env(args.baseline_tree) if on_shared else None)
        stack.callback(stop, process)
        servers.append(Server("baseline", process, url, postgres_cpu if on_shared else None))
    for name, tree in args.also_tree:
        process, url = start("service:create_app()", temp / name, tree=tree)
        stack.callback(stop, process)
        servers.append(Server(name, process, url))
    if args.backend in ("file", "both"):
        process, url = start("service:create_app()", temp / "data")
        stack.callback(stop, process)
        servers.append(Server("file", process, url))
    if shared:
        process, url = start("service:create_app()", temp / "shared-data", env=shared.server_env())
        stack.callback(stop, process)
        servers.append(Server("shared", process, url, postgres_cpu))
    return servers


# `--busy-disk`: what another process writes to the same disk during each measurement, in blocks of BUSY_BLOCK.
BUSY_BYTES = 500 * 1024 * 1024
BUSY_BLOCK = 1024 * 1024
BUSY_WRITER = """import os, sys
block = b"\\0" * {block}
with open(sys.argv[1], "wb") as handle:
    for _ in range({blocks}):
        handle.write(block)
    handle.flush()
    os.fsync(handle.fileno())
os.unlink(sys.argv[1])
""".format(block=BUSY_BLOCK, blocks=BUSY_BYTES // BUSY_BLOCK)


@contextlib.contextmanager
def busy_disk(directory, enabled):
    """With `enabled`, another process writes BUSY_BYTES to a file in `directory` (the servers' disk) while the block
    runs, once; it is waited for (or stopped) when the block ends, and its file removed."""
    if not enabled:
        yield
        return
    target = Path(directory) / "busy-disk.bin"
    writer = subprocess.Popen([sys.executable, "-c", BUSY_WRITER, str(target)])
    try:
        yield
    finally:
        writer.terminate()
        writer.wait(timeout=60)
        target.unlink(missing_ok=True)


def measure(server, body_file, args):
    """One server's figures of one run: `--slices` wrk runs of seconds / slices each, each with connections of its
    own (gunicorn's workers share one listening socket, and which worker accepts which of a few connections is
    chance: 4 connections in one worker are served by one GIL, spread over three by three, twice the throughput;
    several slices average that chance out). Requests/s of the whole; p50 and p99: the medians of the slices'."""
    wrk(server.url, body_file, WARM_UP_SECONDS, args.connections, args.ids, args.changing)
    with busy_disk(body_file.parent, args.busy_disk):
        cpu, engine = server.cpu()
        slices = [wrk(server.url, body_file, max(1, args.seconds // args.slices), args.connections, args.ids,
                      args.changing) for _ in range(args.slices)]
        cpu_after, engine_after = server.cpu()
    count = sum(one[3] for one in slices)
    rps = count / sum(one[3] / one[0] for one in slices)
    p50, p99 = (statistics.median(one[index] for one in slices) for index in (1, 2))
    figures = {"rps": rps, "p50_ms": p50, "p99_ms": p99, "cpu_ms": (cpu_after - cpu) * 1000 / count}
    if server.engine_cpu:
        figures["db_cpu_ms"] = (engine_after - engine) * 1000 / count
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("file", "shared", "both"), default="file")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10, help="length of each measurement")
    parser.add_argument("--slices", type=int, default=1,
                        help="wrk runs a measurement is made of, each with new connections (see measure)")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections wrk holds open")
    parser.add_argument("--ids", type=int, default=64, help="process ids the requests cycle through")
    parser.add_argument("--baseline-tree", type=Path, help="also serve the backend measured from this checkout")
    parser.add_argument("--also-tree", type=_named_tree, action="append", default=[], metavar="NAME=DIR",
                        help="also serve the file backend from this checkout, as NAME (repeatable)")
    parser.add_argument("--busy-disk", action="store_true",
                        help="another process writes 500 MB to the servers' disk during each measurement")
    parser.add_argument("--changing", action="store_true",
                        help="every request changes its process (a new revision each time, history written); "
                             "without it a body repeats every --ids requests (unchanged pushes once detected)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: sudo apt-get install -y wrk (Debian/Ubuntu), or build it from "
                         "https://github.com/wg/wrk")

    with tempfile.TemporaryDirectory(prefix="wis-bench-") as temp, contextlib.ExitStack() as stack:
        temp = Path(temp)
        body = request_body()
        body_file = temp / "body.json"
        body_file.write_bytes(body)
        servers = start_servers(args, temp, stack)
        for server in servers:
            graphql(server.url, body)
        print(f"processCreate of {len(body)} bytes, {args.connections} connections, {args.ids} ids, {args.seconds} s "
              f"per measurement, {args.runs} runs, servers {', '.join(server.name for server in servers)}", flush=True)
        runs = {server.name: [] for server in servers}
        for number in range(args.runs):
            order = servers if number % 2 == 0 else servers[::-1]
            for server in order:
                runs[server.name].append(measure(server, body_file, args))
                print(f"run {number + 1} {server.name:8} "
                      + ", ".join(f"{k} {v:.2f}" for k, v in runs[server.name][-1].items()), flush=True)
                time.sleep(1)
    report(runs, args.runs)


def _named_tree(text):
    name, _, tree = text.partition("=")
    if not name or not tree or name in ("noop", "baseline", "file", "shared"):
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=DIR, NAME other than noop, baseline, file and shared")
    return name, Path(tree)


def report(runs, count):
    """The medians of each server's figures and their ratios; against a baseline, also the median of each run's own
    ratios."""
    medians = {name: {key: statistics.median(run[key] for run in figures) for key in figures[0]}
               for name, figures in runs.items()}
    print(f"\nmedians of {count} runs")
    for name, figures in medians.items():
        ratios = [f"rps/{base} {figures['rps'] / medians[base]['rps']:.2f}, p99/{base} "
                  f"{figures['p99_ms'] / medians[base]['p99_ms']:.2f}"
                  for base in ("noop", "file", "baseline") if base in medians and base != name]
        print(f"  {name:8} " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items())
              + ("; " + "; ".join(ratios) if ratios else ""))
    if "baseline" in runs:
        # On a machine whose load changes from minute to minute, the ratio of two measurements a few seconds apart
        # in one run is steadier than the ratio of two medians.
        print(f"\nmedians of the {count} runs' own ratios against the baseline")
        for name in runs:
            if name != "baseline":
                pairs = list(zip(runs[name], runs["baseline"]))
                print(f"  {name:8} " + ", ".join(
                    f"{key} {statistics.median(ours[key] / theirs[key] for ours, theirs in pairs):.2f}"
                    for key in ("rps", "p99_ms", "cpu_ms", "db_cpu_ms") if key in pairs[0][0] and key in pairs[0][1]))


if __name__ == "__main__":
    main()
