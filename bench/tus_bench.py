"""tus PATCH benchmark: our /uploads against @tus/server + @tus/file-store, with one lean client (run by hand).

Both servers stay up for the whole benchmark: ours under the shipped gunicorn configuration
(`-c python:service.gunicorn_config`), the reference one as bench/tus/server.js (installed with `npm ci` when
needed). The client is this process with `http.client` (one keep-alive connection per upload; each PATCH body is
one `os.pread` of the file, sent as it is), the same code for both servers. Each upload is a tus creation, then
PATCHes of `--chunk-mb` in order; ours is given the file's `sha256` in Upload-Metadata and verifies it (and fsyncs
every PATCH); the reference server's stored file is hashed afterwards, outside the timing.

Modes: one upload at a time, then `--parallel` uploads of as many different files at once. Each mode is warmed up
once per server (discarded), then runs alternate ours, tus, ours, tus...; the figures are medians of the runs.
Per run: MB/s (the whole file, creation included), server CPU seconds per GB received (utime+stime of the server's
process tree from /proc before and after), the client's own CPU seconds per GB (to show it is not the bottleneck),
the median PATCH and the completing PATCH (the one that reaches Upload-Length: ours verifies and publishes the file
then) in ms and as a ratio, and the largest rise of one of our workers' peak RSS (VmHWM) over its figure after the
warm-up.

With `--compare-tree DIR` the service from another checkout runs too, as `before`. Each run ends with a sync
(outside the timing), so that no server's run has the previous one's writeback going on. The first two servers
swap places every other run (use an even --runs): on this machine the same code measured
0.6-0.93 x as the server run right after @tus/server against itself run next, with or without the sync.

With `--disk-ceiling` a third contestant, `disk`, copies each file in chunk-sized writes with an fdatasync after each
(no network, no parsing, no hash): what this disk allows any server that answers a chunk only once it is on disk.

With `--again` our servers keep the media they stored (only the reference server's files are removed): every upload
after the warm-up is of media the org has already, and its completing request is answered by deduplication.

    .venv/bin/python bench/tus_bench.py [--runs 3] [--size-mb 500] [--chunk-mb 5] [--parallel 4] [--compare-tree DIR]
        [--disk-ceiling] [--again]
"""
import argparse
import base64
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from upload_bench import (  # noqa: E402
    MB, TOKEN, TUS_DIR, ensure_tus_installed, free_port, generate, memory_kb, sha256_seconds, start_ours, stop,
    wait_ready, worker_pids,
)

GB = 1024 * MB
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
OCTETS = "application/offset+octet-stream"


def tree_pids(pid):
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").iterdir():
            try:
                queue.extend(int(child) for child in (task / "children").read_text().split())
            except FileNotFoundError:
                pass
    return pids


def cpu_seconds(pid):
    """utime + stime of a process and all its descendants, in seconds."""
    total = 0
    for current in tree_pids(pid):
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def b64(text):
    return base64.b64encode(text.encode()).decode()


def tus_upload(port, create_path, file, size, chunk_size, metadata, extra_headers):
    """Create and PATCH one file in order over one keep-alive connection; return (PATCH latencies, final headers)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    tus = {"Tus-Resumable": "1.0.0", **extra_headers}
    connection.request("POST", create_path, headers={**tus, "Upload-Length": str(size), "Upload-Metadata": metadata})
    response = connection.getresponse()
    response.read()
    if response.status != 201:
        raise SystemExit(f"POST {create_path}: {response.status}")
    location = response.getheader("Location")
    path = location if location.startswith("/") else "/" + location.split("/", 3)[3]
    latencies = []
    fd = os.open(file, os.O_RDONLY)
    try:
        offset = 0
        while offset < size:
            body = os.pread(fd, chunk_size, offset)
            sent = time.perf_counter()
            connection.request("PATCH", path, body=body, headers={
                **tus, "Upload-Offset": str(offset), "Content-Type": OCTETS, "Content-Length": str(len(body))})
            response = connection.getresponse()
            response.read()
            latencies.append(time.perf_counter() - sent)
            if response.status != 204:
                raise SystemExit(f"PATCH {path} at {offset}: {response.status}")
            offset += len(body)
            if int(response.getheader("Upload-Offset")) != offset:
                raise SystemExit(f"PATCH {path}: offset {response.getheader('Upload-Offset')}, not {offset}")
    finally:
        os.close(fd)
        connection.close()
    return path, latencies, dict(response.getheaders())


def removing_verifier(path, sha, who, keep=False):
    """What `measure` calls once a run is timed: the stored file at `path` must hash to `sha` (else the benchmark stops,
    naming `who`), then it is removed (unless `keep`)."""
    def verify():
        if sha256_seconds(path)[0] != sha:
            raise SystemExit(f"{who} stored a different file")
        if not keep:
            path.unlink()
    return verify


class Ours:
    def __init__(self, temp, name="ours", root=None, again=False):
        self.name = name
        # With `again`, the stored media stay: every upload of a file after its first is answered by deduplication.
        self.again = again
        self.data_dir = temp / f"{name}-data"
        self.process, url = start_ours(self.data_dir, **({"root": root} if root else {}))
        self.port = int(url.rsplit(":", 1)[1])
        self.workers = worker_pids(self.process.pid)

    def upload(self, file, size, chunk_size, sha):
        metadata = f"destinationId {b64('stepVideo')},filename {b64(file.name)},sha256 {b64(sha)}"
        _, latencies, headers = tus_upload(self.port, "/uploads", file, size, chunk_size, metadata,
                                           {"x-service-api-org": TOKEN})
        media = self.data_dir / "orgs" / "default" / "media" / "videos" / headers["Media-Path"].rsplit("/", 1)[1]
        # The server verified the sha256 it was given before it published the file; hashed again here all the same.
        return latencies, self.verifier(media, sha)

    def verifier(self, media, sha):
        return removing_verifier(media, sha, self.name, keep=self.again)

    def peak_rss_kb(self):
        return {pid: memory_kb(pid, "VmHWM") for pid in self.workers}

    def stop(self):
        stop(self.process)


class Reference:
    name = "tus"

    def __init__(self, temp):
        self.store = temp / "tus-files"
        self.port = free_port()
        self.process = subprocess.Popen(["node", "server.js", str(self.port), str(self.store)], cwd=TUS_DIR,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(f"http://127.0.0.1:{self.port}/files", self.process, "the tus server")

    def upload(self, file, size, chunk_size, sha):
        path, latencies, _ = tus_upload(self.port, "/files", file, size, chunk_size, f"filename {b64(file.name)}", {})
        stored = self.store / path.rsplit("/", 1)[1]

        def verify():
            if sha256_seconds(stored)[0] != sha:
                raise SystemExit("the tus server stored a different file")
            for leftover in self.store.glob(stored.name + "*"):
                leftover.unlink()
        return latencies, verify

    def stop(self):
        stop(self.process)


class DiskCeiling:
    """The disk's ceiling for a server that answers a PATCH only once its bytes are on disk: each file copied in
    `chunk_size` writes, each followed by an fdatasync, in this process (no network, no parsing, no hash). Its
    "server CPU" is this process's, the copying threads' while it runs alone."""
    name = "disk"

    def __init__(self, temp):
        self.directory = temp / "disk-ceiling"
        self.directory.mkdir()

    @staticmethod
    def cpu_seconds():
        return time.process_time()

    def upload(self, file, size, chunk_size, sha):
        target, latencies = self.directory / file.name, []
        source, copy = os.open(file, os.O_RDONLY), os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for offset in range(0, size, chunk_size):
                data = os.pread(source, chunk_size, offset)
                started = time.perf_counter()
                os.pwrite(copy, data, offset)
                os.fdatasync(copy)
                latencies.append(time.perf_counter() - started)
        finally:
            os.close(source)
            os.close(copy)
        return latencies, removing_verifier(target, sha, "the disk ceiling")

    def stop(self):
        shutil.rmtree(self.directory, ignore_errors=True)


def server_cpu_seconds(server):
    return server.cpu_seconds() if isinstance(server, DiskCeiling) else cpu_seconds(server.process.pid)


def measure(server, files, size, chunk_size):
    """Upload `files` at once (one thread each); return the run's figures."""
    cpu_before, client_before = server_cpu_seconds(server), time.process_time()
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(files)) as pool:
        uploads = list(pool.map(lambda item: server.upload(item[0], size, chunk_size, item[1]), files))
    elapsed = time.perf_counter() - start
    cpu_after, client_after = server_cpu_seconds(server), time.process_time()
    # Verified outside the timing (a SHA-256 of every stored file, then removed).
    results = []
    for latencies, verify in uploads:
        verify()
        results.append(latencies)
    # The next run starts with nothing left to write back: @tus/server does not fsync, so its 500 MB would otherwise
    # still be going to the disk during the next server's run (and slow that one's fdatasyncs).
    os.sync()
    received = size * len(files) / GB
    figures = {
        "mbps": size * len(files) / MB / elapsed,
        "server_cpu_s_per_gb": (cpu_after - cpu_before) / received,
        "client_cpu_s_per_gb": (client_after - client_before) / received,
        "completing_vs_median_patch": statistics.median(
            latencies[-1] / statistics.median(latencies) for latencies in results),
        "median_patch_ms": statistics.median(latency for latencies in results for latency in latencies) * 1000,
        "completing_patch_ms": statistics.median(latencies[-1] for latencies in results) * 1000,
    }
    return figures


def main(ours_class=Ours, description=__doc__):
    """The benchmark, with `ours_class` (Ours: tus PATCHes) as the client of our service (bench/chunk_bench.py passes
    one that sends the multipart chunks of the SPEC API)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--chunk-mb", type=int, default=5)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--compare-tree", type=Path, help="also run the service from this checkout (e.g. a worktree "
                        "of the code before a change) as server `before`, alternated with the others")
    parser.add_argument("--disk-ceiling", action="store_true", help="also copy each file in chunk-sized writes, "
                        "each fdatasynced, as server `disk`: what the disk allows a server with our durability")
    parser.add_argument("--again", action="store_true", help="keep our servers' media between runs, so that every "
                        "upload after a file's first is of media the org has: answered by deduplication")
    args = parser.parse_args()
    size, chunk_size = args.size_mb * MB, args.chunk_mb * MB
    ensure_tus_installed()
    with tempfile.TemporaryDirectory(prefix="wis-tus-bench-") as temp:
        temp = Path(temp)
        files = []
        for number in range(max(1, args.parallel)):
            path = temp / f"bench-{number}.mp4"
            generate(path, size)
            # Different files: the first block differs.
            with open(path, "r+b") as handle:
                handle.seek(12)
                handle.write(number.to_bytes(8, "big"))
            files.append((path, sha256_seconds(path)[0]))
        ours, reference = ours_class(temp, again=args.again), Reference(temp)
        servers = [ours, reference]
        if args.compare_tree:
            servers.insert(1, ours_class(temp, "before", args.compare_tree.resolve(), again=args.again))
        if args.disk_ceiling:
            servers.append(DiskCeiling(temp))
        try:
            idle = None
            report = {}
            for mode, chosen in (("one upload", files[:1]), (f"{args.parallel} uploads at once", files)):
                for server in servers:
                    measure(server, chosen, size, chunk_size)
                if idle is None:
                    idle = ours.peak_rss_kb()
                runs = {server.name: [] for server in servers}
                for number in range(args.runs):
                    # The first two swap places every other run: a server run right after @tus/server measured up to
                    # 1.5 x slower than the same code run next (2026-11-23), so each follows it as often as the other.
                    for server in servers if number % 2 == 0 else [servers[1], servers[0], *servers[2:]]:
                        runs[server.name].append(measure(server, chosen, size, chunk_size))
                        print(f"{mode}, run {number + 1}, {server.name}: "
                              + ", ".join(f"{k} {v:.2f}" for k, v in runs[server.name][-1].items()), flush=True)
                medians = {name: {key: statistics.median(run[key] for run in figures) for key in figures[0]}
                           for name, figures in runs.items()}
                peak = ours.peak_rss_kb()
                medians["ours"]["worker_rss_rise_mb"] = max(peak[pid] - idle[pid] for pid in idle) / 1024
                medians["ratio"] = {
                    "throughput ours/tus": medians["ours"]["mbps"] / medians["tus"]["mbps"],
                    "server CPU per GB ours/tus": medians["ours"]["server_cpu_s_per_gb"]
                    / medians["tus"]["server_cpu_s_per_gb"],
                }
                if "before" in medians:
                    medians["ratio"]["throughput before/tus"] = medians["before"]["mbps"] / medians["tus"]["mbps"]
                    medians["ratio"]["throughput ours/before"] = medians["ours"]["mbps"] / medians["before"]["mbps"]
                if "disk" in medians:
                    medians["ratio"]["throughput disk/tus"] = medians["disk"]["mbps"] / medians["tus"]["mbps"]
                    medians["ratio"]["throughput ours/disk"] = medians["ours"]["mbps"] / medians["disk"]["mbps"]
                report[mode] = medians
            print(f"\n{args.size_mb} MB per upload in {args.chunk_mb} MB PATCHes, medians of {args.runs} alternated "
                  f"runs after a discarded warm-up; our idle worker peak RSS {max(idle.values()) / 1024:.0f} MB")
            for mode, medians in report.items():
                print(mode)
                for name, figures in medians.items():
                    print(f"  {name:6} " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()))
        finally:
            for server in servers:
                server.stop()
                if isinstance(server, Ours):
                    shutil.rmtree(server.data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
