"""Profile of the processCreate request path (run by hand, not a test).

Sends the benchmark's realistic processCreate (bench/payload.py, 20 steps by default) to an in-process app
(Flask test client, real data directory, fsync included) under cProfile, cycling through 20 process ids, and
prints the milliseconds per request without the profiler, then the functions taking the most time.
For a sampling profile of a real gunicorn worker: `pip install py-spy`, then
`py-spy record -p <worker pid> -f raw -o profile.txt` while bench/graphql_bench.py runs.

    .venv/bin/python bench/profile_graphql.py [--requests 200] [--steps 20] [--sort cumulative|tottime]
"""
import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from payload import request_body  # noqa: E402 (bench/ is not a package)

from service import create_app  # noqa: E402

TOKEN = "bench-token-0001"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--sort", default="cumulative", choices=["cumulative", "tottime"])
    parser.add_argument("--lines", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wis-profile-") as temp:
        client = create_app({"DATA_DIR": temp, "API_TOKENS": f"default:{TOKEN}"}).test_client()
        bodies = [request_body(f"profiled_{number:02d}", args.steps) for number in range(20)]

        def send(number):
            response = client.post("/graph/v2", data=bodies[number % len(bodies)], content_type="application/json",
                                   headers={"x-service-api-org": TOKEN})
            assert response.status_code == 200 and "errors" not in response.get_json(), response.data[:300]

        for number in range(len(bodies)):
            send(number)  # creates; what follows are updates, as in bench/graphql_bench.py
        start = time.perf_counter()
        for number in range(args.requests):
            send(number)
        print(f"{(time.perf_counter() - start) * 1000 / args.requests:.2f} ms per request without the profiler, "
              f"{len(bodies[0])} bytes each")
        profile = cProfile.Profile()
        profile.enable()
        for number in range(args.requests):
            send(number)
        profile.disable()
    pstats.Stats(profile).sort_stats(args.sort).print_stats(args.lines)


if __name__ == "__main__":
    main()
