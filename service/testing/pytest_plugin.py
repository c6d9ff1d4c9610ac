"""pytest fixtures for integrators, installed as a `pytest11` entry point: a live service and a clean state.

- `wis_token`: the API token the server accepts (org `default`), session scoped.
- `wis_server`: a ThreadedServer (service.testing) on a free 127.0.0.1 port, test mode on, with a
  temporary data directory; one per test session.
- `wis_seed`: the test seed of that server (None when names are random). Set it with `--wis-seed=<int>`, the ini
  option `wis_seed`, or WIS_TEST_SEED in the environment; each test then sees the same stream ids and media
  paths on every run, whatever ran before it (the names are counted from the reset before each test).
- `wis_clean`: empties the server (documents, media, streams, faults, journal) before the test; with the marker
  `@pytest.mark.wis_snapshot("line.tar.gz")` (a path relative to the test's file) it restores that snapshot instead,
  so every fixture below starts from it.
- `wis_snapshot`: the orgs of the marker's snapshot with their counts (a test that asks for it must have the marker).
- `wis_client`: a service.client.Client for the server, on a clean server.
- `wis_session`: a requests.Session taking relative paths (`wis_session.get("/_test/objects")`), on a clean server.
- `wis_journal`: the server's request journal (service.testing.RequestJournal) on a clean server:
  `wis_journal.assert_called("processCreate", ids=["weld_1"], times=1)`, `.operations()`, `.ids(...)`, `.uploads()`.
- `wis_fault`: `wis_fault(method="PATCH", path="^/uploads/", status=503)` injects a fault (see /_test/faults):
  also `rate=0.3` (each matching request fails with that probability) and `reset=True` (no answer at all).
- `wis_webhook_receiver`: a receiver of webhooks on 127.0.0.1 (service.testing.webhook_receiver.WebhookReceiver) for
  one test: subscribe its `url` with its `secret`, then `wait_for(n)` deliveries, each with its signature verified by
  the `standardwebhooks` library; `fail(status=500)`, `hang()`, `redirect(url)`, `slow(seconds)` queue faults.

Nothing here starts unless a test asks for one of these fixtures.
"""
import pytest

DEFAULT_TOKEN = "wis-test-token-0123456789"
SNAPSHOT_MARKER = "wis_snapshot"
# What the restore of a test's snapshot answered (the orgs and their counts), kept on the test's node.
RESTORED = pytest.StashKey[dict]()
SEED_HELP = "test seed of the wis_server fixture: the same stream ids and media paths on every run (WIS_TEST_SEED)"


def pytest_configure(config):
    config.addinivalue_line("markers", f"{SNAPSHOT_MARKER}(path): the test starts from this snapshot archive (a path "
                                       "relative to the test's file) instead of an empty server")


def pytest_addoption(parser):
    parser.addoption("--wis-seed", type=int, default=None, help=SEED_HELP)
    parser.addini("wis_seed", SEED_HELP, default=None)


@pytest.fixture(scope="session")
def wis_token():
    """The API token of the test server's `default` org."""
    return DEFAULT_TOKEN


@pytest.fixture(scope="session")
def wis_server(wis_token, tmp_path_factory, pytestconfig):
    """The service, started once per test session."""
    from service.testing import ThreadedServer

    seed = pytestconfig.getoption("wis_seed")
    if seed is None and pytestconfig.getini("wis_seed"):
        seed = pytestconfig.getini("wis_seed")
    # Without either, the server reads WIS_TEST_SEED from the environment like any other setting.
    with ThreadedServer(token=wis_token, data_dir=tmp_path_factory.mktemp("wis-data"), seed=seed) as server:
        yield server


@pytest.fixture(scope="session")
def wis_seed(wis_server):
    """The test seed the server uses, or None when the names it makes up are random."""
    return wis_server.app.config["TEST_SEED"]


@pytest.fixture
def wis_clean(wis_server, request):
    """A server holding nothing, or the snapshot a `wis_snapshot` marker names: reset (or restored) before the test, so
    a failed test leaves its state to inspect."""
    marker = request.node.get_closest_marker(SNAPSHOT_MARKER)
    if marker is None:
        wis_server.reset()
    else:
        request.node.stash[RESTORED] = wis_server.restore(_snapshot_file(request, marker))
    return wis_server


def _snapshot_file(request, marker):
    if len(marker.args) != 1 or marker.kwargs:
        raise pytest.UsageError(f"{request.node.nodeid}: @pytest.mark.{SNAPSHOT_MARKER} takes one argument, the path "
                                "of a snapshot archive")
    # Relative to the test's own file, so that a test names the archives beside it whatever the working directory.
    return request.path.parent / marker.args[0]


@pytest.fixture
def wis_session(wis_clean):
    """A requests.Session with the token, taking relative paths, on a clean server."""
    with wis_clean.session() as session:
        yield session


@pytest.fixture
def wis_client(wis_clean):
    """A service.client.Client with the token, on a clean server."""
    from service.client import Client

    with Client(wis_clean.url, wis_clean.token) as client:
        yield client


@pytest.fixture
def wis_journal(wis_clean):
    """The requests the server answered during this test (service.testing.RequestJournal)."""
    from service.testing import RequestJournal

    with wis_clean.session() as session:
        yield RequestJournal(session)


@pytest.fixture
def wis_events(wis_clean):
    """The org's change events committed during this test (service.testing.ChangeLog)."""
    from service.testing import ChangeLog

    with wis_clean.session() as session:
        yield ChangeLog(session)


@pytest.fixture
def wis_webhook_receiver():
    """A WebhookReceiver on 127.0.0.1 for this test (the test server sends webhooks there: http to 127.0.0.1 is
    allowed in test mode); its signatures are checked with the `standardwebhooks` package, which must be installed."""
    try:
        import standardwebhooks  # noqa: F401
    except ImportError:
        pytest.fail("wis_webhook_receiver verifies signatures with the standardwebhooks package: pip install "
                    "standardwebhooks", pytrace=False)
    from service.testing.webhook_receiver import WebhookReceiver

    with WebhookReceiver() as receiver:
        yield receiver


@pytest.fixture
def wis_fault(wis_session):
    """A function that injects a fault into the next matching requests and returns it as stored."""

    def inject(**fault):
        response = wis_session.post("/_test/faults", json=fault, timeout=10)
        response.raise_for_status()
        return response.json()

    return inject


@pytest.fixture
def wis_snapshot(wis_clean, request):
    """The orgs of the snapshot the test's `wis_snapshot` marker names, with their counts, restored before the test:
    `{"default": {"stations": 2, "processes": 100, "products": 1, "media": 40}}`."""
    if RESTORED not in request.node.stash:
        raise pytest.UsageError(f"{request.node.nodeid}: the wis_snapshot fixture needs a snapshot to start from: "
                                f'@pytest.mark.{SNAPSHOT_MARKER}("<archive>.tar.gz")')
    return request.node.stash[RESTORED]
