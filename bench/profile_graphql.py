"""Profile of the processCreate request path (run by hand, not a test).

Sends the benchmark's realistic processCreate (bench/payload.py, 20 steps by default) to an in-process app
(Flask test client, real data directory, fsync included) under cProfile, cycling through 20 process ids, each
request a new revision (its name changed; until 2026-11-29 the same bodies were sent again, which since the history
are unchanged pushes that store nothing), and prints the milliseconds per request without the profiler (and how many
of them the cycle collector took, how many collections ran), then the functions taking the most time. The cycle
collector is set as in a gunicorn worker (service.server.cycle_collector.tune) unless `--gc default` asks for
Python's defaults.
For a sampling profile of a real gunicorn worker: `pip install py-spy`, then
`py-spy record -p <worker pid> -f raw -o profile.txt` while bench/graphql_bench.py runs.

    .venv/bin/python bench/profile_graphql.py [--requests 200] [--steps 20] [--sort cumulative|tottime] \
        [--gc worker|default]
"""
import argparse
import cProfile
import gc
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from payload import request_body  # noqa: E402 (bench/ is not a package)

from service import create_app  # noqa: E402
from service.server import cycle_collector  # noqa: E402
from service.storage import get_repository  # noqa: E402

TOKEN = "bench-token-0001"
IDS = 20
NAME = b"Gearbox housing, final assembly"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--sort", default="cumulative", choices=["cumulative", "tottime"])
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--gc", default="worker", choices=["worker", "default"],
                        help="cycle collector as a gunicorn worker sets it, or Python's defaults")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wis-profile-") as temp:
        app = create_app({"DATA_DIR": temp, "API_TOKENS": f"default:{TOKEN}"})
        client = app.test_client()
        body = request_body("profiled_00", args.steps)

        def send(number):
            # A new name each time (as graphql_bench.py --changing): each request stores a new revision, where the
            # same body again would be an unchanged push, which stores nothing.
            data = body.replace(b'"profiled_00"', b'"profiled_%02d"' % (number % IDS), 1).replace(
                NAME, b"%s %d" % (NAME, number), 1)
            response = client.post("/graph/v2", data=data, content_type="application/json",
                                   headers={"x-service-api-org": TOKEN})
            assert response.status_code == 200 and "errors" not in response.get_json(), response.data[:300]

        for number in range(IDS):
            send(number)  # creates; what follows are updates, as in bench/graphql_bench.py
        if args.gc == "worker":
            cycle_collector.tune()
        in_collector, started = [0.0], [0.0]

        def timed(phase, _info):
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                in_collector[0] += time.perf_counter() - started[0]

        gc.callbacks.append(timed)
        collections = sum(generation["collections"] for generation in gc.get_stats())
        start = time.perf_counter()
        for number in range(args.requests):
            send(number)
        elapsed = time.perf_counter() - start
        gc.callbacks.remove(timed)
        collections = sum(generation["collections"] for generation in gc.get_stats()) - collections
        print(f"{elapsed * 1000 / args.requests:.2f} ms per request without the profiler, {len(body)} bytes each; "
              f"cycle collector ({args.gc} settings, threshold {gc.get_threshold()}): "
              f"{in_collector[0] * 1000 / args.requests:.2f} ms per request, "
              f"{collections / args.requests:.2f} collections per request")
        profile = cProfile.Profile()
        profile.enable()
        for number in range(args.requests, 2 * args.requests):
            send(number)
        profile.disable()
        get_repository(app).close()  # (its last checkpoint made now, not while the directory is removed)
    pstats.Stats(profile).sort_stats(args.sort).print_stats(args.lines)


if __name__ == "__main__":
    main()
