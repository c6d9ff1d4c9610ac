"""What the embedded test double costs a test suite, each figure beside its baseline from the same run (run by hand).

1. Start-up. In a fresh interpreter each time: importing service.testing, then `ThreadedServer()` to the first
   answered request (`start()` returns once /healthz answered), against a bare Flask app with one route served the
   same way (werkzeug's threaded server in a thread, the first request through urllib). Then the same to the first
   GraphQL answer: a `{ __typename }` POST to /graph/v2 right after `start()` (the double loads graphql-core,
   ariadne and its schema on that first GraphQL request), against a bare Ariadne app with a one-field schema served
   the same way (/healthz first, then the POST). The cases alternate `--runs` times after one discarded warm-up
   each; medians of wall and CPU seconds.
2. The pytest session. `python -m pytest` on a one-test file whose test asks for the plugin's `wis_server`, against
   the same file with a session fixture serving the bare Flask app, and against an empty test with the plugin
   loaded but unused and with it disabled (`-p no:work_instruction_service`): what the plugin costs when used and
   when not. Alternating, medians of the subprocess's wall and CPU seconds.
3. The journal. Requests per second through the Flask test client of one test-mode app (GET /healthz, a GraphQL
   query, an upload), with and without the journal's after_request hook, alternating `--runs` rounds of
   `--requests` each; and the median cost of one append.

Interpreters run without PYTHONDONTWRITEBYTECODE, so the warm-up leaves the .pyc files an installed package has
(without them every start compiles the service's modules again, about 0.3 s more here).

    .venv/bin/python bench/test_double_bench.py [--runs 7] [--requests 300] [--only start-up|pytest|journal]
        [--baseline-src DIR]

(`git archive main service schema.graphql | tar -x -C DIR` makes such a directory: the package links to the schema.)
"""
import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SERVICE_START = """
import json, time
started, cpu = time.perf_counter(), time.process_time()
from service.testing import ThreadedServer
imported, cpu_imported = time.perf_counter(), time.process_time()
server = ThreadedServer().start()
answered = time.perf_counter()
print(json.dumps({"import": imported - started, "first_answer": answered - imported, "wall": answered - started,
                  "cpu": time.process_time() - cpu}))
server.stop()
"""
# The bare app (`app`, built by the script) with /healthz, served the way ThreadedServer serves, to its first answer.
BARE_SERVE = """
class Quiet(WSGIRequestHandler):
    def log_request(self, *args, **kwargs):
        pass
app.get("/healthz", endpoint="health")(lambda: {"status": "ok"})
server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
threading.Thread(target=server.serve_forever, daemon=True).start()
urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/healthz", timeout=10).read()
answered = time.perf_counter()
"""
BARE_START = """
import json, time
started, cpu = time.perf_counter(), time.process_time()
import threading, urllib.request
from flask import Flask
from werkzeug.serving import WSGIRequestHandler, make_server
imported = time.perf_counter()
app = Flask("bare")
""" + BARE_SERVE + """
print(json.dumps({"import": imported - started, "first_answer": answered - imported, "wall": answered - started,
                  "cpu": time.process_time() - cpu}))
server.shutdown()
"""
# To the first GraphQL answer: the same start, then a query right after the first answer.
GRAPHQL_QUERY = """
query_request = urllib.request.Request(URL + "/graph/v2", data=b'{"query": "{ __typename }"}',
                                       headers={"Content-Type": "application/json", **HEADERS})
assert json.loads(urllib.request.urlopen(query_request, timeout=10).read()) == {"data": {"__typename": "Query"}}
graphql_answered = time.perf_counter()
print(json.dumps({"import": imported - started, "first_answer": answered - imported,
                  "first_graphql": graphql_answered - answered, "wall": graphql_answered - started,
                  "cpu": time.process_time() - cpu}))
"""
SERVICE_GRAPHQL = """
import json, time
started, cpu = time.perf_counter(), time.process_time()
import urllib.request
from service.testing import ThreadedServer
imported = time.perf_counter()
server = ThreadedServer().start()
answered = time.perf_counter()
URL, HEADERS = server.url, {"x-service-api-org": server.token}
""" + GRAPHQL_QUERY + """
server.stop()
"""
# A bare Ariadne app: a one-field schema, built before serving, as Ariadne's examples do.
BARE_GRAPHQL = """
import json, time
started, cpu = time.perf_counter(), time.process_time()
import threading, urllib.request
from ariadne import QueryType, graphql_sync, make_executable_schema
from flask import Flask, request
from werkzeug.serving import WSGIRequestHandler, make_server
imported = time.perf_counter()
query = QueryType()
query.set_field("hello", lambda *_: "hello")
schema = make_executable_schema("type Query { hello: String }", query)
app = Flask("bare")
app.post("/graph/v2", endpoint="graphql")(lambda: graphql_sync(schema, request.get_json())[1])
""" + BARE_SERVE + """
URL, HEADERS = f"http://127.0.0.1:{server.server_port}", {}
""" + GRAPHQL_QUERY + """
server.shutdown()
"""

PLUGIN_TEST = """
import requests

def test_health(wis_server):
    assert requests.get(wis_server.url + "/healthz", timeout=10).status_code == 200
"""
BARE_TEST = """
import threading
import pytest
import requests
from flask import Flask
from werkzeug.serving import make_server

@pytest.fixture(scope="session")
def bare_server():
    app = Flask("bare")
    app.get("/healthz")(lambda: {"status": "ok"})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    # The poll interval ThreadedServer uses: the default 0.5 s would be waited out at the end of the session.
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()

def test_health(bare_server):
    assert requests.get(bare_server + "/healthz", timeout=10).status_code == 200
"""
EMPTY_TEST = """
def test_nothing():
    pass
"""


def environment(source=ROOT):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(source)
    return env


def run_script(script, source=ROOT):
    """The JSON line a script prints, run in a fresh interpreter importing the service from `source`."""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=environment(source), cwd=source, timeout=120)
    if result.returncode:
        raise SystemExit(result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


# The pytest plugins this repository's test extra installs, which an integrator's project does not have: loaded, they
# would add 3.5 s to every session measured here (tests/support/projects.py turns them off the same way).
FOREIGN_PLUGINS_OFF = [option for name in ("hypothesispytest", "schemathesis", "anyio", "xdist", "xdist.looponfail")
                       for option in ("-p", f"no:{name}")]


def run_pytest(directory, test_file, *options):
    """(wall, CPU) seconds of one pytest run of `test_file`, the CPU of the process and its children."""
    before = os.times()
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FOREIGN_PLUGINS_OFF,
                             *options, test_file],
                            capture_output=True, text=True, env=environment(), cwd=directory, timeout=300)
    wall = time.perf_counter() - started
    after = os.times()
    if result.returncode:
        raise SystemExit(result.stdout + result.stderr)
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def median_of(rows, key):
    return statistics.median(row[key] for row in rows)


def start_up(runs, baseline):
    cases = {"service ThreadedServer": (SERVICE_START, ROOT), "bare Flask app": (BARE_START, ROOT),
             "service, 1st GraphQL": (SERVICE_GRAPHQL, ROOT), "bare Ariadne app": (BARE_GRAPHQL, ROOT)}
    if baseline:
        cases["service, baseline source"] = (SERVICE_START, Path(baseline).resolve())
        cases["baseline, 1st GraphQL"] = (SERVICE_GRAPHQL, Path(baseline).resolve())
    for script, source in cases.values():
        run_script(script, source)  # warm-up: .pyc files, the page cache
    results = {name: [] for name in cases}
    for _ in range(runs):
        for name, (script, source) in cases.items():
            results[name].append(run_script(script, source))
    print(f"\n1. start-up, fresh interpreter, median of {runs} (seconds)")
    print(f"{'':24} {'import':>8} {'to 1st answer':>14} {'then GraphQL':>13} {'total':>8} {'CPU':>8}")
    for name, rows in results.items():
        graphql = f"{median_of(rows, 'first_graphql'):13.3f}" if "first_graphql" in rows[0] else f"{'':13}"
        print(f"{name:24} {median_of(rows, 'import'):8.3f} {median_of(rows, 'first_answer'):14.3f} {graphql} "
              f"{median_of(rows, 'wall'):8.3f} {median_of(rows, 'cpu'):8.3f}")
    ratios = [("import + start to first answer", "service ThreadedServer", "bare Flask app"),
              ("to the first GraphQL answer", "service, 1st GraphQL", "bare Ariadne app")]
    if baseline:
        ratios += [("baseline, to first answer", "service, baseline source", "bare Flask app"),
                   ("baseline, to first GraphQL", "baseline, 1st GraphQL", "bare Ariadne app")]
    for label, service, bare in ratios:
        wall, cpu = ((median_of(results[service], measure) / median_of(results[bare], measure))
                     for measure in ("wall", "cpu"))
        print(f"ratio to the bare app, {label}: wall {wall:.2f}x, CPU {cpu:.2f}x")


def pytest_session(runs):
    with tempfile.TemporaryDirectory() as directory:
        for name, text in (("test_plugin.py", PLUGIN_TEST), ("test_bare.py", BARE_TEST), ("test_empty.py", EMPTY_TEST)):
            Path(directory, name).write_text(textwrap.dedent(text))
        cases = {
            "plugin's wis_server": ("test_plugin.py",),
            "bare Flask fixture": ("test_bare.py",),
            "empty, plugin loaded": ("test_empty.py",),
            "empty, plugin disabled": ("test_empty.py", "-p", "no:work_instruction_service"),
        }
        for test_file, *options in cases.values():
            run_pytest(directory, test_file, *options)  # warm-up
        results = {name: [] for name in cases}
        for _ in range(runs):
            for name, (test_file, *options) in cases.items():
                results[name].append(run_pytest(directory, test_file, *options))
    print(f"\n2. pytest session (one test), median of {runs} (seconds)")
    print(f"{'':24} {'wall':>8} {'CPU':>8}")
    for name, rows in results.items():
        print(f"{name:24} {statistics.median(r[0] for r in rows):8.3f} {statistics.median(r[1] for r in rows):8.3f}")
    wall = {name: statistics.median(r[0] for r in rows) for name, rows in results.items()}
    print(f"overhead over the empty session: plugin {wall[next(iter(cases))] - wall['empty, plugin loaded']:.3f} s, "
          f"bare Flask {wall['bare Flask fixture'] - wall['empty, plugin loaded']:.3f} s")


def journal_cost(runs, count):
    sys.path.insert(0, str(ROOT))
    from service import create_app
    from service.testing import recorder as journal
    from service.storage import get_repository

    with tempfile.TemporaryDirectory() as directory:
        app = create_app({"DATA_DIR": directory, "API_TOKENS": "default:bench-token-123", "TEST_MODE": True,
                          "QUIET_STARTUP": True})
        client = app.test_client()
        headers = {"x-service-api-org": "bench-token-123"}
        png = b"\x89PNG\r\n\x1a\n" + bytes(1000)
        requests_by_kind = {
            "GET /healthz": lambda: client.get("/healthz"),
            "GraphQL query": lambda: client.post("/graph/v2", headers=headers,
                                                 json={"query": '{ process(id: "weld_1") { id } }'}),
            "single upload": lambda: client.post("/uploads", headers=headers, data={
                "destinationId": "stepImage", "file": (io.BytesIO(png), "a.png")}),
        }
        hooks = app.after_request_funcs[None]

        def rate(send, with_journal):
            if with_journal and journal.record not in hooks:
                hooks.append(journal.record)
            if not with_journal and journal.record in hooks:
                hooks.remove(journal.record)
            started, cpu = time.perf_counter(), time.process_time()
            for _ in range(count):
                send()
            return count / (time.perf_counter() - started), (time.process_time() - cpu) / count

        print(f"\n3. the journal: requests/s through the Flask test client, median of {runs} rounds of {count}")
        print(f"{'':16} {'without':>9} {'with':>9} {'CPU us/request added':>22}")
        for name, send in requests_by_kind.items():
            rows = {True: [], False: []}
            for _ in range(runs):
                for with_journal in (False, True):
                    rows[with_journal].append(rate(send, with_journal))
                get_repository(app).reset()  # keeps the upload directory small between rounds
            without, with_ = (statistics.median(r[0] for r in rows[flag]) for flag in (False, True))
            added = statistics.median(r[1] for r in rows[True]) - statistics.median(r[1] for r in rows[False])
            print(f"{name:16} {without:9.0f} {with_:9.0f} {added * 1e6:22.0f}")

        store = get_repository(app).journal
        entry = {"at": "2026-01-01T00:00:00.000Z", "org": "default", "method": "GET", "path": "/healthz",
                 "status": 200, "durationMs": 0.1, "operation": None, "ids": [], "requestId": "0" * 32, "fault": None}
        times = []
        for _ in range(count):
            started = time.perf_counter()
            store.append([entry])
            times.append(time.perf_counter() - started)
        print(f"one append (lock, state, line): median {statistics.median(times) * 1e6:.0f} us")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--only", choices=["start-up", "pytest", "journal"])
    parser.add_argument("--baseline-src", help="a directory holding another version of the `service` package (say "
                                                "`git archive main service schema.graphql | tar -x -C DIR`): its start-up too")
    args = parser.parse_args()
    if args.only in (None, "start-up"):
        start_up(args.runs, args.baseline_src)
    if args.only in (None, "pytest"):
        pytest_session(args.runs)
    if args.only in (None, "journal"):
        journal_cost(args.runs, args.requests)


if __name__ == "__main__":
    main()
