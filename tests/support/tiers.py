"""The test tiers: each test is marked by what it starts, from the fixtures it uses, and a fast-tier test that starts
a process of another tier fails.

    server   real gunicorn or `wis serve` processes (start_gunicorn, start_module_gunicorn, server_process)
    browser  headless Chromium driven by Playwright (browser)
    node     Node.js and npm: the packages of tests/js (node, js_packages)
    engines  PostgreSQL and SeaweedFS (postgres, seaweed; every test run on the shared backend)
    projects a pytest session of its own in a subprocess (pytester, run_project): a project using the plugin
    fast     none of these: Python only (the Flask test client, servers in a thread, short `wis` or python commands)

One marker is set by hand, on a whole module or a test: `exhaustive`, for tests that start nothing but run hundreds
or thousands of cases, or one input as large as the limits allow, in this process (generated inputs, every crash
point, memory over many requests, the largest answer). They are not in
the fast tier, which is meant to answer within a minute.

Fixtures are followed through their dependencies (`item.fixturenames` is the closure), so a test that asks for `api`
is a server test because `api` asks for `server`. A pytest plugin, loaded by conftest.py.
"""
import os
import sys

import pytest

TIER_FIXTURES = {
    "server": {"start_gunicorn", "start_module_gunicorn", "server_process"},
    "browser": {"browser"},
    "node": {"node", "js_packages"},
    "engines": {"postgres", "seaweed"},
    "projects": {"pytester", "run_project"},
}
MARKERS = {
    "server": "starts real gunicorn or `wis serve` (applied from the fixtures the test uses)",
    "browser": "drives headless Chromium (applied from the fixtures the test uses)",
    "node": "runs Node.js or npm: the packages of tests/js (applied from the fixtures the test uses)",
    "engines": "needs PostgreSQL and SeaweedFS: the shared backend (applied from the fixtures and the backend)",
    "projects": "runs a pytest session of its own in a subprocess (applied from the fixtures the test uses)",
    "exhaustive": ("runs hundreds or thousands of cases, or the largest input, in this process, starting nothing "
                   "(set on the module or the test)"),
    "fast": "starts none of the above and is not exhaustive: Python only, seconds (applied to every other test)",
}

# What a fast test must not start, by the program a process runs.
PROGRAM_TIERS = {
    "gunicorn": "server",
    "chromium": "browser", "chromium-browser": "browser", "chrome": "browser", "headless_shell": "browser",
    "node": "node", "npm": "node", "npx": "node",
    "postgres": "engines", "postmaster": "engines", "initdb": "engines", "pg_ctl": "engines", "weed": "engines",
}


def tiers_of(item):
    """The tiers of a collected test: from the fixtures it uses and from the backend it runs on."""
    names = set(getattr(item, "fixturenames", ()))
    tiers = {tier for tier, fixtures in TIER_FIXTURES.items() if names & fixtures}
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "shared":
        tiers.add("engines")
    return tiers


def tier_of_command(argv):
    """The tier a command line belongs to, or None for a command any test may run."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = str(os.fsdecode(argv)).split()
    words = [os.path.basename(os.fsdecode(word)) for word in argv]
    if words[:1] == ["runuser"]:  # PostgreSQL as the postgres user: runuser -u postgres -- <command>
        words = words[words.index("--") + 1:] if "--" in words else []
    if not words:
        return None
    if words[1:3] == ["-m", "gunicorn"] or words[:2] == ["wis", "serve"]:
        return "server"
    if words[1:3] == ["-m", "pytest"] or words[1:2] == ["-mpytest"] or words[:1] == ["pytest"]:
        return "projects"
    return PROGRAM_TIERS.get(words[0])


def pytest_configure(config):
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    sys.addaudithook(_audit)


def pytest_collection_modifyitems(items):
    for item in items:
        tiers = tiers_of(item)
        for tier in sorted(tiers):
            item.add_marker(tier)
        if not tiers and item.get_closest_marker("exhaustive") is None:
            item.add_marker("fast")


# -- the check: a fast test starts nothing ------------------------------------------------------------------------
# An audit hook sees every process this Python starts (subprocess, asyncio's subprocesses, Playwright's driver), in
# any thread; while a fast test runs (setup, call and teardown, module fixtures included) what it starts is noted, and
# its teardown report fails naming it.

_running_fast = None  # the fast test running now, or None
_started = []  # (tier, command line) started by it


def _audit(event, args):
    if event != "subprocess.Popen" or _running_fast is None:
        return
    try:
        tier = tier_of_command(args[1])
    except Exception:  # an audit hook must never break the caller
        return
    if tier is not None:
        _started.append((tier, " ".join(map(os.fsdecode, args[1])) if not isinstance(args[1], str) else args[1]))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _running_fast
    _running_fast = item if item.get_closest_marker("fast") is not None else None
    _started.clear()
    try:
        return (yield)
    finally:
        _running_fast = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown" and item is _running_fast and _started and report.passed:
        started = "; ".join(f"{tier}: {command}" for tier, command in _started)
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} is a fast-tier test but started {started}. Start servers, browsers, Node, "
                           "engines and pytest sessions through their fixtures (start_gunicorn, server_process, "
                           "browser, node, postgres, seaweed, pytester, run_project), which mark the test's tier.")
    return report
