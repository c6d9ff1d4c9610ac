"""pytest fixtures for integrators, installed as a `pytest11` entry point: a live service and a clean state.

- `wis_token`: the API token the server accepts (org `default`), session scoped.
- `wis_server`: a ThreadedServer (service.testing) on a free 127.0.0.1 port, test mode on, with a
  temporary data directory; one per test session.
- `wis_clean`: empties the server (documents, media, streams, faults) before the test.
- `wis_client`: a service.client.Client for the server, on a clean server.
- `wis_session`: a requests.Session taking relative paths (`wis_session.get("/_test/objects")`), on a clean server.
- `wis_fault`: `wis_fault(method="PATCH", path="^/uploads/", status=503)` injects a fault (see /_test/faults).

Nothing here starts unless a test asks for one of these fixtures.
"""
import pytest

DEFAULT_TOKEN = "wis-test-token-0123456789"


@pytest.fixture(scope="session")
def wis_token():
    """The API token of the test server's `default` org."""
    return DEFAULT_TOKEN


@pytest.fixture(scope="session")
def wis_server(wis_token, tmp_path_factory):
    """The service, started once per test session."""
    from service.testing import ThreadedServer

    with ThreadedServer(token=wis_token, data_dir=tmp_path_factory.mktemp("wis-data")) as server:
        yield server


@pytest.fixture
def wis_clean(wis_server):
    """A server holding nothing: reset before the test, so a failed test leaves its state to inspect."""
    wis_server.reset()
    return wis_server


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
def wis_fault(wis_session):
    """A function that injects a fault into the next matching requests and returns it as stored."""

    def inject(**fault):
        response = wis_session.post("/_test/faults", json=fault, timeout=10)
        response.raise_for_status()
        return response.json()

    return inject
