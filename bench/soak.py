"""Soak: minutes of mixed traffic against gunicorn as shipped; memory, descriptors and tail latency per minute
(run by hand, not a test).

Starts `gunicorn -c python:service.gunicorn_config 'service:create_app()'` on a free 127.0.0.1 port with a fresh
data directory and a token in WIS_API_TOKENS, then drives it from `--clients` threads (one keep-alive session
each) for `--minutes`. Each client goes round a fixed mix: processCreate (bench/payload.py, 60 KB, 64 ids reused
so the stored data stops growing), productCreate, stationCreate, read queries, a refused input, a single upload,
a chunked upload in order, one with `--parallel` chunks in flight, and media downloads (whole and with Range).
Every minute prints, for each worker process (the gunicorn master's children), its RSS (VmRSS) and open file
descriptors and the machine's load average, then p50/p99 and the count of each kind of request in that minute.
At the end: each worker's RSS growth after minute 1, descriptor min/max, and each kind's p99 in the first and
last thirds of the run after minute 1 with its trend (Theil-Sen: the median of the slopes between every two
minutes, so that a minute or two slowed by other work on a shared machine does not make a trend; a leak
shows as a steady rise). Uploaded media older than a minute are deleted from the temporary
data directory as the run goes, so the disk does not fill; the downloads use media kept for the whole run.

    .venv/bin/python bench/soak.py [--minutes 10] [--clients 4] [--parallel 4]

Target (issue 13): worker RSS flat within 15 MB after the first minute, descriptors flat, p99 without a trend.
"""
import argparse
import hashlib
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from payload import MUTATION, request_body  # noqa: E402 (bench/ is not a package)
from upload_bench import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "soak-token-0001"
HEADERS = {"x-service-api-org": TOKEN}
KB = 1024
PNG = b"\x89PNG\r\n\x1a\n"
MP4 = b"\x00\x00\x00\x18ftypmp42"
IDS = 64
SINGLE_SIZE = 100 * KB
CHUNKED_SIZE, CHUNK_SIZE = 1024 * KB, 256 * KB
KEPT_MEDIA = 8
PRODUCT = "mutation($input: ProductCreateInput!) { productCreate(input: $input) }"
STATION = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"
READS = [
    ('query($id: String!) { process(id: $id) { id revision steps { id actions { id kind torque } '
     'torqueGroups { actions { id } } } billOfMaterials { part { id } quantity } } }', lambda n: {"id": f"soak_{n % IDS:02d}"}),
    ("query($after: String) { processes(first: 20, after: $after) { id name revision } }", lambda n: {"after": None}),
    ('query($id: String!) { product(id: $id) { id finalProcessId dependencies { processId quantity } } }',
     lambda n: {"id": f"soak_prod_{n % 16}"}),
    ("{ stations(first: 50) { id name updatedAt } }", lambda n: None),
]
# One round of a client; each name is a kind of request, timed and reported on its own.
MIX = (["processCreate"] * 4 + ["reads"] * 4 + ["stationCreate"] * 2 + ["productCreate", "refused input"]
       + ["media GET"] * 2 + ["media GET Range"] * 2 + ["single upload", "chunked in order", "chunked parallel"])


def blob(magic, size, seed):
    block = hashlib.sha256(seed.to_bytes(8, "big")).digest() * (size // 32 + 1)
    return magic + block[: size - len(magic)]


class Recorder:
    """Latencies per minute and kind, and failures; shared by the client threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = defaultdict(lambda: defaultdict(list))  # minute -> kind -> seconds
        self.failures = defaultdict(lambda: defaultdict(int))

    def record(self, minute, kind, seconds, ok):
        with self.lock:
            if ok:
                self.latencies[minute][kind].append(seconds)
            else:
                self.failures[minute][kind] += 1


class Client:
    """One keep-alive session going round MIX until the deadline."""

    def __init__(self, number, url, recorder, started, deadline, media, parallel):
        self.number, self.url, self.recorder = number, url, recorder
        self.started, self.deadline, self.media = started, deadline, media
        self.session = requests.Session()
        self.session.headers.update(HEADERS)
        self.pool = ThreadPoolExecutor(parallel)
        self.parallel_sessions = [requests.Session() for _ in range(parallel)]
        for session in self.parallel_sessions:
            session.headers.update(HEADERS)
        self.counter = itertools.count(number * 1_000_000)
        self.bodies = [request_body(f"soak_{n:02d}") for n in range(IDS)]

    def run(self):
        try:
            for kind in itertools.cycle(MIX):
                if time.monotonic() >= self.deadline:
                    return
                n = next(self.counter)
                start = time.monotonic()
                try:
                    ok = getattr(self, "_" + kind.replace(" ", "_"))(n)
                except requests.RequestException:
                    ok = False
                self.recorder.record(int((start - self.started) // 60), kind, time.monotonic() - start, ok)
        finally:
            self.pool.shutdown()
            for session in (self.session, *self.parallel_sessions):
                session.close()

    def _graphql(self, query, variables, session=None, refused=False):
        response = (session or self.session).post(self.url + "/graph/v2", json={"query": query, "variables": variables},
                                                  timeout=60)
        return response.status_code == 200 and (("errors" in response.json()) == refused)

    def _processCreate(self, n):
        response = self.session.post(self.url + "/graph/v2", data=self.bodies[n % IDS], timeout=60,
                                     headers={"Content-Type": "application/json"})
        return response.status_code == 200 and "errors" not in response.json()

    def _productCreate(self, n):
        return self._graphql(PRODUCT, {"input": {"product": {
            "id": f"soak_prod_{n % 16}", "name": f"Product {n}", "finalProcessId": "soak_01",
            "dependencies": [{"processId": "soak_01", "upstreamProcessId": "soak_00", "quantity": 2}]}}})

    def _stationCreate(self, n):
        return self._graphql(STATION, {"input": {"station": {"id": f"soak_st_{n % IDS}", "name": f"Station {n}"}}})

    def _reads(self, n):
        query, variables = READS[n % len(READS)]
        return self._graphql(query, variables(n))

    def _refused_input(self, n):
        return self._graphql(MUTATION, {"input": {"process": {"id": n, "name": "refused: id is not a string"}}},
                             refused=True)

    def _single_upload(self, n):
        data = blob(PNG, SINGLE_SIZE, n)
        response = self.session.post(self.url + "/uploads", timeout=60, data={
            "destinationId": "stepImage", "sha": hashlib.sha256(data).hexdigest()}, files={"file": ("soak.png", data)})
        return response.status_code == 201

    def _chunked(self, n, in_parallel):
        data = blob(MP4, CHUNKED_SIZE, n)
        response = self.session.post(self.url + "/uploads", timeout=60, json={
            "destinationId": "stepVideo", "fileName": "soak.mp4", "fileSize": len(data),
            "sha": hashlib.sha256(data).hexdigest()})
        if response.status_code != 201:
            return False
        stream = self.url + "/uploads/" + response.json()["streamId"]
        chunks = [data[start:start + CHUNK_SIZE] for start in range(0, len(data), CHUNK_SIZE)]

        def send(index, session):
            return session.patch(stream, timeout=60, data={"chunkIndex": str(index), "totalChunks": str(len(chunks))},
                                 files={"file": ("blob", chunks[index])}).status_code

        if in_parallel:  # all but the last at once, then the last, which completes the stream
            statuses = list(self.pool.map(send, range(len(chunks) - 1), self.parallel_sessions))
        else:
            statuses = [send(index, self.session) for index in range(len(chunks) - 1)]
        return all(status == 200 for status in statuses) and send(len(chunks) - 1, self.session) == 201

    def _chunked_in_order(self, n):
        return self._chunked(n, in_parallel=False)

    def _chunked_parallel(self, n):
        return self._chunked(n, in_parallel=True)

    def _media_GET(self, n):
        response = self.session.get(self.url + self.media[n % len(self.media)], timeout=60)
        return response.status_code == 200 and len(response.content) == CHUNKED_SIZE

    def _media_GET_Range(self, n):
        start = (n * 4099) % (CHUNKED_SIZE - 65536)
        response = self.session.get(self.url + self.media[n % len(self.media)], timeout=60,
                                    headers={"Range": f"bytes={start}-{start + 65535}"})
        return response.status_code == 206 and len(response.content) == 65536


def worker_pids(master):
    """The gunicorn master's child processes (its workers)."""
    try:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        return sorted(int(pid) for pid in children)
    except FileNotFoundError:
        return []


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000


def clean_media(data_dir, kept, older_than):
    """Delete uploaded media files last written before `older_than`, except those downloaded throughout."""
    removed = 0
    for path in (data_dir / "orgs").glob("*/media/*/*"):
        try:
            if path.name not in kept and path.stat().st_mtime < older_than:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            pass
    return removed


def start_server(data_dir):
    port = free_port()
    env = dict(os.environ, WIS_DATA_DIR=str(data_dir), WIS_API_TOKENS=f"default:{TOKEN}", WIS_BIND=f"127.0.0.1:{port}")
    errors = open(data_dir.parent / "gunicorn-stderr.log", "wb")
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:service.gunicorn_config",
                                "service:create_app()"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited with status {process.returncode}")
        try:
            if requests.get(url + "/healthz", timeout=1).status_code == 200:
                return process, url
        except requests.RequestException:
            pass
        time.sleep(0.1)
    stop_server(process)
    raise SystemExit("gunicorn did not start")


def stop_server(process):
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def seed(url):
    """What products and reads refer to, and the media downloaded throughout; returns those media paths."""
    session = requests.Session()
    session.headers.update(HEADERS)
    for body in (request_body(f"soak_{n:02d}") for n in range(IDS)):
        assert session.post(url + "/graph/v2", data=body, headers={"Content-Type": "application/json"},
                            timeout=60).status_code == 200
    paths = []
    for n in range(KEPT_MEDIA):
        data = blob(MP4, CHUNKED_SIZE, 10**9 + n)
        response = session.post(url + "/uploads", files={"file": ("kept.mp4", data)}, data={"destinationId": "stepVideo"},
                                timeout=60)
        assert response.status_code == 201, response.text
        paths.append(response.json()["path"])
    session.close()
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4, help="client threads, one keep-alive session each")
    parser.add_argument("--parallel", type=int, default=4, help="chunks in flight in a parallel chunked upload")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="wis-soak-") as temp:
        data_dir = Path(temp) / "data"
        server, url = start_server(data_dir)
        recorder = Recorder()
        threads = []
        try:
            media = seed(url)
            kept = {path.rsplit("/", 1)[1] for path in media}
            started = time.monotonic()
            deadline = started + args.minutes * 60
            for number in range(args.clients):
                client = Client(number, url, recorder, started, deadline, media, args.parallel)
                threads.append(threading.Thread(target=client.run, daemon=True))
                threads[-1].start()
            print(f"gunicorn {server.pid} as shipped, workers {worker_pids(server.pid)}; {args.clients} clients, "
                  f"{args.minutes} minutes", flush=True)
            samples = []  # (minute, {pid: (rss MB, fds)})
            for minute in range(args.minutes):
                time.sleep(max(0.0, started + (minute + 1) * 60 - time.monotonic()))
                workers = {pid: (rss_mb(pid), open_fds(pid)) for pid in worker_pids(server.pid)}
                samples.append((minute + 1, workers))
                clean_media(data_dir, kept, time.time() - 60)
                report_minute(minute, workers, recorder)
        finally:
            for thread in threads:
                thread.join(timeout=120)
            stop_server(server)
    summary(samples, recorder, args.minutes)


def report_minute(minute, workers, recorder):
    print(f"minute {minute + 1}: " + ", ".join(f"worker {pid} RSS {rss:.1f} MB fds {fds}"
                                               for pid, (rss, fds) in sorted(workers.items()))
          + f"; load average {os.getloadavg()[0]:.1f}", flush=True)
    with recorder.lock:
        latencies = {kind: list(values) for kind, values in recorder.latencies[minute].items()}
        failures = dict(recorder.failures[minute])
    for kind in dict.fromkeys(MIX):
        values = latencies.get(kind, [])
        figures = (f"p50 {percentile(values, 0.5):7.1f} ms  p99 {percentile(values, 0.99):7.1f} ms" if values
                   else "no request")
        print(f"    {kind:18} {len(values):6d} requests  {figures}  failed {failures.get(kind, 0)}", flush=True)


def summary(samples, recorder, minutes):
    print("summary:")
    pids = sorted({pid for _, workers in samples for pid in workers})
    for pid in pids:
        series = [(minute, workers[pid]) for minute, workers in samples if pid in workers]
        rss = [value[0] for _, value in series]
        fds = [value[1] for _, value in series]
        after_first = rss[1:] or rss
        print(f"  worker {pid}: RSS minute 1 {rss[0]:.1f} MB, minutes 2-{series[-1][0]} {min(after_first):.1f}-"
              f"{max(after_first):.1f} MB (growth after minute 1: {max(after_first) - rss[0]:+.1f} MB, "
              f"last - minute 2: {rss[-1] - after_first[0]:+.1f} MB); fds {min(fds)}-{max(fds)}")
    later = list(range(1, minutes))  # minutes 2.. (0-based)
    third = max(1, len(later) // 3)
    for kind in dict.fromkeys(MIX):
        def p99(minute_numbers):
            values = [value for minute in minute_numbers for value in recorder.latencies[minute].get(kind, [])]
            return percentile(values, 0.99) if values else float("nan")
        per_minute = [p99([minute]) for minute in range(minutes)]
        slope = trend(later, [per_minute[minute] for minute in later])
        failed = sum(recorder.failures[minute].get(kind, 0) for minute in range(minutes))
        print(f"  {kind:18} p99 first third {p99(later[:third]):7.1f} ms, last third {p99(later[-third:]):7.1f} ms, "
              f"trend {slope:+.1f} ms/minute; per minute " + " ".join(f"{value:.0f}" for value in per_minute)
              + f"; failed {failed}")


def trend(xs, ys):
    """Theil-Sen slope of ys over xs: the median slope between every two points (0 with fewer than 2)."""
    points = [(x, y) for x, y in zip(xs, ys) if y == y]
    slopes = [(y2 - y1) / (x2 - x1) for (x1, y1), (x2, y2) in itertools.combinations(points, 2) if x2 != x1]
    return statistics.median(slopes) if slopes else 0.0


if __name__ == "__main__":
    main()
