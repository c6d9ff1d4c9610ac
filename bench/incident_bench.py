"""Incidents as an operator meets them (issue 22, CONTRACT 13): two nodes (gunicorn, shipped worker) on one real
PostgreSQL and one SeaweedFS, a client loop of GraphQL upserts spread over both nodes, and an engine stopped and
started again by its process id. Prints, per second, how many upserts succeeded and failed and what /readyz said,
then the figures: time to fail (the slowest refusal while the engine was down), time to recover (from the engine's
return to the last failure), and the upserts and uploads served meanwhile.

    .venv/bin/python bench/incident_bench.py                        # database 20 s, 70 s; store 20 s; max_connections
    .venv/bin/python bench/incident_bench.py --scenario database --seconds 5 --workers 2

Run from the repository root of the code to measure (gunicorn imports the `service` in the working directory), so
`main`'s figures come from a checkout of main with the same command. Timings on a busy machine are noisy: compare
runs made one after the other.
"""
import argparse
import collections
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from shared_backend import SharedBackend  # noqa: E402
from support.servers import SHIPPED_WORKER_CLASS, GunicornServer  # noqa: E402
from support.tokens import HEADERS  # noqa: E402

MUTATION = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16


class Nodes:
    """Two gunicorn nodes on one database and one bucket prefix."""

    def __init__(self, shared, workers, directory):
        settings_env = shared.server_env()
        self.servers = [GunicornServer(Path(directory) / f"node{number}", workers=workers, env=settings_env,
                                       extra_args=("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "8"))
                        for number in (1, 2)]
        self.urls = [server.url for server in self.servers]

    def stop(self):
        for server in self.servers:
            server.stop()


class Client:
    """Threads sending upserts (and a small upload every tenth request) round-robin to the nodes; each recorded as
    (start, seconds, ok, kind)."""

    def __init__(self, urls, threads=4):
        self.urls = urls
        self.samples = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(number,), daemon=True) for number in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self, number):
        count = 0
        session = requests.Session()
        while not self._stop.is_set():
            url = self.urls[(number + count) % len(self.urls)]
            kind = "upload" if count % 10 == 9 else "upsert"
            started = time.monotonic()
            try:
                if kind == "upsert":
                    response = session.post(url + "/graph/v2", headers=HEADERS, timeout=30, json={
                        "query": MUTATION, "variables": {"input": {"station": {"id": f"bench_{number}_{count % 20}",
                                                                               "name": "x"}}}})
                    ok = response.status_code == 200 and not response.json().get("errors")
                else:
                    response = session.post(url + "/uploads", headers=HEADERS, timeout=30,
                                            data={"destinationId": "stepImage"}, files={"file": ("a.png", PNG)})
                    ok = response.status_code == 201
            except (requests.RequestException, ValueError):
                ok = False
            self.samples.append((started, time.monotonic() - started, ok, kind))
            count += 1
            time.sleep(0.02)

    def stop(self):
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def readiness(urls):
    statuses = []
    for url in urls:
        try:
            statuses.append(requests.get(url + "/readyz", timeout=10).status_code)
        except requests.RequestException:
            statuses.append("-")
    return statuses


def run_scenario(name, urls, client, stop, start, seconds):
    """Stop an engine for `seconds` under the client's traffic, start it, watch 15 s more; print and return figures."""
    print(f"\n== {name}: {seconds} s")
    print("  second  upserts ok/failed  uploads ok/failed  readyz")
    began = time.monotonic()
    stop()
    stopped = time.monotonic()
    probes = {}
    while time.monotonic() < stopped + seconds:
        probes[int(time.monotonic() - began)] = readiness(urls)
        time.sleep(1)
    start()
    back = time.monotonic()
    while time.monotonic() < back + 15:
        probes[int(time.monotonic() - began)] = readiness(urls)
        time.sleep(1)
    samples = [sample for sample in list(client.samples) if sample[0] >= began]
    per_second = collections.defaultdict(collections.Counter)
    for started, _seconds, ok, kind in samples:
        per_second[int(started - began)][(kind, ok)] += 1
    for second in sorted(per_second):
        counts = per_second[second]
        print(f"  {second:6d}  {counts[('upsert', True)]:5d}/{counts[('upsert', False)]:<5d}"
              f"        {counts[('upload', True)]:5d}/{counts[('upload', False)]:<5d}        {probes.get(second, '')}")
    during = [sample for sample in samples if stopped + 2 <= sample[0] < back]
    failed_during = [sample for sample in during if not sample[2]]
    after = [sample for sample in samples if sample[0] >= back]
    failed_after = [sample for sample in after if not sample[2]]
    figures = {
        "slowest failure while down (s)": round(max((s[1] for s in failed_during), default=0), 3),
        "served while down (upserts, uploads)": (sum(1 for s in during if s[2] and s[3] == "upsert"),
                                                 sum(1 for s in during if s[2] and s[3] == "upload")),
        "failed while down": len(failed_during),
        "recovered after return (s)": round(max((s[0] + s[1] - back for s in failed_after), default=0), 2),
    }
    print("  " + "; ".join(f"{key}: {value}" for key, value in figures.items()))
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=["database", "store", "max-connections", "all"], default="all")
    parser.add_argument("--seconds", type=float, nargs="*", default=None,
                        help="database outage lengths (default 20 70); the store's and max_connections' use the first")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers per node (default 3, as the issue)")
    args = parser.parse_args()
    lengths = args.seconds or [20, 70]
    with tempfile.TemporaryDirectory(prefix="wis-incident-") as directory, SharedBackend() as shared:
        nodes = Nodes(shared, args.workers, directory)
        client = Client(nodes.urls)
        held = []
        try:
            time.sleep(3)
            if args.scenario in ("database", "all"):
                for length in lengths:
                    run_scenario("PostgreSQL stopped", nodes.urls, client, shared.postgres.stop, shared.postgres.start,
                                 length)
            if args.scenario in ("store", "all"):
                run_scenario("SeaweedFS stopped", nodes.urls, client, shared.seaweed.stop, shared.seaweed.start,
                             lengths[0])
            if args.scenario in ("max-connections", "all"):
                def fill():
                    try:
                        while True:
                            held.append(psycopg.connect(shared.postgres.url(), connect_timeout=5))
                    except psycopg.OperationalError:
                        pass

                def release():
                    while held:
                        held.pop().close()

                run_scenario("max_connections held by others", nodes.urls, client, fill, release, lengths[0])
        finally:
            client.stop()
            for connection in held:
                connection.close()
            nodes.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
