"""Webhooks (CONTRACT 15) measured by hand, not a test: how soon a commit's webhook gets its 2xx, and what a receiver
that hangs costs the API.

Starts gunicorn with the shipped configuration (`-c python:service.gunicorn_config`; the file backend in a fresh data
directory, or `--backend shared`: PostgreSQL and SeaweedFS from tests/support/engines) on a free 127.0.0.1 port, with
`--workers` workers, http to 127.0.0.1 allowed. Each receiver is a process of its own on 127.0.0.1 (asyncio, HTTP/1.1
keep-alive: each delivery answered 204 `--receiver-ms` ms after its body came, the time its answer went out taken on
the machine's monotonic clock, which this process reads too). Station changes are sent through GraphQL at `--rate` a second for `--seconds` seconds, by
`--clients` threads each taking the next slot of the schedule (a slot missed is sent at once), one change a slot.

Three contestants, alternated from run to run, each on a fresh org state (a new subscription id each run):
- `none`: no subscription (the baseline of the API's latency and of the server's CPU);
- `one`: one subscription to a receiver that answers after `--receiver-ms`;
- `hanging`: that subscription and a second one whose receiver never answers (each attempt times out after
  WIS_WEBHOOK_TIMEOUT_SECONDS, 10 s, then is retried 5 s later, and so on).

Per run: commit-to-2xx p50 and p99 (from the moment the change was sent to the moment its 2xx went out, first warm-up
changes left out), the changes' own round trips p50 and p99 (the API's latency), and the server's CPU seconds per
change (master and workers, from /proc). Medians over `--runs` runs, and the ratios to `none` measured in the same
runs.

    .venv/bin/python bench/webhook_bench.py [--backend file|shared] [--runs 3] [--rate 100] [--seconds 10]
        [--receiver-ms 5] [--workers 2] [--clients 4]
"""
import argparse
import asyncio
import contextlib
import multiprocessing
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from event_stream_bench import medians, percentile  # noqa: E402 (bench/ is not a package)
from graphql_bench import TOKEN, start  # noqa: E402
from shared_backend import SharedBackend, tree_cpu_seconds  # noqa: E402
from upload_bench import stop  # noqa: E402


MUTATION = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"
SUBSCRIBE = "mutation($input: SubscribeRequest_Input!) { webhookSubscribe(input: $input) }"
UNSUBSCRIBE = "mutation($id: String!) { webhookUnsubscribe(subscriptionID: $id) }"


class ReceiverProcess:
    """A receiver in a process of its own (so that the GIL of this process's clients does not slow it): HTTP/1.1 with
    keep-alive on asyncio, answering each POST 204 after `answer_ms` ms (None: never), as a receiver built for it
    would; `url`, `secret`, and at the end `deliveries()`: [(webhook-id, when its answer went out)]. Signatures are the
    tests' business (tests/delivery), not this measure's."""

    def __init__(self, answer_ms=None):
        self._pipe, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("fork").Process(target=self._serve, args=(child, answer_ms))
        self._process.start()
        self.url = self._pipe.recv()
        self.secret = "whsec_" + "A" * 43 + "="

    @staticmethod
    def _serve(pipe, answer_ms):
        asyncio.run(_receive(pipe, answer_ms))

    def wait_for(self, count, seconds=120):
        """Wait until `count` distinct events have come (or `seconds` have passed)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._pipe.send("count")
            if self._pipe.recv() >= count:
                return
            time.sleep(0.1)

    def deliveries(self):
        self._pipe.send("stop")
        found = self._pipe.recv()
        self._process.join(timeout=30)
        return found


async def _receive(pipe, answer_ms):
    answered = []

    async def connection(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                fields = dict(line.split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:] if ": " in line)
                fields = {name.lower(): value for name, value in fields.items()}
                await reader.readexactly(int(fields.get("content-length", 0)))
                if answer_ms is None:
                    await asyncio.sleep(3600)
                await asyncio.sleep(answer_ms / 1000)
                writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
                await writer.drain()
                answered.append((fields.get("webhook-id"), time.monotonic()))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    pipe.send(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hooks")
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, pipe.recv) == "count":
        pipe.send(len({identifier for identifier, _ in answered}))
    pipe.send(answered)
    server.close()


def graphql(session, url, query, variables):
    response = session.post(url, timeout=60, json={"query": query, "variables": variables})
    body = response.json()
    if response.status_code != 200 or "errors" in body:
        raise SystemExit(f"{query[:40]}: {response.status_code} {response.text[:300]}")
    return body["data"]


def send_changes(url, args):
    """{seq: when it was sent} and the round trips of `--rate` x `--seconds` changes sent on schedule."""
    total, sent, round_trips, lock = int(args.rate * args.seconds), {}, [], threading.Lock()
    slots = iter(range(total))
    begin = time.monotonic() + 0.2

    def client():
        session = requests.Session()
        session.headers["x-service-api-org"] = TOKEN
        for slot in slots:
            time.sleep(max(0.0, begin + slot / args.rate - time.monotonic()))
            began = time.monotonic()
            response = session.post(url, timeout=60, json={"query": MUTATION, "variables": {
                "input": {"station": {"id": f"press_{slot % 20}", "name": f"Press {slot}"}}}})
            took = time.monotonic() - began
            if response.status_code != 200 or "errors" in response.json():
                raise SystemExit(f"change: {response.status_code} {response.text[:300]}")
            with lock:
                round_trips.append((slot, took))
                sent[began] = slot
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sent, round_trips


def run(server, args, contestant, number):
    session = requests.Session()
    session.headers["x-service-api-org"] = TOKEN
    receivers = {}
    fast = f"{contestant}{number}"  # a subscription of its own for every run
    if contestant in ("one", "hanging"):
        receivers[fast] = ReceiverProcess(args.receiver_ms)
    if contestant == "hanging":
        receivers[f"hung{number}"] = ReceiverProcess(None)
    for identifier, receiver in receivers.items():
        graphql(session, server.url, SUBSCRIBE, {"input": {"subscriptionID": identifier, "webhookUrl": receiver.url,
                                                           "secret": receiver.secret}})
    first_seq = graphql(session, server.url, "{ latestEventSeq }", {})["latestEventSeq"] + 1
    cpu_before = tree_cpu_seconds(server.process.pid)
    sent, round_trips = send_changes(server.url, args)
    cpu = tree_cpu_seconds(server.process.pid) - cpu_before
    kept = [took for slot, took in round_trips if slot >= args.warm_up]
    figures = {"api_p50_ms": percentile(kept, 0.5) * 1000, "api_p99_ms": percentile(kept, 0.99) * 1000,
               "cpu_ms_per_change": cpu * 1000 / len(round_trips)}
    if receivers:
        receivers[fast].wait_for(len(round_trips))
        figures.update(latencies(receivers[fast].deliveries(), sent, first_seq, args))
    for identifier, receiver in receivers.items():
        graphql(session, server.url, UNSUBSCRIBE, {"id": identifier})
        if identifier != fast:
            receiver.deliveries()
    return figures


def latencies(deliveries, sent, first_seq, args):
    """Commit-to-2xx of each change, by its seq: the seqs of the run are matched to the sends in the order they were
    sent (a change's seq is not in its answer; changes sent by several clients at once may commit in the other order,
    a few milliseconds apart, which is what this can err by)."""
    arrived = {}
    for identifier, when in deliveries:
        arrived.setdefault(int(identifier.rsplit("_", 1)[1]), when)
    send_times = sorted(sent)
    values = [arrived[first_seq + index] - when for index, when in enumerate(send_times)
              if index >= args.warm_up and first_seq + index in arrived]
    if len(values) < len(send_times) - args.warm_up:
        raise SystemExit(f"{len(send_times) - args.warm_up - len(values)} changes never reached the receiver")
    return {"p50_ms": percentile(values, 0.5) * 1000, "p99_ms": percentile(values, 0.99) * 1000}


class Server:
    def __init__(self, args, temp, stack):
        env = {"WIS_WORKERS": str(args.workers), "WIS_ACCESS_LOG": "off", "WIS_LOG_LEVEL": "error",
               "WIS_WEBHOOK_ALLOW_HTTP": "1", "WIS_WEBHOOK_ALLOW_NETS": "127.0.0.1/32"}
        if args.backend == "shared":
            env.update(stack.enter_context(SharedBackend()).server_env())
        self.process, self.url = start("service:create_app()", temp / "data", env=env)
        stack.callback(stop, self.process)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("file", "shared"), default="file")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rate", type=float, default=100.0, help="changes a second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--receiver-ms", type=float, default=5.0)
    parser.add_argument("--warm-up", type=int, default=50, help="changes of each run left out of its percentiles")
    args = parser.parse_args()
    contestants = ("none", "one", "hanging")
    results = {contestant: [] for contestant in contestants}
    with tempfile.TemporaryDirectory() as temp, contextlib.ExitStack() as stack:
        server = Server(args, Path(temp), stack)
        run(server, args, "one", 0)  # a warm-up run, discarded
        for number in range(args.runs):
            order = contestants[number % 3:] + contestants[:number % 3]
            for contestant in order:
                results[contestant].append(run(server, args, contestant, number + 1))
                print(f"run {number + 1}, {contestant}: "
                      + ", ".join(f"{key} {value:.1f}" for key, value in results[contestant][-1].items()), flush=True)
    report(args, results)


def report(args, results):
    none, one, hanging = (medians(results[name]) for name in ("none", "one", "hanging"))
    print(f"\n{args.rate:g} changes a second for {args.seconds:g} s, a {args.receiver_ms:g} ms receiver ({args.backend} "
          f"backend, {args.workers} workers), medians of {args.runs} runs:")
    print(f"  commit to 2xx, one subscription: p50 {one['p50_ms']:.1f} ms, p99 {one['p99_ms']:.1f} ms")
    print(f"  commit to 2xx, beside a subscription whose receiver hangs: p50 {hanging['p50_ms']:.1f} ms, p99 "
          f"{hanging['p99_ms']:.1f} ms")
    for name, figures in (("one", one), ("hanging", hanging)):
        print(f"  the API's latency ({name}): p50 {figures['api_p50_ms']:.1f} ms ({figures['api_p50_ms'] / none['api_p50_ms']:.2f} x "
              f"none's {none['api_p50_ms']:.1f}), p99 {figures['api_p99_ms']:.1f} ms "
              f"({figures['api_p99_ms'] / none['api_p99_ms']:.2f} x none's {none['api_p99_ms']:.1f})")
        print(f"  server CPU per change ({name}): {figures['cpu_ms_per_change']:.2f} ms "
              f"({figures['cpu_ms_per_change'] / none['cpu_ms_per_change']:.2f} x none's "
              f"{none['cpu_ms_per_change']:.2f})")


if __name__ == "__main__":
    main()
