"""processCreate benchmark against a do-nothing Ariadne mutation (run by hand, not a test).

Starts two servers with the gunicorn configuration the project ships (`-c python:service.gunicorn_config`),
each on a free 127.0.0.1 port: ours (`service:create_app()`, a fresh data directory, every document fsynced)
and bench/noop_app.py (Ariadne's WSGI app over the same schema.graphql, resolvers answering CREATED). wrk
sends the same realistic processCreate (bench/payload.py: 20 steps x 5 actions, about 60 KB of JSON, 64
process ids in turn) over a fixed number of keep-alive connections for a fixed time, alternating between
the two servers, `--runs` times. Prints requests/s, p50 and p99 latency of each, and the ratio ours/noop,
per run and as the median of the runs, with the CPU milliseconds the server's workers spent per request (user +
system time of the gunicorn master's children over the measurement, from /proc). Target (issue 5): ratio >= 0.6.

    sudo apt-get install -y wrk        # Debian/Ubuntu; wrk 4 with LuaJIT
    .venv/bin/python bench/graphql_bench.py [--runs 3] [--seconds 10] [--connections 8]
"""
import argparse
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
from upload_bench import free_port, stop, wait_ready  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0001"
RESULT = re.compile(r"RESULT requests=(\d+) seconds=([\d.]+) p50_ms=([\d.]+) p99_ms=([\d.]+) failed=(\d+)")
WARM_UP_SECONDS = 2


def start(app, data_dir, extra_args=()):
    """gunicorn with the shipped configuration serving `app` on a free port; (process, url)."""
    port = free_port()
    env = dict(os.environ, WIS_DATA_DIR=str(data_dir), WIS_API_TOKENS=f"default:{TOKEN}",
               WIS_BIND=f"127.0.0.1:{port}")
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:service.gunicorn_config",
                                *extra_args, app], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/graph/v2"
    wait_ready(url, process, app)
    return process, url


def check(url, body):
    response = requests.post(url, data=body, timeout=30, headers={
        "Content-Type": "application/json", "x-service-api-org": TOKEN})
    if response.status_code != 200 or "errors" in response.json():
        raise SystemExit(f"{url}: {response.status_code} {response.text[:500]}")


def workers_cpu_seconds(master):
    """User + system CPU seconds used so far by the gunicorn master's children (its workers)."""
    total = 0
    for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def wrk(url, body_file, seconds, connections):
    """(requests/s, p50 ms, p99 ms, requests) of one wrk run."""
    output = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s", "-s",
         str(ROOT / "bench" / "graphql_post.lua"), url, "--", str(body_file), TOKEN],
        check=True, capture_output=True, text=True).stdout
    match = RESULT.search(output)
    if match is None:
        raise SystemExit(f"unexpected wrk output:\n{output}")
    count, elapsed, p50, p99, failed = match.groups()
    if int(failed):
        raise SystemExit(f"{failed} requests failed:\n{output}")
    return int(count) / float(elapsed), float(p50), float(p99), int(count)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10, help="length of each measurement")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections wrk holds open")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: sudo apt-get install -y wrk (Debian/Ubuntu), or build it from "
                         "https://github.com/wg/wrk")

    with tempfile.TemporaryDirectory(prefix="wis-bench-") as temp:
        temp = Path(temp)
        body = request_body()
        body_file = temp / "body.json"
        body_file.write_bytes(body)
        ours, ours_url = start("service:create_app()", temp / "data")
        noop, noop_url = start("noop_app:create_app()", temp / "unused", ["--chdir", str(ROOT / "bench")])
        try:
            print(f"processCreate of {len(body)} bytes, {args.connections} connections, {args.seconds} s "
                  f"per measurement, {args.runs} runs", flush=True)
            runs = []
            for number in range(1, args.runs + 1):
                run = {}
                for name, url, server in (("noop", noop_url, noop), ("ours", ours_url, ours)):
                    check(url, body)
                    wrk(url, body_file, WARM_UP_SECONDS, args.connections)
                    cpu = workers_cpu_seconds(server.pid)
                    run[f"{name}_rps"], run[f"{name}_p50_ms"], run[f"{name}_p99_ms"], count = wrk(
                        url, body_file, args.seconds, args.connections)
                    run[f"{name}_cpu_ms"] = (workers_cpu_seconds(server.pid) - cpu) * 1000 / count
                    time.sleep(1)
                run["ratio"] = run["ours_rps"] / run["noop_rps"]
                runs.append(run)
                print(f"run {number}: " + ", ".join(f"{key} {value:.2f}" for key, value in run.items()), flush=True)
        finally:
            stop(ours)
            stop(noop)
    print(f"median of {len(runs)} runs: "
          + ", ".join(f"{key} {statistics.median(run[key] for run in runs):.2f}" for key in runs[0]))


if __name__ == "__main__":
    main()
