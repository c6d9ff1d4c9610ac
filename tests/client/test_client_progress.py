"""Upload progress: bytes counted as they are sent, a failed attempt's taken back, a resume starting at the server's."""
import json
import threading

import pytest
import requests

from service.client import MB, Client
from support.client import Interrupted, interrupt_after
from support.media import write_mp4, write_png
from support.tokens import TOKEN


pytestmark = pytest.mark.file_backend_only("the client's own behaviour (requests, retries, progress, resuming); the server's answers are tested on both backends")


def test_single_upload_progress_comes_in_pieces_while_the_body_is_sent(api, tmp_path):
    image = write_png(tmp_path / "photo.png", 3 * MB)
    increments = []

    api.upload(image, "stepImage", progress=increments.append, state_dir=tmp_path / "state")

    assert sum(increments) == 3 * MB
    assert len(increments) > 1 and max(increments) < 3 * MB


def test_chunk_progress_comes_in_pieces_smaller_than_a_chunk(api, tmp_path):
    video = write_mp4(tmp_path / "clip.mp4", 12 * MB + 5)
    increments = []

    api.upload(video, "stepVideo", chunk_size=4 * MB, parallel=2, progress=increments.append,
               state_dir=tmp_path / "state")

    assert sum(increments) == 12 * MB + 5
    assert all(0 < n < 4 * MB for n in increments)


def test_progress_runs_in_the_calling_thread(api, tmp_path):
    video = write_mp4(tmp_path / "clip.mp4", 11 * MB)
    threads = set()

    api.upload(video, "stepVideo", chunk_size=2 * MB, progress=lambda n: threads.add(threading.get_ident()),
               state_dir=tmp_path / "state")

    assert threads == {threading.get_ident()}


def test_a_resumed_upload_starts_from_what_the_server_holds(api, tmp_path):
    video = write_mp4(tmp_path / "long.mp4", 12 * MB + 7)
    state_dir = tmp_path / "state"
    with pytest.raises(Interrupted):
        api.upload(video, "stepVideo", chunk_size=MB, parallel=2, progress=interrupt_after(4), state_dir=state_dir)
    [state_file] = state_dir.iterdir()
    held = api.stream_status(json.loads(state_file.read_text())["streamId"])["receivedBytes"]
    assert 4 * MB <= held < 12 * MB
    events = []

    api.upload(video, "stepVideo", chunk_size=MB, state_dir=state_dir,
               resumed=lambda n: events.append(("resumed", n)), progress=lambda n: events.append(("sent", n)))

    assert events[0] == ("resumed", held)
    assert [kind for kind, _ in events[1:]] == ["sent"] * (len(events) - 1)
    assert sum(n for _, n in events[1:]) == 12 * MB + 7 - held


def test_without_a_resumed_callback_progress_gets_the_held_bytes_first(api, tmp_path):
    video = write_mp4(tmp_path / "clip.mp4", 11 * MB)
    state_dir = tmp_path / "state"
    with pytest.raises(Interrupted):
        api.upload(video, "stepVideo", chunk_size=MB, parallel=1, progress=interrupt_after(3), state_dir=state_dir)
    increments = []

    api.upload(video, "stepVideo", chunk_size=MB, state_dir=state_dir, progress=increments.append)

    assert increments[0] >= 3 * MB and increments[0] % MB == 0  # whole chunks the server holds
    assert sum(increments) == 11 * MB


def test_a_failed_chunk_is_not_counted_twice(wis_clean, wis_fault, tmp_path):
    video = write_mp4(tmp_path / "clip.mp4", 11 * MB)
    wis_fault(method="PATCH", path="^/uploads/", status=503, times=2)
    running, highest = [0], [0]

    def progress(n):
        running[0] += n
        highest[0] = max(highest[0], running[0])

    with Client(wis_clean.url, wis_clean.token, backoff=0) as client:
        client.upload(video, "stepVideo", chunk_size=2 * MB, parallel=2, progress=progress,
                      state_dir=tmp_path / "state")

    assert running[0] == 11 * MB
    assert highest[0] <= 11 * MB


def test_each_upload_thread_has_its_own_session(server, tmp_path):
    used = {}  # session -> threads that sent with it
    lock = threading.Lock()

    class RecordingSession(requests.Session):
        def request(self, method, url, *args, **kwargs):
            with lock:
                used.setdefault(self, set()).add((threading.get_ident(), method))
            return super().request(method, url, *args, **kwargs)

    client = Client(server.url, TOKEN, backoff=0, session_factory=RecordingSession)
    video = write_mp4(tmp_path / "clip.mp4", 16 * MB)

    client.upload(video, "stepVideo", chunk_size=MB, parallel=4, state_dir=tmp_path / "state")

    chunk_sessions = [session for session, uses in used.items() if ("PATCH" in {m for _, m in uses})]
    assert len(chunk_sessions) == 4  # distinct objects, one per thread
    assert client.session not in chunk_sessions
    for session in chunk_sessions:
        assert len({thread for thread, _ in used[session]}) == 1
    assert len({next(iter(used[session]))[0] for session in chunk_sessions}) == 4
    assert {thread for thread, _ in used[client.session]} == {threading.get_ident()}
