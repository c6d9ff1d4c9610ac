"""`wis upload` of a large video against tus-js-client uploading the same file to @tus/server (run by hand, not a test).

Each contestant is what a user runs, timed from its start to its exit: `wis upload <file>` with its defaults (chunks
of 5 MB, 4 in flight, each fsynced and the whole file's SHA-256 checked by the server) against a fresh gunicorn
with the shipped configuration, and `node bench/tus/js_upload.mjs` (tus-js-client with its defaults: the whole file
in one PATCH) against a fresh `@tus/server` + `@tus/file-store` (which syncs nothing). Each server is started on a
free 127.0.0.1 port with an empty directory before the timing and stopped after it; a `sync` follows each upload,
outside the timing, so that no upload pays for the previous one's writeback. Run 0 is a warm-up and is discarded;
the contestants' order alternates from run to run.

Per run and contestant: seconds, MB/s, the client's CPU seconds per GB (its process: Python's start included, as a
user pays it) and the server's (its process tree, from /proc). Then the medians, and the median of each run's own
ratio (tus-js-client's seconds over ours: at least 1.0 means `wis upload` is at least as fast). `--baseline-tree DIR`
adds `wis upload` of another checkout (its client, run with that checkout first on PYTHONPATH) to a server run from
that checkout, to compare a change of either.

    (cd bench/tus && npm ci)            # @tus/server, @tus/file-store and tus-js-client, from the lock
    .venv/bin/python bench/cli_upload_bench.py [--runs 5] [--size-mb 500] [--parallel N] [--chunk-mb M] \
        [--baseline-tree DIR]
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shared_backend import tree_cpu_seconds  # noqa: E402 (bench/ is not a package)
from upload_bench import MB, TOKEN, TUS_DIR, ensure_tus_installed, free_port, generate, start_ours, stop, \
    wait_ready  # noqa: E402

GB = 1024 * MB
WIS = Path(sys.executable).with_name("wis")


def timed(command, server, cwd=None, env=None):
    """Run the client `command` to its end; (its stdout, seconds, client CPU seconds, server CPU seconds)."""
    children, server_cpu = resource.getrusage(resource.RUSAGE_CHILDREN), tree_cpu_seconds(server.pid)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    client_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    return done.stdout.strip(), seconds, client_cpu, tree_cpu_seconds(server.pid) - server_cpu


def ours(temp, source, size, args, tree=None):
    data_dir = temp / "ours-data"
    process, url = start_ours(data_dir, **({"root": tree} if tree else {}))
    try:
        options = [*(["--parallel", str(args.parallel)] if args.parallel else []),
                   *(["--chunk-size", f"{args.chunk_mb}M"] if args.chunk_mb else [])]
        # The baseline's client: its own `service` package ahead of this checkout's (installed in this environment).
        # -P: without it, `python -c` puts the working directory first, and run from this checkout it imported this
        # checkout's client (the comparisons before 2026-11-29, seventh session, compared the servers only).
        client, env = ([sys.executable, "-P", "-c", "import sys; from service.cli import main; sys.exit(main())"],
                       {**os.environ, "PYTHONPATH": str(tree)}) if tree else ([str(WIS)], None)
        path, *figures = timed([*client, "upload", str(source), "--url", url, "--token", TOKEN, "--no-progress",
                                "--state-dir", str(temp / "wis-state"), *options], process, env=env)
        # <data>/orgs/<org>/media/<images|videos>/<name>
        stored = [file for file in (data_dir / "orgs").glob(f"*/media/*/{path.rsplit('/', 1)[-1]}")
                  if file.stat().st_size == size]
        if not stored:
            raise SystemExit(f"wis upload answered {path!r}, not a media file of {size} bytes in {data_dir}")
        return figures
    finally:
        stop(process)
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(temp / "wis-state", ignore_errors=True)


def tus(temp, source, size, _args):
    store, port = temp / "tus-files", free_port()
    process = subprocess.Popen(["node", "server.js", str(port), str(store)], cwd=TUS_DIR,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(f"http://127.0.0.1:{port}/files", process, "the tus server")
        location, *figures = timed(["node", "js_upload.mjs", f"http://127.0.0.1:{port}/files", str(source)],
                                   process, cwd=TUS_DIR)
        stored = store / location.rsplit("/", 1)[-1]
        if not stored.is_file() or stored.stat().st_size != size:
            raise SystemExit(f"tus-js-client answered {location!r}, not a file of {size} bytes in {store}")
        return figures
    finally:
        stop(process)
        shutil.rmtree(store, ignore_errors=True)




def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="measured runs, after one warm-up run")
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--parallel", type=int, help="wis upload --parallel (default: the command's own)")
    parser.add_argument("--chunk-mb", type=int, help="wis upload --chunk-size in MB (default: the command's own)")
    parser.add_argument("--baseline-tree", type=Path,
                        help="also `wis upload` of this checkout to a server run from it, as `baseline`")
    args = parser.parse_args()
    contestants = {"wis upload": ours, "tus-js-client": tus}
    if args.baseline_tree:
        contestants["baseline"] = lambda *given: ours(*given, tree=args.baseline_tree)
    if not WIS.exists():
        raise SystemExit(f"{WIS} is missing: pip install -e . in this virtual environment")
    ensure_tus_installed()
    if not (TUS_DIR / "node_modules" / "tus-js-client").is_dir():
        subprocess.run(["npm", "ci"], cwd=TUS_DIR, check=True, stdout=subprocess.DEVNULL)
    size = args.size_mb * MB
    with tempfile.TemporaryDirectory(prefix="wis-cli-upload-", dir=Path.cwd()) as temp:
        temp = Path(temp)
        source = temp / "video.mp4"
        generate(source, size)
        os.sync()
        runs = {name: [] for name in contestants}
        print(f"{args.size_mb} MB, {args.runs} runs after a warm-up", flush=True)
        for number in range(args.runs + 1):
            names = list(contestants) if number % 2 == 0 else list(contestants)[::-1]
            for name in names:
                seconds, client_cpu, server_cpu = contestants[name](temp, source, size, args)
                os.sync()
                figures = {"seconds": seconds, "mbps": size / MB / seconds,
                           "client_cpu_s_per_gb": client_cpu * GB / size, "server_cpu_s_per_gb": server_cpu * GB / size}
                print(f"run {number} {name:14} " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items())
                      + (" (warm-up, discarded)" if number == 0 else ""), flush=True)
                if number:
                    runs[name].append(figures)
    report(runs)


def report(runs):
    print(f"\nmedians of {len(runs['wis upload'])} runs")
    for name, figures in runs.items():
        print(f"  {name:14} " + ", ".join(f"{key} {statistics.median(run[key] for run in figures):.2f}"
                                         for key in figures[0]))
    for other, what in (("tus-js-client", "tus-js-client + @tus/server"),
                        ("baseline", "the baseline checkout (its client and server)")):
        if other in runs:
            ratios = [theirs["seconds"] / ours_["seconds"] for ours_, theirs in zip(runs["wis upload"], runs[other])]
            print(f"wis upload's speed against {what}, the median of each run's own ratio: "
                  f"{statistics.median(ratios):.2f} x (runs: {', '.join(f'{ratio:.2f}' for ratio in ratios)})")


if __name__ == "__main__":
    main()
