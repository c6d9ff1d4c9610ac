"""Chunked-upload benchmark (run by hand, not a test).

Generates a large MP4-looking file in a temporary directory, starts gunicorn (2 workers, the README's
command) on a free 127.0.0.1 port, uploads the file in chunks and prints throughput, latencies and the
workers' peak memory, beside `sha256sum` and `cp` + `sync` of the same file as baselines.

    .venv/bin/python bench/upload_bench.py [--size-mb 500] [--chunk-mb 5] [--parallel 1]
"""
import argparse
import hashlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

MB = 1024 * 1024
TOKEN = "bench-token-0001"
HEADERS = {"x-service-api-org": TOKEN}


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
            piece = counter.to_bytes(8, "big") + block[8:]
            piece = piece[: size - written]
            handle.write(piece)
            written += len(piece)


def timed(argv):
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


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


def start_server(data_dir):
    port = free_port()
    env = dict(os.environ, WIS_DATA_DIR=str(data_dir), WIS_API_TOKENS=f"default:{TOKEN}")
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2", "service:create_app()"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if requests.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except requests.ConnectionError:
            time.sleep(0.1)
    else:
        process.kill()
        raise SystemExit("gunicorn did not start")
    return process, url


def warm_up(url):
    """One small chunked upload per worker, so the idle figure includes every imported module."""
    data = b"\x00\x00\x00\x18ftypmp42" + b"w" * 1000
    for _ in range(4):
        stream = requests.post(url + "/uploads", headers=HEADERS, timeout=30, json={
            "destinationId": "stepVideo", "fileName": "warm.mp4", "fileSize": len(data),
            "sha": hashlib.sha256(data).hexdigest()}).json()["streamId"]
        requests.patch(f"{url}/uploads/{stream}", headers=HEADERS, timeout=30,
                       data={"chunkIndex": 0, "totalChunks": 1}, files={"file": ("w", data)}).raise_for_status()


def upload(url, path, size, chunk_size, parallel):
    total = -(-size // chunk_size)
    sha = subprocess.run(["sha256sum", str(path)], check=True, capture_output=True, text=True).stdout.split()[0]
    stream = requests.post(url + "/uploads", headers=HEADERS, timeout=30, json={
        "destinationId": "stepVideo", "fileName": path.name, "fileSize": size, "sha": sha}).json()["streamId"]

    def send_chunk(index):
        with open(path, "rb") as handle:
            handle.seek(index * chunk_size)
            chunk = handle.read(chunk_size)
        start = time.perf_counter()
        response = requests.patch(f"{url}/uploads/{stream}", headers=HEADERS, timeout=300,
                                  data={"chunkIndex": index, "totalChunks": total}, files={"file": ("c", chunk)})
        elapsed = time.perf_counter() - start
        if response.status_code not in (200, 201):
            raise SystemExit(f"chunk {index}: {response.status_code} {response.text}")
        return index, response.status_code, response.json(), elapsed

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        results = list(pool.map(send_chunk, range(total)))
    elapsed = time.perf_counter() - start
    completions = [r for r in results if r[1] == 201]
    if len(completions) != 1:
        raise SystemExit(f"expected one completing response, got {len(completions)}")
    return elapsed, completions[0], [r[3] for r in results], sha


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--chunk-mb", type=int, default=5)
    parser.add_argument("--parallel", type=int, default=1, help="chunks in flight at once (1: in order)")
    args = parser.parse_args()
    size, chunk_size = args.size_mb * MB, args.chunk_mb * MB

    with tempfile.TemporaryDirectory(prefix="wis-bench-") as temp:
        temp = Path(temp)
        source = temp / "bench.mp4"
        generate(source, size)
        sha_seconds = timed(["sha256sum", str(source)])
        copy_seconds = timed(["sh", "-c", f"cp '{source}' '{temp / 'copy.mp4'}' && sync"])
        (temp / "copy.mp4").unlink()

        process, url = start_server(temp / "data")
        try:
            warm_up(url)
            workers = worker_pids(process.pid)
            idle = {pid: memory_kb(pid, "VmHWM") for pid in workers}
            idle_rss = {pid: memory_kb(pid, "VmRSS") for pid in workers}
            elapsed, completion, latencies, sha = upload(url, source, size, chunk_size, args.parallel)
            peak = {pid: memory_kb(pid, "VmHWM") for pid in workers}
            path = completion[2]["path"]
            stored = next((temp / "data" / "orgs" / "default" / "media" / "videos").glob(path.rsplit("/", 1)[1]))
            same = stored.stat().st_size == size
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)

    print(f"file: {args.size_mb} MB in {args.chunk_mb} MB chunks, parallel={args.parallel}, "
          f"stored size matches: {same}, sha256 {sha[:16]}...")
    print(f"upload: {elapsed:.2f} s, {size / MB / elapsed:.1f} MB/s")
    print(f"completing request latency: {completion[3] * 1000:.0f} ms (chunk {completion[0]})")
    print(f"median chunk latency: {statistics.median(latencies) * 1000:.0f} ms, "
          f"max {max(latencies) * 1000:.0f} ms")
    for pid in workers:
        print(f"worker {pid}: idle RSS {idle_rss[pid] / 1024:.1f} MB, peak (VmHWM) {idle[pid] / 1024:.1f} MB "
              f"before -> {peak[pid] / 1024:.1f} MB after (+{(peak[pid] - idle[pid]) / 1024:.1f} MB)")
    print(f"baseline sha256sum: {sha_seconds:.2f} s, {args.size_mb / sha_seconds:.1f} MB/s")
    print(f"baseline cp + sync: {copy_seconds:.2f} s, {args.size_mb / copy_seconds:.1f} MB/s")


if __name__ == "__main__":
    main()
