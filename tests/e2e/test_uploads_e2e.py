"""Chunked uploads through real gunicorn (2 workers): parallel, out-of-order and duplicate chunks."""
import hashlib
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from service.interface import MB
from support.datadir import media_names_of
from support.media import mp4
from support.over_http import create_stream_over_http, send_chunk_over_http
from support.servers import SHIPPED_WORKER_CLASS
from support.tokens import HEADERS



@pytest.fixture(params=["sync", SHIPPED_WORKER_CLASS], ids=["sync", "threaded"])
def server(request, tmp_path, backend, start_gunicorn):
    """Two workers; with the shipped threaded ones, concurrent requests also share a process (threads contend for the
    same lock)."""
    return start_gunicorn(tmp_path / "data", workers=2, backend=backend,
                          extra_args=("--worker-class", request.param, "--threads", "4"))


def download_sha(url, path):
    digest = hashlib.sha256()
    with requests.get(url + path, headers=HEADERS, stream=True, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "video/mp4"
        for block in response.iter_content(MB):
            digest.update(block)
    return digest.hexdigest()


def test_parallel_out_of_order_chunks_complete_exactly_once(server):
    data = mp4(30 * MB + 12345, seed=1)
    chunk_size = MB
    chunks = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)]
    order = list(range(len(chunks)))
    random.Random(2).shuffle(order)
    stream_id = create_stream_over_http(server.url, data)
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda i: send_chunk_over_http(server.url, stream_id, i, len(chunks), chunks[i],
                                                               with_sha=True),
                                order))
    completions = [body for status, body in results if status == 201]
    assert len(completions) == 1
    acknowledged = [body["chunkIndex"] for status, body in results if status == 200]
    assert len(set(acknowledged)) == len(acknowledged) == len(chunks) - 1
    path = completions[0]["path"]
    assert download_sha(server.url, path) == hashlib.sha256(data).hexdigest()
    assert media_names_of(server) == [path.rsplit("/", 1)[1]]


def test_the_same_last_chunks_sent_at_once_complete_the_stream_once(server):
    data = mp4(6 * MB, seed=3)
    chunks = [data[i:i + MB] for i in range(0, len(data), MB)]
    total = len(chunks)
    stream_id = create_stream_over_http(server.url, data)
    for index in range(total - 2):
        assert send_chunk_over_http(server.url, stream_id, index, total, chunks[index], with_sha=True)[0] == 200
    senders = 8
    barrier = threading.Barrier(senders)

    def send_last(sender):
        barrier.wait(timeout=30)
        index = total - 1 - sender % 2
        return send_chunk_over_http(server.url, stream_id, index, total, chunks[index], with_sha=True)

    with ThreadPoolExecutor(max_workers=senders) as pool:
        results = list(pool.map(send_last, range(senders)))
    assert {status for status, _ in results} <= {200, 201}
    paths = {body["path"] for status, body in results if status == 201}
    assert len(paths) == 1
    path = paths.pop()
    assert download_sha(server.url, path) == hashlib.sha256(data).hexdigest()
    assert media_names_of(server) == [path.rsplit("/", 1)[1]]
    status = requests.get(f"{server.url}/uploads/{stream_id}", headers=HEADERS, timeout=30).json()
    assert (status["state"], status["path"]) == ("complete", path)


@pytest.mark.parametrize("size, message", [
    (10_695_475, "file of size 10.2MB is larger than 8MB"),
    (40 * MB, None),  # over the read limit: refused before it is read, still an answer the client can show
])
def test_an_oversized_single_upload_is_answered_413_on_gunicorn(server, size, message):
    image = b"\x89PNG\r\n\x1a\n" + bytes(size - 8)
    response = requests.post(f"{server.url}/uploads", headers=HEADERS, timeout=60, data={"destinationId": "stepImage"},
                             files={"file": ("big.png", image)})
    assert response.status_code == 413
    assert response.json()["error"] == message or (message is None and "larger than 10MB" in response.json()["error"])
