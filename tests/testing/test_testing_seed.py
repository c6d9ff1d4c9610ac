"""Reproducible names (WIS_TEST_SEED, CONTRACT 12): the same requests get the same stream ids and media paths on every
run, counted from a fresh state or the last reset, whichever worker (and on the shared backend, node) answers."""
import hashlib
import itertools
import re
import threading
import types

import pytest
import requests

from service import create_app
from service.config import load_config
from service.errors import ConfigurationError
from service.storage.testmode.fresh_names import SeededHex
from support.media import MP4, SMALL_PNG
from support.over_http import TUS_HEADERS, tus_metadata
from support.servers import SHIPPED_WORKER_CLASS
from support.tokens import HEADERS, TOKENS
from service.testing import ThreadedServer

SEED = 42
VIDEO = MP4 + bytes(500)


def names_made_by(url, headers=HEADERS, salt=b""):
    """A fixed series of requests, each on a new connection; the names the server made up for them, in order. Media
    the server already holds are answered with their path (deduplication), so a series meant to make new names sends
    other bytes (`salt`)."""
    image = requests.post(url + "/uploads", headers=headers, files={"file": ("gear box.png", SMALL_PNG + salt)},
                          data={"destinationId": "stepImage"}, timeout=30).json()["path"]
    video_bytes = VIDEO + salt
    stream_id = requests.post(url + "/uploads", headers=headers, timeout=30, json={
        "destinationId": "stepVideo", "fileName": "clip.mp4", "fileSize": len(video_bytes),
        "sha": hashlib.sha256(video_bytes).hexdigest()}).json()["streamId"]
    video = requests.patch(f"{url}/uploads/{stream_id}", headers=headers, data={"chunkIndex": 0, "totalChunks": 1},
                           files={"file": ("blob", video_bytes)}, timeout=30).json()["path"]
    tus = requests.post(url + "/uploads", data=video_bytes, timeout=30, headers={
        **TUS_HEADERS, **headers, "Upload-Length": str(len(video_bytes)),
        "Content-Type": "application/offset+octet-stream",
        "Upload-Metadata": tus_metadata(destinationId="stepVideo", filename="tus.mp4")})
    return [image, stream_id, video, tus.headers["Location"].rsplit("/", 1)[1], tus.headers["Media-Path"]]


def threaded_names(seed, data_dir=None, salt=b""):
    with ThreadedServer(token=HEADERS["x-service-api-org"], seed=seed, data_dir=data_dir) as server:
        return names_made_by(server.url, salt=salt)


def test_the_same_seed_gives_the_same_names_on_every_run():
    first = threaded_names(SEED)
    assert threaded_names(SEED) == first
    image, stream_id, video, tus_id, tus_video = first
    # The names keep their shape: 16 hex digits of prefix, 32 of stream id.
    assert re.fullmatch(r"/api/v1/images/[0-9a-f]{16}-gear_box\.png", image)
    assert re.fullmatch(r"/api/v1/videos/[0-9a-f]{16}-clip\.mp4", video)
    assert re.fullmatch(r"/api/v1/videos/[0-9a-f]{16}-tus\.mp4", tus_video)
    assert re.fullmatch(r"[0-9a-f]{32}", stream_id) and re.fullmatch(r"[0-9a-f]{32}", tus_id)


def test_another_seed_or_none_gives_other_names():
    seeded = set(threaded_names(SEED))
    assert not seeded & set(threaded_names(SEED + 1))
    assert not seeded & set(threaded_names(None))
    assert threaded_names(None) != threaded_names(None)


def test_a_reset_counts_the_names_from_the_start_again(tmp_path):
    with ThreadedServer(token=HEADERS["x-service-api-org"], seed=SEED) as server:
        first = names_made_by(server.url)
        assert names_made_by(server.url) != first  # the count goes on
        server.reset()
        assert names_made_by(server.url) == first


def test_a_server_restarted_on_its_state_goes_on_counting(tmp_path):
    """Names count from a fresh state: a restart on the same data must not make the names its data already holds."""
    first = threaded_names(SEED, tmp_path / "data")
    again = threaded_names(SEED, tmp_path / "data", salt=b"again")
    assert not set(first) & set(again)


@pytest.fixture
def seeded_server(tmp_path, backend, start_gunicorn):
    return start_gunicorn(tmp_path / "data", workers=2, backend=backend,
                          env={"WIS_TEST_MODE": "1", "WIS_TEST_SEED": str(SEED)},
                          extra_args=("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4"))


def test_the_names_are_the_same_whichever_worker_or_backend_answers(seeded_server):
    expected = threaded_names(SEED)  # one process, file backend
    assert names_made_by(seeded_server.url) == expected
    requests.post(seeded_server.url + "/_test/reset", headers=HEADERS, timeout=30).raise_for_status()
    assert names_made_by(seeded_server.url) == expected


def test_concurrent_uploads_on_both_workers_share_one_count(seeded_server):
    url = seeded_server.url
    paths = []

    def upload_five(thread):
        for number in range(5):
            # Bytes of their own: the same bytes would be answered with the first one's path (deduplication).
            data = SMALL_PNG + bytes([thread, number])
            response = requests.post(url + "/uploads", headers=HEADERS, files={"file": ("a.png", data)},
                                     data={"destinationId": "stepImage"}, timeout=30)
            paths.append(response.json()["path"])

    threads = [threading.Thread(target=upload_five, args=(thread,)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Each single upload makes one name: the 20 uploads got the first 20 names of the seed, each once.
    first_twenty = SeededHex(SEED, types.SimpleNamespace(next=itertools.count(1).__next__))
    assert sorted(path[15:31] for path in paths) == sorted(first_twenty(8) for _ in range(20))


def test_a_seed_is_for_test_mode_only(tmp_path):
    with pytest.raises(ConfigurationError, match="WIS_TEST_SEED is for test mode only"):
        create_app({"DATA_DIR": str(tmp_path), "API_TOKENS": TOKENS, "TEST_SEED": 1})


@pytest.mark.parametrize("value", ["abc", "1.5", "0x10"])
def test_a_seed_that_is_not_an_integer_stops_start_up_naming_the_variable(value):
    with pytest.raises(ConfigurationError, match=f"invalid value for WIS_TEST_SEED: '{value}'"):
        load_config(environ={"WIS_TEST_MODE": "1", "WIS_TEST_SEED": value, "WIS_API_TOKENS": TOKENS})
