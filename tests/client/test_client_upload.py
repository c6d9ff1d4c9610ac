"""service.client uploads against real gunicorn: single and chunked uploads, resume, retries, errors."""
import json
import threading
import tracemalloc

import pytest
import requests
from requests.adapters import HTTPAdapter

from service.client import MB, Client, ClientError, ServerUnreachable
from support.client import Interrupted, downloaded_sha, interrupt_after, sessions_through
from support.media import sha256_of, write_mp4, write_png
from support.tokens import HEADERS, TOKEN

pytestmark = pytest.mark.file_backend_only("the client's own behaviour (requests, retries, progress, resuming); the server's answers are tested on both backends")


class Counted:
    """The requests of one method that a client sends from now on, from any of its threads."""

    def __init__(self, method):
        self.method = method
        self.sent = []
        self.lock = threading.Lock()

    def hook(self, response, *args, **kwargs):
        if response.request.method == self.method:
            with self.lock:
                self.sent.append(response.request.url)

    def __len__(self):
        return len(self.sent)


@pytest.fixture
def count_requests(monkeypatch):
    """`count_requests(client, method)` counts the requests of one method the client sends from then on, in its
    session and its upload threads'."""

    def count(client, method):
        counted = Counted(method)
        monkeypatch.setitem(client.session.hooks, "response", [*client.session.hooks["response"], counted.hook])
        make = client.transport.session_factory

        def session_factory():
            session = make()
            session.hooks["response"].append(counted.hook)
            return session

        monkeypatch.setattr(client.transport, "session_factory", session_factory)
        return counted

    return count


def test_small_file_is_one_request_and_round_trips(api, tmp_path, count_requests):
    image = write_png(tmp_path / "photo.png", 200_000)
    posts = count_requests(api, "POST")
    patches = count_requests(api, "PATCH")
    acknowledged = []

    path = api.upload(image, "stepImage", progress=acknowledged.append, state_dir=tmp_path / "state")

    assert path.startswith("/api/v1/images/") and path.endswith(".png")
    assert (len(posts), len(patches)) == (1, 0)
    assert sum(acknowledged) == 200_000
    assert downloaded_sha(api, path) == sha256_of(image)


def test_large_file_is_sent_in_parallel_chunks(api, tmp_path, count_requests):
    video = write_mp4(tmp_path / "clip.mp4", 25 * MB + 123)
    state_dir = tmp_path / "state"
    patches = count_requests(api, "PATCH")
    acknowledged = []

    path = api.upload(video, "stepVideo", chunk_size=MB, parallel=4, progress=acknowledged.append,
                      state_dir=state_dir)

    assert path.startswith("/api/v1/videos/") and path.endswith(".mp4")
    assert len(patches) == 26
    assert sum(acknowledged) == 25 * MB + 123
    assert downloaded_sha(api, path) == sha256_of(video)
    assert list(state_dir.iterdir()) == []


def test_interrupted_upload_resumes_with_only_the_missing_chunks(api, server, tmp_path, count_requests):
    video = write_mp4(tmp_path / "long.mp4", 12 * MB)
    state_dir = tmp_path / "state"
    with pytest.raises(Interrupted):
        api.upload(video, "stepVideo", chunk_size=MB, parallel=2, progress=interrupt_after(3), state_dir=state_dir)
    [state_file] = state_dir.iterdir()
    stream_id = json.loads(state_file.read_text())["streamId"]
    received = api.stream_status(stream_id)["receivedChunks"]
    assert 3 <= len(received) < 12

    resumed = Client(server.url, TOKEN, backoff=0)
    patches = count_requests(resumed, "PATCH")
    path = resumed.upload(video, "stepVideo", chunk_size=MB, parallel=4, state_dir=state_dir)

    assert len(patches) == 12 - len(received)
    status = api.stream_status(stream_id)
    assert (status["state"], status["path"]) == ("complete", path)
    assert downloaded_sha(api, path) == sha256_of(video)
    assert list(state_dir.iterdir()) == []


def test_resume_keeps_the_chunk_size_of_the_first_run(api, tmp_path):
    video = write_mp4(tmp_path / "clip.mp4", 11 * MB)
    state_dir = tmp_path / "state"
    with pytest.raises(Interrupted):
        api.upload(video, "stepVideo", chunk_size=MB, parallel=1, progress=interrupt_after(2), state_dir=state_dir)

    # A different --chunk-size on the rerun would change totalChunks, which the server refuses.
    path = api.upload(video, "stepVideo", chunk_size=4 * MB, state_dir=state_dir)

    assert downloaded_sha(api, path) == sha256_of(video)


def test_upload_starts_over_when_the_stream_is_gone(api, server, tmp_path, count_requests):
    video = write_mp4(tmp_path / "clip.mp4", 11 * MB)
    state_dir = tmp_path / "state"
    with pytest.raises(Interrupted):
        api.upload(video, "stepVideo", chunk_size=MB, parallel=1, progress=interrupt_after(2), state_dir=state_dir)
    [state_file] = state_dir.iterdir()
    old_stream = json.loads(state_file.read_text())["streamId"]
    assert requests.delete(f"{server.url}/uploads/{old_stream}", headers=HEADERS).status_code == 204

    patches = count_requests(api, "PATCH")
    path = api.upload(video, "stepVideo", chunk_size=MB, state_dir=state_dir)

    assert len(patches) == 11
    assert downloaded_sha(api, path) == sha256_of(video)


def test_upload_of_a_completed_stream_returns_its_path_without_sending(api, tmp_path, count_requests):
    video = write_mp4(tmp_path / "clip.mp4", 11 * MB)
    state_dir = tmp_path / "state"
    # Stop on the last acknowledgement: the server completed the stream, the client never heard of it.
    with pytest.raises(Interrupted):
        api.upload(video, "stepVideo", chunk_size=MB, parallel=1, progress=interrupt_after(11), state_dir=state_dir)
    [state_file] = state_dir.iterdir()
    status = api.stream_status(json.loads(state_file.read_text())["streamId"])
    assert status["state"] == "complete"

    patches = count_requests(api, "PATCH")
    path = api.upload(video, "stepVideo", chunk_size=MB, state_dir=state_dir)

    assert (path, len(patches)) == (status["path"], 0)


def test_uploads_stream_from_disk_instead_of_holding_files_in_memory(api, tmp_path):
    video = write_mp4(tmp_path / "clip.mp4", 30 * MB)
    image = write_png(tmp_path / "photo.png", 8 * MB)
    tracemalloc.start()
    try:
        api.upload(video, "stepVideo", chunk_size=10 * MB, parallel=2, state_dir=tmp_path / "state")
        chunked_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        api.upload(image, "stepImage", state_dir=tmp_path / "state")
        single_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    # Holding one 10 MB chunk, or the 8 MB image, would exceed these on its own.
    assert chunked_peak < 6 * MB
    assert single_peak < 4 * MB


class FlakyAdapter(HTTPAdapter):
    """Fails every second request with a connection error, as a flaky network or proxy would."""

    def __init__(self, always=False):
        super().__init__()
        self.always = always
        self.calls = 0
        self.lock = threading.Lock()

    def send(self, request, *args, **kwargs):
        with self.lock:
            self.calls += 1
            fail = self.always or self.calls % 2 == 1
        if fail:
            raise requests.ConnectionError("[Errno 104] Connection reset by peer")
        return super().send(request, *args, **kwargs)


def test_connection_errors_are_retried(server, tmp_path):
    video = write_mp4(tmp_path / "clip.mp4", 11 * MB)
    flaky = FlakyAdapter()
    api = Client(server.url, TOKEN, backoff=0, session_factory=sessions_through(flaky))

    path = api.upload(video, "stepVideo", chunk_size=2 * MB, parallel=1, state_dir=tmp_path / "state")

    assert flaky.calls == 2 * 7  # the stream creation and 6 chunks, each failed once, then sent
    assert downloaded_sha(api, path) == sha256_of(video)


def test_retries_are_bounded(server, tmp_path):
    flaky = FlakyAdapter(always=True)
    client = Client(server.url, TOKEN, retries=2, backoff=0, session_factory=sessions_through(flaky))

    with pytest.raises(ClientError) as caught:
        client.upload(write_png(tmp_path / "a.png"), "stepImage", state_dir=tmp_path / "state")

    assert flaky.calls == 3
    assert isinstance(caught.value, ServerUnreachable) and caught.value.status is None
    assert caught.value.message == f"cannot reach {server.url}: Connection reset by peer"


def test_server_errors_raise_client_error_with_status_and_message(api, tmp_path):
    too_big = write_png(tmp_path / "big.png", 8 * MB + 1)

    with pytest.raises(ClientError) as caught:
        api.upload(too_big, "stepImage", state_dir=tmp_path / "state")

    assert caught.value.status == 413
    assert caught.value.message == "file of size 8.1MB is larger than 8MB"


def test_oversized_stream_is_refused_before_any_chunk(api, tmp_path, count_requests):
    too_big = write_png(tmp_path / "huge.png", 11 * MB)
    patches = count_requests(api, "PATCH")

    with pytest.raises(ClientError) as caught:
        api.upload(too_big, "stepImage", state_dir=tmp_path / "state")

    assert (caught.value.status, caught.value.message) == (413, "file of size 11MB is larger than 8MB")
    assert len(patches) == 0


def test_wrong_token_is_401(server, tmp_path):
    client = Client(server.url, "not-a-token", backoff=0)
    with pytest.raises(ClientError) as caught:
        client.upload(write_png(tmp_path / "a.png"), "stepImage", state_dir=tmp_path / "state")
    assert caught.value.status == 401


def test_missing_stream_is_404(api):
    with pytest.raises(ClientError) as caught:
        api.stream_status("no-such-stream")
    assert caught.value.status == 404


def test_unreadable_file_is_an_os_error(api, tmp_path):
    # Nothing reached the service: not a ClientError.
    with pytest.raises(FileNotFoundError) as caught:
        api.upload(tmp_path / "missing.png", "stepImage", state_dir=tmp_path / "state")
    assert caught.value.filename == str(tmp_path / "missing.png")
