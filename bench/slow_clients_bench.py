"""Stalled clients: what `--stalled` connections that send a request head and one body byte, then nothing, cost the
other clients and the server (run by hand).

The service runs under the shipped gunicorn configuration (`-c python:service.gunicorn_config`, CPUs + 1 workers)
from `--tree` (this checkout by default), with WIS_REQUEST_START_TIMEOUT raised so that the stalled connections
stay for the whole run. Rounds alternate: without stalled connections, then with them (opened, and held by the
workers: counted in /proc), and so on. In each round this process sends `--requests` times a /healthz and a small
GraphQL read, each on a new connection as a new client would, one at a time, and measures how long each answer
takes. Then, with nothing sent for `--hold-seconds`, it measures the CPU seconds of the server's process tree
(utime+stime from /proc) and the workers' resident memory (VmRSS). The figures are medians over the rounds of each
kind; the first round of each kind is a warm-up and left out.

A request that gets no answer within `--timeout` seconds counts as failed (against a gthread worker the stalled
connections hold every thread, and every request fails).

    .venv/bin/python bench/slow_clients_bench.py [--stalled 1000] [--rounds 7] [--requests 50] [--tree DIR]
"""
import argparse
import resource
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shared_backend import tree_cpu_seconds  # noqa: E402 (it puts tests/ on sys.path too)
from support import connections_held  # noqa: E402
from upload_bench import HEADERS, ROOT, memory_kb, start_ours, stop, worker_pids  # noqa: E402

QUERY = {"query": "{ processes(first: 10) { id name revision } }"}
PROCESS = {"query": "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }",
           "variables": {"input": {"process": {"id": "bench_line", "name": "Bench line",
                                               "steps": [{"id": "step_1", "name": "Fit the cover"}]}}}}


def stalled_request():
    return (f"POST /graph/v2 HTTP/1.1\r\nHost: 127.0.0.1\r\nx-service-api-org: {HEADERS['x-service-api-org']}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{").encode()


def stall(port, count, workers):
    """`count` connections that send a head and one byte of body, once the workers hold every one of them."""
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(stalled_request())
        held.append(sock)
    ports = {sock.getsockname()[1] for sock in held}
    deadline = time.monotonic() + 30
    while (holding := connections_held(workers, port, ports)) < count:
        if time.monotonic() > deadline:
            print(f"  (after 30 s the workers hold {holding} of the {count} connections; the rest are in the backlog)")
            break
        time.sleep(0.1)
    return held


def latencies(url, count, timeout):
    """(healthz seconds, GraphQL seconds, failures) of `count` requests of each, one at a time, new connections."""
    health, graphql, failed = [], [], 0
    for _ in range(count):
        for times, send in ((health, lambda: requests.get(url + "/healthz", timeout=timeout)),
                            (graphql, lambda: requests.post(url + "/graph/v2", json=QUERY, headers=HEADERS,
                                                            timeout=timeout))):
            start = time.perf_counter()
            try:
                ok = send().status_code == 200
            except requests.RequestException:
                ok = False
            if ok:
                times.append(time.perf_counter() - start)
            else:
                failed += 1
    return health, graphql, failed


def cost_of_holding(process, workers, seconds):
    """(server CPU seconds per second, workers' resident memory in MB) over `seconds` with nothing sent."""
    cpu_before = tree_cpu_seconds(process.pid)
    time.sleep(seconds)
    cpu = (tree_cpu_seconds(process.pid) - cpu_before) / seconds
    return cpu, sum(memory_kb(pid, "VmRSS") for pid in workers) / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stalled", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7, help="rounds of each kind (with and without)")
    parser.add_argument("--requests", type=int, default=50, help="requests of each kind per round")
    parser.add_argument("--hold-seconds", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds before a request counts as failed")
    parser.add_argument("--tree", default=str(ROOT), help="the checkout to run (default: this one)")
    options = parser.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = options.stalled + 512
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise SystemExit(f"{options.stalled} connections need an open-file limit of {needed}; "
                             f"the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))

    figures = {"without": [], "with": []}
    with tempfile.TemporaryDirectory(prefix="slow-clients-bench-") as temp:
        process, url = start_ours(Path(temp) / "data", root=Path(options.tree).resolve(),
                                  env={"WIS_REQUEST_START_TIMEOUT": "3600", "WIS_ACCESS_LOG": "off",
                                       "WIS_LOG_LEVEL": "warning"})
        try:
            requests.post(url + "/graph/v2", json=PROCESS, headers=HEADERS, timeout=30).raise_for_status()
            workers = worker_pids(process.pid)
            port = int(url.rsplit(":", 1)[1])
            for round_number in range(options.rounds * 2):
                kind = "with" if round_number % 2 else "without"
                held = stall(port, options.stalled, workers) if kind == "with" else []
                time.sleep(1)  # in both kinds of round: the workers are done with what the opening sent
                try:
                    health, graphql, failed = latencies(url, options.requests, options.timeout)
                    cpu, rss = cost_of_holding(process, workers, options.hold_seconds)
                finally:
                    for sock in held:
                        sock.close()
                median = (lambda values: statistics.median(values) * 1000 if values else float("nan"))
                result = (median(health), median(graphql), failed, cpu, rss)
                figures[kind].append(result)
                print(f"round {round_number // 2 + 1}, {kind} {options.stalled if held else 0} stalled: "
                      f"/healthz {result[0]:.2f} ms, GraphQL read {result[1]:.2f} ms (medians), {failed} failed, "
                      f"server CPU {cpu:.3f} s/s, workers' RSS {rss:.0f} MB", flush=True)
                time.sleep(1)  # the closed connections leave the workers
            if worker_pids(process.pid) != workers:
                raise SystemExit("a worker was replaced during the run")
        finally:
            stop(process)

    print(f"\nmedians of rounds 2-{options.rounds} ({options.tree}):")
    for kind in ("without", "with"):
        kept = figures[kind][1:]
        columns = [statistics.median(values[i] for values in kept) for i in range(5)]
        print(f"  {kind} {options.stalled} stalled: /healthz {columns[0]:.2f} ms, GraphQL read {columns[1]:.2f} ms, "
              f"failed {sum(values[2] for values in kept)}, server CPU {columns[3]:.3f} s/s, "
              f"workers' RSS {columns[4]:.0f} MB")
    without, with_ = ([statistics.median(values[i] for values in figures[kind][1:]) for i in (0, 1)]
                      for kind in ("without", "with"))
    print(f"  with / without: /healthz {with_[0] / without[0]:.2f} x, GraphQL read {with_[1] / without[1]:.2f} x")
    rss = [statistics.median(values[4] for values in figures[kind][1:]) for kind in ("without", "with")]
    print(f"  workers' RSS per stalled connection: {(rss[1] - rss[0]) * 1024 / options.stalled:.1f} KB")


if __name__ == "__main__":
    main()
