"""The test double the webhook tests of this folder deliver from: one per module and backend, its webhooks timing out
after the module's WEBHOOK_TIMEOUT_SECONDS and retried after 60 s (no retry comes within a test); a clean state and a
Client for each test."""
import pytest

from service.client import Client
from service.testing import ThreadedServer
from support.tokens import TOKEN, TOKENS


@pytest.fixture(scope="module")
def server(backend, tmp_path_factory, request):
    config = {**backend.settings(), "API_TOKENS": TOKENS,
              "WEBHOOK_TIMEOUT_SECONDS": request.module.WEBHOOK_TIMEOUT_SECONDS, "WEBHOOK_RETRY_SECONDS": "60,60"}
    with ThreadedServer(token=TOKEN, data_dir=tmp_path_factory.mktemp("data"), config=config) as server:
        yield server


@pytest.fixture
def client(server):
    server.reset()
    with Client(server.url, TOKEN, backoff=0) as client:
        yield client
