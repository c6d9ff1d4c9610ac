"""What the client sends again after a failure: everything harmless, a mutation only if it never reached the service."""
import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError, NewConnectionError

from service.client import Client, ClientError, OutcomeUnknown, ServerUnreachable
from support.client import sessions_through
from support.media import write_png

pytestmark = pytest.mark.file_backend_only("the client's own behaviour (requests, retries, progress, resuming); the server's answers are tested on both backends")


STATION = {"id": "press_1", "name": "Press"}


@pytest.fixture
def api(wis_clean):
    with Client(wis_clean.url, wis_clean.token, backoff=0) as client:
        yield client


def stored(wis_session):
    return wis_session.get("/_test/objects").json()["orgs"].get("default", {})


def test_a_mutation_whose_answer_was_lost_is_not_sent_again(api, wis_fault):
    wis_fault(method="POST", path="^/graph/v2$", drop=True, times=1)

    with pytest.raises(OutcomeUnknown) as caught:
        api.create_station(STATION)

    assert caught.value.message == (f"no answer from {api.base_url} after the request was sent (Remote end closed "
                                    "connection without response); it may or may not have been applied")
    assert isinstance(caught.value, ServerUnreachable)
    assert api.get_station("press_1")["revision"] == 1  # applied once, not twice


def test_a_mutation_answered_503_is_not_sent_again(api, wis_fault, wis_session):
    wis_fault(method="POST", path="^/graph/v2$", status=503, times=1)

    with pytest.raises(ClientError) as caught:
        api.create_station(STATION)

    assert caught.value.status == 503
    assert api.create_station(STATION) == "CREATED"  # it had not been applied; the fault is used up
    assert stored(wis_session)["documents"] == {"stations": ["press_1"]}


def test_a_query_is_sent_again(api, wis_fault):
    api.create_station(STATION)
    wis_fault(method="POST", path="^/graph/v2$", status=503, times=2)

    assert api.get_station("press_1")["name"] == "Press"


def test_a_lost_single_upload_answer_is_sent_again_and_answered_the_same_path(api, wis_fault, wis_session, tmp_path):
    wis_fault(method="POST", path="^/uploads$", drop=True, times=1)

    path = api.upload(write_png(tmp_path / "a.png"), state_dir=tmp_path / "state")

    # The retry's bytes and name are those the lost answer stored: deduplication (CONTRACT 10) answers that path, so
    # no orphan copy is left for `wis gc`.
    assert stored(wis_session)["media"] == [path]


class RefusingOnce(HTTPAdapter):
    """Fails the first request as a connection that could not be made (nothing was sent), then sends."""

    def __init__(self, reason):
        super().__init__()
        self.reason = reason
        self.calls = 0

    def send(self, request, *args, **kwargs):
        self.calls += 1
        if self.calls == 1:
            raise self.reason(request)
        return super().send(request, *args, **kwargs)


def never_connected(request):
    refused = NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")
    return requests.ConnectionError(MaxRetryError(None, request.url, refused), request=request)


def reset_after_sending(request):
    return requests.ConnectionError("('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))")


def test_a_mutation_that_never_reached_the_service_is_sent_again(wis_clean, wis_session):
    adapter = RefusingOnce(never_connected)
    client = Client(wis_clean.url, wis_clean.token, backoff=0, session_factory=sessions_through(adapter))

    assert client.create_station(STATION) == "CREATED"
    assert adapter.calls == 2
    assert stored(wis_session)["documents"] == {"stations": ["press_1"]}


def test_a_mutation_reset_after_sending_is_not_sent_again(wis_clean):
    adapter = RefusingOnce(reset_after_sending)
    client = Client(wis_clean.url, wis_clean.token, backoff=0, session_factory=sessions_through(adapter))

    with pytest.raises(OutcomeUnknown):
        client.create_station(STATION)
    assert adapter.calls == 1
