"""Event streams (GET /events) measured by hand, not a test: how soon a commit reaches open streams, and what idle
streams cost.

Starts gunicorn with the configuration the project ships (`-c python:service.gunicorn_config`), the file backend
(a fresh data directory) or the shared one (`--backend shared`: PostgreSQL and SeaweedFS from tests/support/engines),
on a free 127.0.0.1 port, with `--workers` workers and enough threads and places for every stream. The streams are
read by one thread of this process over raw sockets (a selector; each arrival stamped when its bytes come in), so
that the reader adds little of its own to what is measured.

- Latency: `--streams` streams open (64), then `--commits` station changes sent one after the other (200) through
  GraphQL, a commit every `--interval` seconds. Each event's latency on each stream is from the moment its commit
  was sent (the commit's own answer time included) to the moment its `id:` line arrived. The baseline, alternated
  with it from run to run: the same commits with no stream open. Per run: p50 and p99 of the events' latencies and
  of the commits' round trips, and the server's CPU seconds (master and workers, from /proc) per commit; the first
  `--warm-up` commits of each run are left out of the percentiles.
- Idle: `--idle-streams` streams (1,000) held open for `--seconds` (60) while nothing commits, against the same
  server with no stream open for as long (the baseline), alternating which comes first from run to run: the
  server's CPU seconds over the time, and the workers' resident memory (VmRSS) at its end (and before any idle stream
  was opened).

- Two nodes (`--backend shared --nodes 2`): a second server on the same database and bucket; the streams are opened
  on it and the commits sent to the first, so each event crosses from node to node (PostgreSQL's NOTIFY).

Medians over `--runs` runs (3). `--skip-idle` measures the latency only.

    .venv/bin/python bench/event_stream_bench.py [--backend file|shared] [--nodes 1|2] [--runs 3] [--streams 64]
        [--commits 200] [--interval 0.05] [--idle-streams 1000] [--seconds 60] [--workers 2] [--skip-idle]
"""
import argparse
import contextlib
import re
import resource
import selectors
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graphql_bench import TOKEN, start  # noqa: E402 (bench/ is not a package)
from shared_backend import SharedBackend, tree_cpu_seconds  # noqa: E402
from upload_bench import stop  # noqa: E402

ID_LINE = re.compile(rb"(?:^|\n)id: (\d+)\n")
MUTATION = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"


class Readers:
    """`count` streams of GET /events read by one thread: for each seq, the times its id line arrived."""

    def __init__(self, host, port, count):
        self.arrivals = {}  # seq -> [monotonic time on each stream]
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        request = (f"GET /events HTTP/1.1\r\nHost: {host}:{port}\r\nx-service-api-org: {TOKEN}\r\n"
                   "Accept: text/event-stream\r\n\r\n").encode()
        self._sockets = []
        for _ in range(count):
            connection = socket.create_connection((host, port))
            connection.sendall(request)
            head = connection.recv(65536)
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"a stream was refused: {head[:200]!r}")
            connection.setblocking(False)
            self._selector.register(connection, selectors.EVENT_READ, bytearray())
            self._sockets.append(connection)
        self._running = True
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        while self._running:
            for key, _ in self._selector.select(0.5):
                try:
                    data = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                now = time.monotonic()
                buffer = key.data
                buffer += data
                for match in ID_LINE.finditer(buffer):
                    with self._lock:
                        self.arrivals.setdefault(int(match.group(1)), []).append(now)
                cut = buffer.rfind(b"\n")
                del buffer[:cut + 1]

    def close(self):
        self._running = False
        self._thread.join()
        for connection in self._sockets:
            self._selector.unregister(connection)
            connection.close()
        self._selector.close()


def commit(session, url, number):
    response = session.post(url, timeout=60, json={
        "query": MUTATION, "variables": {"input": {"station": {"id": "bench_press", "name": f"Press {number}"}}}})
    if response.status_code != 200 or "errors" in response.json():
        raise SystemExit(f"commit: {response.status_code} {response.text[:300]}")


def latest_seq(session, url):
    return session.post(url, timeout=60, json={"query": "{ latestEventSeq }"}).json()["data"]["latestEventSeq"]


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def latency_run(server, args, streams, streamed=None):
    """The figures of `--commits` commits to `server` with `streams` streams open on `streamed` (another node, or
    `server` itself when None; 0 streams: the baseline, CPU only)."""
    session = requests.Session()
    session.headers["x-service-api-org"] = TOKEN
    readers = Readers("127.0.0.1", (streamed or server).port, streams)
    try:
        time.sleep(1)  # every stream registered with its worker's hub
        start_seq = latest_seq(session, server.url)
        sent, round_trips = {}, []
        cpu_before = tree_cpu_seconds(server.process.pid)
        for number in range(args.commits):
            began = time.monotonic()
            commit(session, server.url, number)
            round_trips.append(time.monotonic() - began)
            sent[start_seq + number + 1] = began
            time.sleep(args.interval)
        time.sleep(2)  # the last events arrive
        cpu = tree_cpu_seconds(server.process.pid) - cpu_before
    finally:
        readers.close()
    figures = {"commit_p50_ms": percentile(round_trips[args.warm_up:], 0.5) * 1000,
               "commit_p99_ms": percentile(round_trips[args.warm_up:], 0.99) * 1000,
               "cpu_ms_per_commit": cpu * 1000 / args.commits}
    if not streams:
        return figures
    latencies = []
    for seq in [seq for seq in sent if seq > start_seq + args.warm_up]:
        arrived = readers.arrivals.get(seq, [])
        if len(arrived) != streams:
            raise SystemExit(f"event {seq} reached {len(arrived)} of {streams} streams")
        latencies += [when - sent[seq] for when in arrived]
    return {"p50_ms": percentile(latencies, 0.5) * 1000, "p99_ms": percentile(latencies, 0.99) * 1000, **figures}


def workers_rss_mb(server):
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()
    total = 0
    for pid in children:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def idle_run(server, streams, seconds):
    readers = Readers("127.0.0.1", server.port, streams) if streams else None
    try:
        time.sleep(3)  # opened and registered: what is measured is holding them
        before = tree_cpu_seconds(server.process.pid)
        time.sleep(seconds)
        cpu = tree_cpu_seconds(server.process.pid) - before
        rss = workers_rss_mb(server)
    finally:
        if readers is not None:
            readers.close()
    time.sleep(6)  # the hung-up streams are freed before the next run
    return {"cpu_s": cpu, "rss_mb": rss}


class Server:
    def __init__(self, args, temp, stack, backend=None, name="data"):
        """A node; `backend`: the shared backend's settings of another node, for a second node on the same engines."""
        places = max(args.streams, args.idle_streams)
        env = {"WIS_WORKERS": str(args.workers), "WIS_THREADS": str(places + 16),
               "WIS_EVENT_STREAMS_PER_WORKER": str(places), "WIS_WORKER_CONNECTIONS": str(places + 100),
               "WIS_ACCESS_LOG": "off"}
        if args.backend == "shared":
            self.backend = backend or stack.enter_context(SharedBackend()).server_env()
            env.update(self.backend)
        self.process, self.url = start("service:create_app()", temp / name, env=env)
        stack.callback(stop, self.process)
        self.port = int(self.url.split(":")[2].split("/")[0])


def medians(runs):
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("file", "shared"), default="file")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--warm-up", type=int, default=10, help="commits of each run left out of its figures")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between commits")
    parser.add_argument("--idle-streams", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the idle streams are held")
    parser.add_argument("--nodes", type=int, choices=(1, 2), default=1,
                        help="2 (shared backend): streams on a second node, commits to the first")
    parser.add_argument("--skip-idle", action="store_true", help="measure the latency only")
    args = parser.parse_args()
    if args.nodes == 2 and args.backend != "shared":
        parser.error("two nodes share the shared backend: add --backend shared")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.idle_streams + 256)), hard))
    with tempfile.TemporaryDirectory() as temp, contextlib.ExitStack() as stack:
        server = Server(args, Path(temp), stack)
        streamed = Server(args, Path(temp), stack, server.backend, "data-2") if args.nodes == 2 else None
        latency = {"none": [], "streams": []}
        for run in range(args.runs):
            order = ("none", "streams") if run % 2 == 0 else ("streams", "none")
            for contestant in order:
                streams = args.streams if contestant == "streams" else 0
                latency[contestant].append(latency_run(server, args, streams, streamed))
                print(f"latency run {run + 1}, {contestant}: "
                      + ", ".join(f"{key} {value:.2f}" for key, value in latency[contestant][-1].items()), flush=True)
        fresh_rss = workers_rss_mb(server)
        idle = {"none": [], "streams": []}
        for run in range(0 if args.skip_idle else args.runs):
            order = ("none", "streams") if run % 2 == 0 else ("streams", "none")
            for contestant in order:
                streams = args.idle_streams if contestant == "streams" else 0
                idle[contestant].append(idle_run(server, streams, args.seconds))
                print(f"idle run {run + 1}, {contestant}: {idle[contestant][-1]}", flush=True)
    report(args, latency, idle, fresh_rss)


def report(args, latency, idle, fresh_rss):
    figures, baseline = medians(latency["streams"]), medians(latency["none"])
    where = "on a second node" if args.nodes == 2 else "on the node committed to"
    print(f"\n{args.streams} streams {where}, {args.commits} commits ({args.backend} backend, {args.workers} workers), "
          f"medians of {args.runs} runs:")
    print(f"  commit to stream: p50 {figures['p50_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms")
    print(f"  the commit's own round trip: p50 {figures['commit_p50_ms']:.1f} ms, p99 {figures['commit_p99_ms']:.1f} "
          f"ms (with no stream open: p50 {baseline['commit_p50_ms']:.1f} ms, p99 {baseline['commit_p99_ms']:.1f} ms)")
    cpu, cpu_none = figures["cpu_ms_per_commit"], baseline["cpu_ms_per_commit"]
    print(f"  server CPU per commit: {cpu:.1f} ms with the streams, {cpu_none:.1f} ms with none "
          f"({cpu / cpu_none:.2f} x)")
    if not idle["none"]:
        return
    none, streams = medians(idle["none"]), medians(idle["streams"])
    print(f"{args.idle_streams} idle streams for {args.seconds:g} s: server CPU {streams['cpu_s']:.2f} s against "
          f"{none['cpu_s']:.2f} s with none open (+{streams['cpu_s'] - none['cpu_s']:.2f} s); workers' RSS "
          f"{streams['rss_mb']:.0f} MB with them open, {fresh_rss:.0f} MB before the first were opened (the threads' "
          "memory is kept for the next ones)")


if __name__ == "__main__":
    main()
