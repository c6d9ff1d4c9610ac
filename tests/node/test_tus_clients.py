"""Real tus clients against real gunicorn: tuspy (PyPI) and tus-js-client under Node (npm, installed here into
tests/js by `npm ci`). Each uploads an image and a 30 MB video, one of them interrupted and resumed, and the bytes
fetched back are the bytes sent."""
import hashlib
import json
import os
import subprocess

import pytest
import requests
from tusclient import client as tus_client

from support.servers import JS_DIR
from support.tokens import HEADERS, TOKEN

AUTH = HEADERS
MB = 1024 * 1024


@pytest.fixture(scope="module")
def server(threaded_server):
    return threaded_server


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    """A PNG of 1.5 MB and an MP4 of 30 MB (random bodies behind the magic numbers the service sniffs)."""
    directory = tmp_path_factory.mktemp("tus-media")
    image = directory / "weld spot.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(3 * MB // 2))
    video = directory / "line 3.mp4"
    video.write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(30 * MB - 12))
    return image, video


def fetched(url, path):
    response = requests.get(url + path, headers=AUTH, timeout=60)
    assert response.status_code == 200
    return response.content


def assert_same(url, path, file, kind):
    assert path.startswith(f"/api/v1/{kind}/")
    assert hashlib.sha256(fetched(url, path)).digest() == hashlib.sha256(file.read_bytes()).digest()


def tuspy_client(url):
    return tus_client.TusClient(f"{url}/uploads", headers=dict(AUTH))


def test_tuspy_uploads_an_image_in_one_patch_with_checksums(server, media):
    image, _ = media
    # A stream of ours, not a path: tuspy opens a path for every read and never closes it.
    with open(image, "rb") as stream:
        uploader = tuspy_client(server.url).uploader(file_stream=stream, upload_checksum=True, metadata={
            "destinationId": "stepImage", "filename": image.name})
        uploader.upload()
    path = uploader.request.response_headers["media-path"]
    assert path.endswith("-weld_spot.png")
    assert_same(server.url, path, image, "images")


def test_tuspy_uploads_a_30mb_video_interrupted_and_resumed(server, media):
    _, video = media
    sha = hashlib.sha256(video.read_bytes()).hexdigest()
    fields = {"destinationId": "stepVideo", "filename": video.name, "sha256": sha}
    with open(video, "rb") as stream:
        first = tuspy_client(server.url).uploader(file_stream=stream, chunk_size=4 * MB, metadata=fields)
        first.upload(stop_at=13 * MB)
    assert first.offset == 13 * MB
    # A new process would only know the URL: the resumed uploader asks the server for its offset (HEAD).
    with open(video, "rb") as stream:
        resumed = tuspy_client(server.url).uploader(file_stream=stream, chunk_size=8 * MB, url=first.url)
        assert resumed.offset == 13 * MB
        resumed.upload()
    path = resumed.request.response_headers["media-path"]
    assert path.endswith("-line_3.mp4")
    assert_same(server.url, path, video, "videos")


def run_js(node, server, file, destination, abort_at, chunk_size=None):
    args = [node, str(JS_DIR / "tus_upload.mjs"), f"{server.url}/uploads", TOKEN, str(file), destination,
            str(abort_at)] + ([str(chunk_size)] if chunk_size else [])
    result = subprocess.run(args, cwd=JS_DIR, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_tus_js_client_uploads_a_30mb_video_aborted_mid_request_and_resumed(node, server, media):
    _, video = media
    # The whole file goes in one PATCH (tus-js-client's default chunk size): the abort cuts it mid-body, after 10 MB,
    # the server keeps what arrived, and the resumed upload continues from there.
    outcome = run_js(node, server, video, "stepVideo", 10 * MB)
    assert outcome["resumedFrom"] == 10 * MB
    assert_same(server.url, outcome["path"], video, "videos")


def test_tus_js_client_uploads_an_image_in_chunks_aborted_and_resumed(node, server, media):
    image, _ = media
    outcome = run_js(node, server, image, "stepImage", 600 * 1024, chunk_size=512 * 1024)
    assert outcome["resumedFrom"] >= 512 * 1024
    assert outcome["path"].endswith("-weld_spot.png")
    assert_same(server.url, outcome["path"], image, "images")
