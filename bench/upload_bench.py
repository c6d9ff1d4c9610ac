"""Chunked-upload benchmark against the reference tus server and the machine's ceiling (run by hand, not a test).

Generates an MP4-looking file in a temporary directory, then, in each of `--runs` runs, measures in turn:
- the machine's ceiling: hashlib SHA-256 of the file, and a copy of it plus fsync; the slower of the two;
- tus: `@tus/server` + `@tus/file-store` (bench/tus, installed with `npm ci` when needed) on a free 127.0.0.1
  port, uploaded to with the tus core protocol (POST with Upload-Length, then PATCHes of one chunk each with
  Upload-Offset). tus core is sequential and @tus/file-store has no concatenation extension, so tus in order
  is the baseline for both of our modes. It stores no checksum and does not fsync;
- the floor: bench/floor_app.py under the same gunicorn configuration, chunks in order, each parsed, appended,
  hashed and fsynced with nothing else around it: what any Python WSGI implementation of this API must pay;
- ours: gunicorn with the shipped config (`-c python:service.gunicorn_config`), chunks sent in order, then
  `--parallel` chunks in flight at once, each mode on a fresh server; SHA-256 verified on completion.
Both clients are this process with `requests` (one keep-alive session per thread). Prints each run and the
median of the runs: MB/s, ratios, completing-request latency against the median chunk latency, and the
largest rise of a worker's peak RSS (VmHWM) over its idle figure.

    .venv/bin/python bench/upload_bench.py [--runs 3] [--size-mb 500] [--chunk-mb 5] [--parallel 4]

Needs node >= 20.19 and npm. Targets (issue 5): ours >= tus, ours >= 25% of the ceiling, completing request
<= 2x the median chunk (in order), worker peak RSS within 50 MB of idle.
"""
import argparse
import hashlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

MB = 1024 * 1024
TOKEN = "bench-token-0001"
HEADERS = {"x-service-api-org": TOKEN}
ROOT = Path(__file__).resolve().parent.parent
TUS_DIR = ROOT / "bench" / "tus"
READ_BLOCK = MB


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def generate(path, size):
    """An `ftyp` box, then pseudo-random bytes (written in 1 MB blocks)."""
    block = hashlib.sha256(b"seed").digest() * (MB // 32)
    with open(path, "wb") as handle:
        handle.write(b"\x00\x00\x00\x18ftypmp42")
        written = 12
        counter = 0
        while written < size:
            counter += 1
            piece = (counter.to_bytes(8, "big") + block[8:])[: size - written]
            handle.write(piece)
            written += len(piece)


def sha256_seconds(path):
    """(hex digest, seconds) of hashlib SHA-256 over the file, read in 1 MB blocks."""
    start = time.perf_counter()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(READ_BLOCK):
            digest.update(block)
    return digest.hexdigest(), time.perf_counter() - start


def copy_fsync_seconds(path, target):
    """Seconds to copy the file and fsync the copy (what any durable store must at least do)."""
    start = time.perf_counter()
    with open(path, "rb") as source, open(target, "wb") as copy:
        shutil.copyfileobj(source, copy, READ_BLOCK)
        copy.flush()
        os.fsync(copy.fileno())
    elapsed = time.perf_counter() - start
    os.unlink(target)
    return elapsed


def wait_ready(url, process, what):
    for _ in range(300):
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with status {process.returncode}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{what} did not start")


def stop(process):
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def chunks_of(path, size, chunk_size):
    """(number of chunks, read(index)): each call reads one chunk from the file, as a client would."""
    def read(index):
        with open(path, "rb") as handle:
            handle.seek(index * chunk_size)
            return handle.read(chunk_size)

    return -(-size // chunk_size), read


class Sessions(threading.local):
    """One keep-alive `requests.Session` per client thread."""

    def __init__(self):
        self.session = requests.Session()


# --- tus -----------------------------------------------------------------------------------------

def ensure_tus_installed():
    if (TUS_DIR / "node_modules" / "@tus" / "server").is_dir():
        return
    command = ["npm", "ci"] if (TUS_DIR / "package-lock.json").exists() else ["npm", "install"]
    print(f"installing the tus reference server: (cd bench/tus && {' '.join(command)})", flush=True)
    subprocess.run(command, cwd=TUS_DIR, check=True, stdout=subprocess.DEVNULL)


def tus_upload(temp, source, size, chunk_size):
    """Upload with the tus core protocol to a fresh @tus/server; return the measurements."""
    store = temp / "tus-files"
    port = free_port()
    process = subprocess.Popen(["node", "server.js", str(port), str(store)], cwd=TUS_DIR,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/files"
    try:
        wait_ready(base, process, "the tus server")
        session = requests.Session()
        total, read = chunks_of(source, size, chunk_size)
        tus = {"Tus-Resumable": "1.0.0"}
        start = time.perf_counter()
        created = session.post(base, headers={**tus, "Upload-Length": str(size)}, timeout=30)
        if created.status_code != 201:
            raise SystemExit(f"tus POST: {created.status_code} {created.text}")
        location = created.headers["Location"]
        latencies = []
        for index in range(total):
            chunk = read(index)
            sent = time.perf_counter()
            response = session.patch(location, data=chunk, timeout=300, headers={
                **tus, "Upload-Offset": str(index * chunk_size), "Content-Type": "application/offset+octet-stream"})
            latencies.append(time.perf_counter() - sent)
            if response.status_code != 204:
                raise SystemExit(f"tus PATCH {index}: {response.status_code} {response.text}")
        elapsed = time.perf_counter() - start
        if int(response.headers["Upload-Offset"]) != size:
            raise SystemExit(f"tus ended at offset {response.headers['Upload-Offset']}, not {size}")
        stored = store / location.rsplit("/", 1)[1]
        if stored.stat().st_size != size:
            raise SystemExit(f"tus stored {stored.stat().st_size} bytes, not {size}")
        return {"mbps": size / MB / elapsed, "completing": latencies[-1], "median_chunk": statistics.median(latencies)}
    finally:
        stop(process)
        shutil.rmtree(store, ignore_errors=True)


# --- ours ----------------------------------------------------------------------------------------

def worker_pids(master):
    children = set()
    for task in Path(f"/proc/{master}/task").iterdir():
        children.update(int(pid) for pid in (task / "children").read_text().split())
    return sorted(children)


def memory_kb(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def start_ours(data_dir, app="service:create_app()", chdir=(), env=None, root=ROOT):
    """gunicorn with the configuration the project ships (Procfile), on a free port, with `env` added to this
    process's environment; (process, url). `root` is the checkout whose code it runs (this one by default)."""
    port = free_port()
    env = dict(os.environ, WIS_DATA_DIR=str(data_dir), WIS_API_TOKENS=f"default:{TOKEN}",
               WIS_BIND=f"127.0.0.1:{port}", **(env or {}))
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:service.gunicorn_config", *chdir, app],
                               cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url + "/healthz", process, "gunicorn")
    return process, url


def small_upload(url, session):
    data = b"\x00\x00\x00\x18ftypmp42" + b"w" * 1000
    stream = session.post(url + "/uploads", headers=HEADERS, timeout=30, json={
        "destinationId": "stepVideo", "fileName": "warm.mp4", "fileSize": len(data),
        "sha": hashlib.sha256(data).hexdigest()}).json()["streamId"]
    session.patch(f"{url}/uploads/{stream}", headers=HEADERS, timeout=30,
                  data={"chunkIndex": 0, "totalChunks": 1}, files={"file": ("w", data)}).raise_for_status()


def warm_up(url, workers):
    """Small uploads over many connections at once, so every worker has imported and run the upload path."""
    sessions = Sessions()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _: small_upload(url, sessions.session), range(8 * len(workers))))


def ours_upload(temp, source, size, chunk_size, sha, parallel):
    """Upload to a fresh gunicorn in chunks, `parallel` in flight; return the measurements."""
    data_dir = temp / "data"
    process, url = start_ours(data_dir)
    try:
        workers = worker_pids(process.pid)
        warm_up(url, workers)
        idle = {pid: memory_kb(pid, "VmHWM") for pid in workers}
        total, read = chunks_of(source, size, chunk_size)
        sessions = Sessions()

        def send(index):
            chunk = read(index)
            sent = time.perf_counter()
            response = sessions.session.patch(f"{url}/uploads/{stream}", headers=HEADERS, timeout=300,
                                              data={"chunkIndex": index, "totalChunks": total},
                                              files={"file": ("c", chunk)})
            elapsed = time.perf_counter() - sent
            if response.status_code not in (200, 201):
                raise SystemExit(f"chunk {index}: {response.status_code} {response.text}")
            return response.status_code, response.json(), elapsed

        start = time.perf_counter()
        stream = sessions.session.post(url + "/uploads", headers=HEADERS, timeout=30, json={
            "destinationId": "stepVideo", "fileName": source.name, "fileSize": size, "sha": sha}).json()["streamId"]
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            results = list(pool.map(send, range(total)))
        elapsed = time.perf_counter() - start
        peak = {pid: memory_kb(pid, "VmHWM") for pid in workers}
        completions = [result for result in results if result[0] == 201]
        if len(completions) != 1:
            raise SystemExit(f"expected one completing response, got {len(completions)}")
        name = completions[0][1]["path"].rsplit("/", 1)[1]
        stored = data_dir / "orgs" / "default" / "media" / "videos" / name
        if stored.stat().st_size != size:
            raise SystemExit(f"stored {stored.stat().st_size} bytes, not {size}")
        return {"mbps": size / MB / elapsed, "completing": completions[0][2],
                "median_chunk": statistics.median(result[2] for result in results),
                "rss_rise_mb": max(peak[pid] - idle[pid] for pid in workers) / 1024,
                "idle_mb": max(idle.values()) / 1024}
    finally:
        stop(process)
        shutil.rmtree(data_dir, ignore_errors=True)


def floor_upload(temp, source, size, chunk_size, sha):
    """Upload in order to bench/floor_app.py (multipart parse, write, hash, fsync per chunk; nothing else) under the
    same gunicorn configuration; return MB/s."""
    data_dir = temp / "floor"
    data_dir.mkdir()
    process, url = start_ours(data_dir, "floor_app:create_app()", ("--chdir", str(ROOT / "bench")))
    try:
        session = requests.Session()
        total, read = chunks_of(source, size, chunk_size)
        start = time.perf_counter()
        for index in range(total):
            response = session.patch(url + "/uploads/floor", timeout=300, files={"file": ("c", read(index))},
                                     data={"chunkIndex": index, "totalChunks": total})
            if response.status_code != 200:
                raise SystemExit(f"floor chunk {index}: {response.status_code} {response.text}")
        elapsed = time.perf_counter() - start
        if sha256_seconds(data_dir / "floor.bin")[0] != sha:
            raise SystemExit("the floor app stored a different file")
        return size / MB / elapsed
    finally:
        stop(process)
        shutil.rmtree(data_dir, ignore_errors=True)


# --- report --------------------------------------------------------------------------------------

def one_run(temp, source, size, chunk_size, parallel):
    sha, sha_s = sha256_seconds(source)
    copy_s = copy_fsync_seconds(source, temp / "copy.mp4")
    run = {"sha256_mbps": size / MB / sha_s, "copy_fsync_mbps": size / MB / copy_s}
    run["ceiling_mbps"] = min(run["sha256_mbps"], run["copy_fsync_mbps"])
    tus = tus_upload(temp, source, size, chunk_size)
    run["tus_mbps"] = tus["mbps"]
    run["floor_mbps"] = floor_upload(temp, source, size, chunk_size, sha)
    run["floor_vs_tus"] = run["floor_mbps"] / tus["mbps"]
    for mode, in_flight in (("in_order", 1), (f"parallel_{parallel}", parallel)):
        ours = ours_upload(temp, source, size, chunk_size, sha, in_flight)
        run[f"{mode}_mbps"] = ours["mbps"]
        run[f"{mode}_vs_tus"] = ours["mbps"] / tus["mbps"]
        run[f"{mode}_vs_ceiling"] = ours["mbps"] / run["ceiling_mbps"]
        run[f"{mode}_vs_floor"] = ours["mbps"] / run["floor_mbps"]
        run[f"{mode}_completing_ms"] = ours["completing"] * 1000
        run[f"{mode}_median_chunk_ms"] = ours["median_chunk"] * 1000
        run[f"{mode}_completing_vs_chunk"] = ours["completing"] / ours["median_chunk"]
        run[f"{mode}_rss_rise_mb"] = ours["rss_rise_mb"]
        run[f"{mode}_idle_rss_mb"] = ours["idle_mb"]
    return run


def show(title, run):
    print(title)
    for key, value in run.items():
        print(f"  {key:32} {value:10.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--chunk-mb", type=int, default=5)
    parser.add_argument("--parallel", type=int, default=4, help="chunks in flight at once in the second mode")
    args = parser.parse_args()
    size, chunk_size = args.size_mb * MB, args.chunk_mb * MB
    ensure_tus_installed()

    with tempfile.TemporaryDirectory(prefix="wis-bench-") as temp:
        temp = Path(temp)
        source = temp / "bench.mp4"
        generate(source, size)
        print(f"{args.size_mb} MB file in {args.chunk_mb} MB chunks, {args.runs} runs; "
              f"tus in order is the baseline of both modes (tus core is sequential)", flush=True)
        runs = []
        for number in range(1, args.runs + 1):
            runs.append(one_run(temp, source, size, chunk_size, args.parallel))
            show(f"run {number}", runs[-1])
            sys.stdout.flush()
    show(f"median of {len(runs)} runs", {key: statistics.median(run[key] for run in runs) for key in runs[0]})


if __name__ == "__main__":
    main()
