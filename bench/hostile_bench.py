"""Hostile requests against benign requests of the same size, on real gunicorn (run by hand, not a test).

Starts the service with the gunicorn configuration the project ships (`-c python:service.gunicorn_config`, as
`wis serve` does) and one worker, so that a request's cost is that worker's, on the file backend (a fresh data
directory) or with `--backend shared` on PostgreSQL + SeaweedFS (bench/shared_backend.py). For each case it sends a
hostile request and a benign request of the same size, alternately (the order swapped every round), `--rounds`
times after a discarded warm-up pair. Each measured request goes to a fresh worker (the worker is stopped, gunicorn
starts another, a small query warms it up), since a worker keeps the memory an earlier request grew it to; and per
request it measures:
- the CPU seconds of the worker (utime + stime from /proc/<pid>/stat, before and after; 10 ms resolution);
- the worker's peak RSS during the request (VmHWM, reset through /proc/<pid>/clear_refs before it; where that is
  not allowed, VmRSS sampled every 2 ms).
It prints the medians per case and the ratios hostile/benign, and what the last answers were.

Cases are a list of Case(name, setup, hostile, benign): `setup(post)` stores once what the requests need, and
`hostile(size)` and `benign(size)` make the JSON body of one request. Another helper adds an item by appending a
Case to CASES (request makers may return any JSON-able dict; the size is the case's own knob).

    .venv/bin/python bench/hostile_bench.py [--backend file|shared] [--rounds 5] [--cases scan-ids,aliases,...]
        [--tree DIR]    # serve another checkout (e.g. an export of main) to see the figures before a change
"""
import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shared_backend import CLOCK_TICKS, SharedBackend  # noqa: E402 (bench/ is not a package)
from upload_bench import free_port, stop, wait_ready  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0001"
HEADERS = {"x-service-api-org": TOKEN, "Content-Type": "application/json"}
PROCESS_CREATE = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"


class Case(NamedTuple):
    name: str
    setup: Callable  # setup(post): store what the requests read
    hostile: Callable  # hostile(size) -> request body (a dict)
    benign: Callable  # benign(size) -> request body of the same length
    size: int
    what: str


# ---------------------------------------------------------------- the cases

def no_setup(_post):
    pass


def serialized_parts(part_ids):
    """A processCreate with one action per part id, each part serialized (a scan action is derived for each)."""
    actions = [{"id": f"act_{number:05d}", "inputParts": [{"part": {"id": part_id, "serial": {"id": "sn_1"}}}]}
               for number, part_id in enumerate(part_ids)]
    return {"query": PROCESS_CREATE, "variables": {"input": {"process": {
        "id": "proc_scans", "name": "Scans", "steps": [{"id": "step_1", "actions": actions}]}}}}


def scan_ids_hostile(parts):
    # Ids equal in their first 45 characters: every scan id is `scan_<the same 45 characters>` plus a suffix.
    return serialized_parts(["p" * 45 + f"{number:05d}" for number in range(parts)])


def scan_ids_benign(parts):
    # The same length, differing in their first characters.
    return serialized_parts([f"{number:05d}" + "p" * 45 for number in range(parts)])


TEXT = "t" * 20_000  # the longest text an input may hold


def store_long_and_short(post):
    """proc_large: 50 steps of 20,000-character texts (1 MB); proc_small: the same steps with a one-letter text."""
    for identifier, text in (("proc_large", TEXT), ("proc_small", "t")):
        post({"query": PROCESS_CREATE, "variables": {"input": {"process": {
            "id": identifier, "name": identifier, "steps": [
                {"id": f"step_{number:02d}", "instructionText": {"text": text}} for number in range(50)]}}}})


def aliased_reads(identifier, aliases):
    return {"query": "{ " + " ".join(f'a{number:03d}: process(id: "{identifier}") {{ steps {{ instructionText {{ text }} }} }}'
                                     for number in range(aliases)) + " }"}


def infinite_literal(number):
    """processCreate with `number` written in the query text as a quantity, a min and a max."""
    return {"query": 'mutation { processCreate(input: {process: {id: "proc_numbers", name: "N", steps: [{id: "step_1", '
                     f'actions: [{{id: "act_1", inputParts: [{{part: {{id: "bolt"}}, quantity: {number}}}], '
                     f'measurement: {{min: -{number}, max: {number}}}}}]}}]}}}}) }}'}


def repeated_variable(repeated_first, steps):
    """processCreate of `steps` steps whose instruction texts are variables: $t (20,000 characters) in every step but
    one, or in one step only (the others $n, one character). The same request length either way."""
    def text(number):
        return "$n" if (number == 0) == repeated_first else "$t"
    listed = ", ".join(f'{{id: "step_{number:05d}", instructionText: {text(number)}}}' for number in range(steps))
    return {"query": "mutation($t: StyledTextInput, $n: StyledTextInput) { processCreate(input: {process: {"
                     f'id: "proc_repeated", name: "R", steps: [{listed}]}}}}) }}',
            "variables": {"t": {"text": TEXT}, "n": {"text": "n"}}}


def store_large_and_small_processes(post):
    """40 processes of 1 MB (big_00..big_39) and 40 of a few hundred bytes (sml_00..sml_39)."""
    for prefix, text in (("big", TEXT), ("sml", "t")):
        for number in range(40):
            post({"query": PROCESS_CREATE, "variables": {"input": {"process": {
                "id": f"{prefix}_{number:02d}", "name": "P", "steps": [
                    {"id": f"step_{step:02d}", "instructionText": {"text": text}} for step in range(50)]}}}})


def page_of_ids(after, first):
    return {"query": f'{{ processes(first: {first}, after: "{after}") {{ id }} }}'}


CASES = [
    Case("scan-ids", no_setup, scan_ids_hostile, scan_ids_benign, 2_000,
         "processCreate of N serialized parts whose ids share their first 45 characters / differ early"),
    Case("aliases", store_long_and_short, lambda n: aliased_reads("proc_large", n),
         lambda n: aliased_reads("proc_small", n), 100,
         "N aliases of a 1 MB process's texts / of a process with the same steps and one-letter texts"),
    Case("infinite", no_setup, lambda _n: infinite_literal("1e400"), lambda _n: infinite_literal("1e300"), 1,
         "processCreate with 1e400 written in the query text / with 1e300"),
    Case("repeated-variable", no_setup, lambda n: repeated_variable(True, n), lambda n: repeated_variable(False, n),
         1_000, "processCreate of N steps naming one 20,000-character variable in each step / in one step"),
    Case("page-of-large", store_large_and_small_processes, lambda n: page_of_ids("big_", n),
         lambda n: page_of_ids("sml_", n), 40, "the ids of a page of N processes of 1 MB / of N small processes"),
]


# ---------------------------------------------------------------- measuring a worker

def children(pid):
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def status_kb(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


class PeakRss:
    """The peak RSS (MB) of one process during a `with` block: VmHWM reset before it, or VmRSS sampled."""

    def __init__(self, pid):
        self.pid, self.peak_kb, self._stop = pid, 0, threading.Event()
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            self.resettable = True
        except OSError:
            self.resettable = False

    def __enter__(self):
        if self.resettable:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # VmHWM := the current RSS
        else:
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.002):
            self.peak_kb = max(self.peak_kb, status_kb(self.pid, "VmRSS"))

    def __exit__(self, *exc):
        if self.resettable:
            self.peak_kb = status_kb(self.pid, "VmHWM")
        else:
            self._stop.set()
            self._sampler.join()

    @property
    def megabytes(self):
        return self.peak_kb / 1024


class Server:
    """gunicorn with the shipped configuration and one worker, on a free port."""

    def __init__(self, data_dir, env, tree):
        port = free_port()
        environment = dict(os.environ, WIS_DATA_DIR=str(data_dir), WIS_API_TOKENS=f"default:{TOKEN}",
                           WIS_BIND=f"127.0.0.1:{port}", WIS_WORKERS="1", **env)
        # `python -m` puts the working directory first on sys.path: `service` is imported from `tree`.
        self.process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:service.gunicorn_config"],
                                        cwd=tree, env=environment, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}/graph/v2"
        wait_ready(self.url, self.process, "gunicorn")
        self.session = requests.Session()

    def worker(self):
        [pid] = children(self.process.pid)
        return pid

    def fresh_worker(self):
        """Replace the worker by a new one (gunicorn starts it), warmed up by a small query; its pid."""
        old = self.worker()
        os.kill(old, signal.SIGTERM)
        for _ in range(600):
            found = children(self.process.pid)
            if found and old not in found:
                break
            time.sleep(0.05)
        else:
            raise SystemExit("gunicorn started no new worker")
        self.send({"query": "{ stations(first: 1) { id } }"})
        return self.worker()

    def send(self, body):
        return self.session.post(self.url, data=json.dumps(body).encode(), headers=HEADERS, timeout=600)

    def post(self, body):
        """(answer summary, CPU seconds, peak RSS MB, request bytes) of one request, in a fresh worker."""
        data = json.dumps(body).encode()
        worker = self.fresh_worker()
        with PeakRss(worker) as peak:
            before = cpu_seconds([worker])
            response = self.session.post(self.url, data=data, headers=HEADERS, timeout=600)
            spent = cpu_seconds([worker]) - before
        return summary(response), spent, peak.megabytes, len(data)

    def close(self):
        stop(self.process)


def summary(response):
    """What an answer was, in a few words: its data's values, or its first error code, and its size."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}, not JSON"
    if body.get("errors"):
        codes = sorted({error.get("extensions", {}).get("code", "?") for error in body["errors"]})
        what = "errors " + ",".join(codes) + (", data null" if body.get("data") is None else "")
    else:
        what = "ok"
    return f"{what}, {len(response.content):,} bytes"


def run_case(server, case, rounds):
    case.setup(server.send)
    hostile, benign = case.hostile(case.size), case.benign(case.size)
    measured = {"hostile": [], "benign": []}
    answers = {}
    for number in range(rounds + 1):  # the first pair warms up and is discarded
        order = (("hostile", hostile), ("benign", benign)) if number % 2 == 0 else (("benign", benign), ("hostile", hostile))
        for kind, body in order:
            answer, cpu, rss, length = server.post(body)
            answers[kind] = (answer, length)
            if number:
                measured[kind].append((cpu, rss))
    return measured, answers


def report(case, measured, answers):
    def median(kind, index):
        return statistics.median(figures[index] for figures in measured[kind])

    cpu = {kind: median(kind, 0) for kind in measured}
    rss = {kind: median(kind, 1) for kind in measured}
    print(f"\n{case.name} (size {case.size}): {case.what}")
    for kind in ("hostile", "benign"):
        answer, length = answers[kind]
        print(f"  {kind:8} request {length:>9,} bytes  CPU {cpu[kind]:7.3f} s  peak RSS {rss[kind]:7.1f} MB  "
              f"answer: {answer}")
    ratio = cpu["hostile"] / cpu["benign"] if cpu["benign"] else float("inf")
    print(f"  hostile/benign: CPU x{ratio:.1f}, peak RSS x{rss['hostile'] / rss['benign']:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("file", "shared"), default="file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", default=",".join(case.name for case in CASES))
    parser.add_argument("--size", action="append", default=[],
                        help="NAME=SIZE overrides a case's size (repeatable), e.g. scan-ids=4000")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to serve (default: this one)")
    args = parser.parse_args()
    sizes = dict(item.split("=") for item in args.size) if args.size else {}
    chosen = [case._replace(size=int(sizes.get(case.name, case.size))) for case in CASES
              if case.name in args.cases.split(",")]
    print(f"backend {args.backend}, {args.rounds} rounds after a warm-up pair, serving {args.tree}")
    with tempfile.TemporaryDirectory(prefix="wis-hostile-") as temp, contextlib.ExitStack() as stack:
        env = {}
        if args.backend == "shared":
            env = stack.enter_context(SharedBackend()).server_env()
        server = Server(Path(temp) / "data", env, args.tree)
        stack.callback(server.close)
        for case in chosen:
            measured, answers = run_case(server, case, args.rounds)
            report(case, measured, answers)


if __name__ == "__main__":
    main()
