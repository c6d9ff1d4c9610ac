"""Shared fixtures: an isolated app per test, real gunicorn servers for end-to-end tests, and a real browser (the
system's headless Chromium, driven by Playwright) with a server of static pages on an origin of their own.

Only fixtures live here; what tests import (tokens, media makers, request helpers, the servers) is in the topic
modules of the support package. A test starts a process (gunicorn, `wis serve`, Chromium, Node, the engines) only
through a fixture here: the fixture names its tier (support/tiers.py), and a fast-tier test that starts one fails.
"""
import fcntl
import json
import os
import shutil
import subprocess
import sys

import pytest
from flask import Flask
from flask.testing import FlaskClient

from service import create_app
from service.storage.files import checkpoints
from service.client import Client
from service.storage import get_repository, open_repository
from support.backends import FileBackend, SharedBackend
from support.engines import POSTGRES_INSTALL, WEED_INSTALL, PostgresServer, SeaweedServer, postgres_bin, weed_binary
from support.projects import WITHOUT_FOREIGN_PLUGINS
from support.servers import CHROMIUM, CHROMIUM_ARGS, JS_DIR, SHIPPED_WORKER_CLASS, GunicornServer, PageServer
from support.tokens import HEADERS, OTHER_HEADERS, TOKEN, TOKENS

BACKENDS = ("file", "shared")


@pytest.fixture(autouse=True)
def no_background_checkpoints(monkeypatch):
    """No checkpoint thread in this process (service.storage.files.checkpoints): a test that counts its syncs must not
    count another test's. The checkpoints' own tests turn them on, and every server a test starts has them."""
    monkeypatch.setattr(checkpoints, "CHECKPOINT_SECONDS", None)


class ClosingClient(FlaskClient):
    """The test client of every app: reads each answer whole and closes it, as a WSGI server does, and closes the
    request body it made. Werkzeug leaves both open (a media answer's file; a multipart body over 500 KB is spooled
    to a temporary file), and an unclosed file is a ResourceWarning, an error in this suite."""

    def open(self, *args, buffered=True, **kwargs):
        response = super().open(*args, buffered=buffered, **kwargs)
        response.request.environ["wsgi.input"].close()
        return response


Flask.test_client_class = ClosingClient


def pytest_configure(config):
    # Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (as in some containers): the suite starts hundreds
    # of Python processes on the same code (gunicorn workers, `wis`, nested pytest runs, each xdist worker's rewritten
    # test modules), and compiling it again in each cost 0.2 CPU s per server process here (into __pycache__, ignored
    # by git). Set before xdist starts its workers, which inherit the environment.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    # The tiers: markers from the fixtures each test uses, and the check that a fast test starts nothing.
    config.pluginmanager.import_plugin("support.tiers")
    config.addinivalue_line("markers", "file_backend_only(reason): the test is about the file backend itself (its "
                                       "files, its crash safety) or about something no backend changes; it does "
                                       "not run on the shared backend")
    config.addinivalue_line("markers", "waits: the module spends most of its time waiting (outages of a minute or "
                                       "more), so it runs first: with -n, the other workers' tests fill the wait "
                                       "instead of the wait ending the run")


def pytest_collection_modifyitems(items):
    """The order xdist hands modules out in (pyproject.toml turns its own reordering off): the waiting modules first,
    then the others by their number of tests, most first (xdist's own order, which put a module of two tests that
    wait two minutes last, where its wait ended the run). Within a module, the tests keep their order."""
    modules = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    ordered = sorted(modules.values(),
                     key=lambda tests: (tests[0].get_closest_marker("waits") is None, -len(tests)))
    items[:] = [item for tests in ordered for item in tests]


def pytest_generate_tests(metafunc):
    """Every test that uses the `backend` fixture (through app, client, server, ...) runs against both backends,
    unless it is marked file_backend_only. Grouped by module, so a module's server is started once per backend."""
    if "backend" in metafunc.fixturenames:
        only_file = metafunc.definition.get_closest_marker("file_backend_only") is not None
        metafunc.parametrize("backend", ["file"] if only_file else list(BACKENDS), indirect=True, scope="module")


@pytest.fixture(scope="module")
def backend(request):
    if request.param == "file":
        return FileBackend()
    return request.getfixturevalue("shared_backend")


@pytest.fixture(scope="session")
def shared_backend(postgres, seaweed):
    """PostgreSQL and SeaweedFS for the session; every app or server gets a schema (or database) and key prefix of its
    own."""
    # boto3 in this process (apps made by create_app) finds the store the way a deployment does: by environment.
    os.environ.update(seaweed.env())
    return SharedBackend(postgres, seaweed.create_bucket("wis-tests"))


@pytest.fixture
def make_app(tmp_path, backend):
    """`make_app(**overrides)`: an app on the test's backend with its own stores, closed after the test."""
    apps = []

    def make(**overrides):
        config = {"DATA_DIR": str(tmp_path / f"data{len(apps) or ''}"), "API_TOKENS": TOKENS, "TESTING": True,
                  **backend.settings()}
        config.update(overrides)
        apps.append(create_app(config))
        return apps[-1]

    yield make
    for made in apps:
        get_repository(made).close()


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def repo(app):
    return get_repository(app)


@pytest.fixture
def other_repo(app):
    """A second repository on the app's stores: another worker process, or on the shared backend another node."""
    other = open_repository(app.config)
    yield other
    other.close()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def auth():
    return dict(HEADERS)


@pytest.fixture
def other_auth():
    return dict(OTHER_HEADERS)


# -- real gunicorn, and other server processes -------------------------------------------------------------------
# Every server process a test starts comes from one of these factories (tiers.py marks its users `server`).

def _gunicorn_factory():
    servers = []

    def start(data_dir, **options):
        servers.append(GunicornServer(data_dir, **options))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def start_gunicorn():
    """`start_gunicorn(data_dir, **options)`: a GunicornServer (support.servers) for one test, stopped after it unless
    the test stopped it."""
    yield from _gunicorn_factory()


@pytest.fixture(scope="module")
def start_module_gunicorn():
    """`start_module_gunicorn(data_dir, **options)`: a GunicornServer for the fixtures of one module, stopped after
    its last test."""
    yield from _gunicorn_factory()


@pytest.fixture
def server_process():
    """`server_process(argv, **popen_options)`: a server command (`wis serve`, the Procfile's gunicorn) started as a
    process, killed after the test if it still runs; `server_process.run(argv, **run_options)` runs one to its end
    (a command that must refuse to start)."""
    started = []

    class Starter:
        def __call__(self, argv, **options):
            started.append(subprocess.Popen(argv, **options))
            return started[-1]

        def run(self, argv, **options):
            return subprocess.run(argv, **options)

    yield Starter()
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def gunicorn_server(tmp_path, backend, start_gunicorn):
    """A fresh gunicorn server for one test."""
    return start_gunicorn(tmp_path / "gunicorn-data", backend=backend)


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend, start_module_gunicorn):
    """One gunicorn server (two workers) shared by a module's tests; modules that need another kind define their own."""
    return start_module_gunicorn(tmp_path_factory.mktemp("data"), workers=2, backend=backend)


@pytest.fixture(scope="module")
def threaded_server(tmp_path_factory, backend, start_module_gunicorn):
    """Two workers of the shipped (threaded) class, four threads each: requests of one upload meet in one process as
    well as across two."""
    return start_module_gunicorn(tmp_path_factory.mktemp("threaded") / "data", workers=2, backend=backend,
                                 extra_args=("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4"))


@pytest.fixture
def api(server):
    """service.client for `server`, with the default token and no back-off between retries."""
    return Client(server.url, TOKEN, timeout=30, backoff=0)


# -- a real browser ---------------------------------------------------------------------------------
# Chromium comes from the system (`apt-get install -y chromium`, or WIS_CHROMIUM=<path>); Playwright's own browser
# download is never used. Without Chromium the browser tests fail and say so: they must not pass by not running.

@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for the tests of one module."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"the browser tests need Chromium, not found at {CHROMIUM}: install it "
                    "(apt-get install -y chromium) or set WIS_CHROMIUM to its path", pytrace=False)
    from playwright.sync_api import sync_playwright  # only the browser tests pay for importing it

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def serve_pages():
    """`serve_pages({"/page.html": path})` starts a PageServer; every one started is stopped after the module."""
    servers = []

    def start(files):
        servers.append(PageServer(files))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def js_packages():
    """tests/js with the npm packages of its package-lock.json installed by `npm ci` (tus-js-client for the Node tests,
    axe-core for the pages' accessibility check); the tests fail (not skip) without npm."""
    npm = shutil.which("npm")
    if not npm:
        pytest.fail("the tests of tests/js's packages need Node.js (>= 18) and npm on PATH: apt-get install nodejs npm")
    wanted = json.loads((JS_DIR / "package.json").read_text())["dependencies"]
    # xdist workers install them one at a time: the lock is held across the check and `npm ci`.
    with open(JS_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((JS_DIR / "node_modules" / name).is_dir() for name in wanted):
            result = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True,
                                    text=True, timeout=300)
            if result.returncode != 0:
                pytest.fail(f"npm ci in {JS_DIR} failed:\n{result.stdout}\n{result.stderr}")
    return JS_DIR


@pytest.fixture(scope="session")
def node(js_packages):
    """Node.js, with tus-js-client installed into tests/js; the tests fail (not skip) without Node."""
    node_binary = shutil.which("node")
    if not node_binary:
        pytest.fail("the tus-js-client tests need Node.js (>= 18) and npm on PATH: apt-get install nodejs npm")
    return node_binary


@pytest.fixture
def run_project():
    """`run_project(directory)` runs pytest in a project of its own (its directory, its configuration, none of this
    repository's test setup or settings) and returns the finished process, output captured as text."""
    def run(directory):
        environment = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "WIS_"))}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *WITHOUT_FOREIGN_PLUGINS]
        return subprocess.run(command, cwd=directory, env=environment, capture_output=True, text=True, timeout=300)
    return run


# -- real engines for the shared backend ----------------------------------------------------------------------------
# Started the first time a test asks (session fixtures are lazy), stopped by pid at the end of the session. Without
# the engine the tests fail and say how to install it: they must not pass by not running.

@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL cluster (tests.engines.PostgresServer) for the session: `postgres.new_database()` gives each test
    a database of its own."""
    if postgres_bin() is None:
        pytest.fail(f"the shared-backend tests need PostgreSQL: {POSTGRES_INSTALL}", pytrace=False)
    server = PostgresServer()
    yield server
    server.remove()


@pytest.fixture(scope="session")
def seaweed():
    """A SeaweedFS S3 server (tests.engines.SeaweedServer) for the session: `seaweed.create_bucket(name)` gives each
    test a bucket of its own, `seaweed.env()` the environment of a service process."""
    if weed_binary() is None:
        pytest.fail(f"the shared-backend tests need SeaweedFS's weed: {WEED_INSTALL}", pytrace=False)
    server = SeaweedServer()
    yield server
    server.remove()
