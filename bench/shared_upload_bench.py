"""Uploads through the shared backend against @tus/server + @tus/s3-store on the same SeaweedFS (run by hand).

One PostgreSQL and one SeaweedFS (tests/support/engines.py, bench/shared_backend.py) serve the whole benchmark. Two servers
stay up throughout: ours on the shared backend under the shipped gunicorn configuration, and bench/tus/s3-server.js
(@tus/s3-store with its part size set to the chunk size, writing to a bucket of its own on the same SeaweedFS).
The client is this process with `http.client`, one keep-alive connection per upload or in-flight chunk, each body
one `os.pread` of the file sent as it is (a chunk's multipart/form-data envelope is sent around it, not copied in):

- `chunks`: our chunk API (POST /uploads, then PATCH /uploads/<id> multipart/form-data with chunkIndex, totalChunks,
  file), the file's sha256 given at creation and verified by the server;
- `tus`: tus core against our /uploads (sha256 in Upload-Metadata, verified by the server);
- `tus-s3`: the same tus client code against @tus/s3-store, whose object's size is checked afterwards.

Modes: one upload with one request in flight, then `--parallel` in flight: our chunk API sends `--parallel` chunks
of one upload at once; tus core is sequential, so both tus servers get `--parallel` uploads of different files at
once. Each mode is warmed up once per server (discarded), then the servers alternate `--runs` times (the order
reversed every other run). Every run uploads a file with different bytes (its first block is rewritten), so no
server can find a copy of it. Per run: MB/s (creation included), the server's CPU seconds per GB (utime+stime of its
process tree from /proc, before and after), SeaweedFS's and PostgreSQL's CPU per GB over the same span, the client's
own CPU per GB, the completing request (ms, and against the median request of its upload); per mode the largest rise
of a worker's peak RSS (VmHWM, ours; the node process's for tus-s3) over its figure after the warm-up.

    .venv/bin/python bench/shared_upload_bench.py [--runs 3] [--size-mb 500] [--chunk-mb 5] [--parallel 4]

Needs node >= 20.19 and npm (bench/tus is installed with `npm ci` when @tus/s3-store is missing).
Targets: chunks and tus >= 1.0x tus-s3, completing request <= 2x the median one, worker RSS rise <= 50 MB.
"""
import argparse
import contextlib
import hashlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shared_backend import SharedBackend, tree_cpu_seconds  # noqa: E402 (bench/ is not a package)
from tus_bench import b64, tus_upload  # noqa: E402
from upload_bench import MB, TOKEN, TUS_DIR, free_port, generate, memory_kb, start_ours, stop, wait_ready, \
    worker_pids  # noqa: E402

GB = 1024 * MB
REFERENCE_BUCKET = "wis-bench-tus"
AUTH = {"x-service-api-org": TOKEN}


def answer(connection, what, expected):
    response = connection.getresponse()
    body = response.read()
    if response.status not in expected:
        raise SystemExit(f"{what}: {response.status} {body[:300]!r}")
    return response, body


class ChunkClient:
    """Our chunk API over `parallel` keep-alive connections (one per thread of the pool that sends chunks)."""

    def __init__(self, port, parallel):
        self.port, self.parallel = port, parallel

    def upload(self, file, size, chunk_size, sha):
        create = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            create.request("POST", "/uploads", body=json.dumps({
                "destinationId": "stepVideo", "fileName": file.name, "fileSize": size, "sha": sha}),
                headers={**AUTH, "Content-Type": "application/json"})
            stream = json.loads(answer(create, "POST /uploads", (200, 201))[1])["streamId"]
        finally:
            create.close()
        total = -(-size // chunk_size)
        local, connections = threading.local(), []
        fd = os.open(file, os.O_RDONLY)

        def send(index):
            if not hasattr(local, "connection"):
                local.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
                connections.append(local.connection)
            connection = local.connection
            data = os.pread(fd, chunk_size, index * chunk_size)
            boundary = uuid.uuid4().hex
            head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"chunkIndex\"\r\n\r\n{index}\r\n"
                    f"--{boundary}\r\nContent-Disposition: form-data; name=\"totalChunks\"\r\n\r\n{total}\r\n"
                    f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c\"\r\n"
                    f"Content-Type: application/octet-stream\r\n\r\n").encode()
            tail = f"\r\n--{boundary}--\r\n".encode()
            sent = time.perf_counter()
            # An iterable body is sent piece by piece: the chunk is not copied into one envelope.
            connection.request("PATCH", f"/uploads/{stream}", body=iter((head, data, tail)), headers={
                **AUTH, "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(len(head) + len(data) + len(tail))})
            response, body = answer(connection, f"PATCH chunk {index}", (200, 201))
            return response.status, body, time.perf_counter() - sent

        try:
            with ThreadPoolExecutor(max_workers=self.parallel) as pool:
                results = list(pool.map(send, range(total)))
        finally:
            os.close(fd)
            for connection in connections:
                connection.close()
        completing = [result for result in results if result[0] == 201]
        if len(completing) != 1:
            raise SystemExit(f"expected one completing response, got {len(completing)}")
        return completing[0][2], [result[2] for result in results]


class Ours:
    """Our server on the shared backend; `mode` is 'chunks' or 'tus'."""

    def __init__(self, temp, shared):
        self.data_dir = temp / "ours-data"
        self.process, url = start_ours(self.data_dir, env=shared.server_env())
        self.port = int(url.rsplit(":", 1)[1])
        self.workers = worker_pids(self.process.pid)

    def chunks(self, parallel):
        client = ChunkClient(self.port, parallel)

        def upload(file, size, chunk_size, sha):
            return client.upload(file, size, chunk_size, sha)
        return upload

    def tus(self, file, size, chunk_size, sha):
        metadata = f"destinationId {b64('stepVideo')},filename {b64(file.name)},sha256 {b64(sha)}"
        _, latencies, headers = tus_upload(self.port, "/uploads", file, size, chunk_size, metadata, AUTH)
        if "Media-Path" not in headers:
            raise SystemExit(f"our tus upload ended without a Media-Path: {headers}")
        return latencies[-1], latencies

    def peak_rss_kb(self):
        return {pid: memory_kb(pid, "VmHWM") for pid in self.workers}


class Reference:
    """@tus/server + @tus/s3-store (bench/tus/s3-server.js) on a bucket of its own."""

    def __init__(self, shared, chunk_size):
        self.client = shared.seaweed.client()
        shared.seaweed.create_bucket(REFERENCE_BUCKET)
        self.port = free_port()
        self.process = subprocess.Popen(
            ["node", "s3-server.js", str(self.port), REFERENCE_BUCKET, str(chunk_size)], cwd=TUS_DIR,
            env=dict(os.environ, **shared.seaweed.env()), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(f"http://127.0.0.1:{self.port}/files", self.process, "the tus S3 server")

    def tus(self, file, size, chunk_size, sha):
        path, latencies, _ = tus_upload(self.port, "/files", file, size, chunk_size, f"filename {b64(file.name)}", {})
        key = path.rsplit("/", 1)[1]
        stored = self.client.head_object(Bucket=REFERENCE_BUCKET, Key=key)["ContentLength"]
        if stored != size:
            raise SystemExit(f"@tus/s3-store stored {stored} bytes, not {size}")
        self.client.delete_object(Bucket=REFERENCE_BUCKET, Key=key)
        return latencies[-1], latencies

    def peak_rss_kb(self):
        return {self.process.pid: memory_kb(self.process.pid, "VmHWM")}


def fresh_bytes(files, run):
    """Make every file different from all earlier runs (its first block); return [(path, sha256)]."""
    result = []
    for number, path in enumerate(files):
        with open(path, "r+b") as handle:
            handle.seek(12)
            handle.write(run.to_bytes(8, "big") + number.to_bytes(8, "big"))
            handle.seek(0)
            result.append((path, hashlib.file_digest(handle, "sha256").hexdigest()))
    return result


def measure(server_pid, upload, files, size, chunk_size, shared):
    """Upload `files` at once (one thread each) with `upload`; the run's figures."""
    cpu, engines, client = tree_cpu_seconds(server_pid), shared.cpu_seconds(), time.process_time()
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(files)) as pool:
        uploads = list(pool.map(lambda item: upload(item[0], size, chunk_size, item[1]), files))
    elapsed = time.perf_counter() - start
    cpu_after, engines_after, client_after = tree_cpu_seconds(server_pid), shared.cpu_seconds(), time.process_time()
    received = size * len(files) / GB
    return {
        "mbps": size * len(files) / MB / elapsed,
        "server_cpu_s_per_gb": (cpu_after - cpu) / received,
        "seaweed_cpu_s_per_gb": (engines_after["seaweed"] - engines["seaweed"]) / received,
        "postgres_cpu_s_per_gb": (engines_after["postgres"] - engines["postgres"]) / received,
        "client_cpu_s_per_gb": (client_after - client) / received,
        "completing_vs_median": statistics.median(completing / statistics.median(latencies)
                                                  for completing, latencies in uploads),
        "median_request_ms": statistics.median(latency for _, latencies in uploads for latency in latencies) * 1000,
        "completing_request_ms": statistics.median(completing for completing, _ in uploads) * 1000,
    }


def ensure_s3_store_installed():
    if (TUS_DIR / "node_modules" / "@tus" / "s3-store").is_dir():
        return
    print("installing the tus reference servers: (cd bench/tus && npm ci)", flush=True)
    subprocess.run(["npm", "ci"], cwd=TUS_DIR, check=True, stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--chunk-mb", type=int, default=5)
    parser.add_argument("--parallel", type=int, default=4, help="requests in flight at once in the second mode")
    args = parser.parse_args()
    size, chunk_size = args.size_mb * MB, args.chunk_mb * MB
    ensure_s3_store_installed()
    with tempfile.TemporaryDirectory(prefix="wis-shared-bench-") as temp, contextlib.ExitStack() as stack:
        temp = Path(temp)
        files = []
        for number in range(max(1, args.parallel)):
            files.append(temp / f"bench-{number}.mp4")
            generate(files[-1], size)
        shared = stack.enter_context(SharedBackend())
        ours = Ours(temp, shared)
        stack.callback(stop, ours.process)
        reference = Reference(shared, chunk_size)
        stack.callback(stop, reference.process)
        modes = {
            "one request in flight": (1, {"chunks": (ours, ours.chunks(1)), "tus": (ours, ours.tus),
                                          "tus-s3": (reference, reference.tus)}),
            f"{args.parallel} in flight": (args.parallel, {
                "chunks": (ours, ours.chunks(args.parallel)), "tus": (ours, ours.tus),
                "tus-s3": (reference, reference.tus)}),
        }
        run_number = 0
        report, idle = {}, None
        for mode, (parallel, servers) in modes.items():
            def chosen(name):
                # The chunk API puts its parallelism inside one upload; tus core needs one upload per request.
                nonlocal run_number
                run_number += 1
                return fresh_bytes(files[:1] if name == "chunks" or parallel == 1 else files, run_number)

            for name, (server, upload) in servers.items():
                measure(server.process.pid, upload, chosen(name), size, chunk_size, shared)
            if idle is None:
                idle = {name: server.peak_rss_kb() for name, (server, _) in servers.items()}
            runs = {name: [] for name in servers}
            for number in range(args.runs):
                order = list(servers.items()) if number % 2 == 0 else list(servers.items())[::-1]
                for name, (server, upload) in order:
                    runs[name].append(measure(server.process.pid, upload, chosen(name), size, chunk_size, shared))
                    print(f"{mode}, run {number + 1}, {name}: "
                          + ", ".join(f"{k} {v:.2f}" for k, v in runs[name][-1].items()), flush=True)
            medians = {name: {key: statistics.median(run[key] for run in figures) for key in figures[0]}
                       for name, figures in runs.items()}
            for name, (server, _) in servers.items():
                peak = server.peak_rss_kb()
                medians[name]["rss_rise_mb"] = max(peak[pid] - idle[name][pid] for pid in peak) / 1024
                medians[name]["vs_tus_s3"] = medians[name]["mbps"] / medians["tus-s3"]["mbps"]
            report[mode] = medians
        print(f"\n{args.size_mb} MB per upload in {args.chunk_mb} MB requests, medians of {args.runs} alternated runs "
              f"after a discarded warm-up; idle peak RSS: ours' largest worker "
              f"{max(idle['chunks'].values()) / 1024:.0f} MB, node {max(idle['tus-s3'].values()) / 1024:.0f} MB")
        for mode, medians in report.items():
            print(mode)
            for name, figures in medians.items():
                print(f"  {name:7} " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
