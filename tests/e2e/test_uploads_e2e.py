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


def multipart_chunk(boundary, fields, data):
    """A chunk's multipart body, framed by `boundary`: the fields in order, then the file part."""
    head = b"".join(b'--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (boundary, name, value)
                    for name, value in fields)
    head += b'--%s\r\nContent-Disposition: form-data; name="file"; filename="c"\r\n\r\n' % boundary
    return head + data + b"\r\n--%s--\r\n" % boundary


def test_chunks_of_megabytes_full_of_near_boundaries_are_stored_byte_for_byte(server):
    """5 MB chunks are received in 1 MB blocks, those inside the file's data decoded in place: data strewn with line
    breaks and beginnings of the boundary, wherever the blocks fall, is stored as it was sent."""
    boundary = b"near-boundary-4e1f"
    generator = random.Random(5)
    data = bytearray(mp4(12 * MB + 777, seed=7))
    near = [b"\r", b"\n", b"\r\n--", b"\r\n--" + boundary[:-1], b"\n--" + boundary[:5], b"--" + boundary[:-1] + b"\r"]
    for _ in range(20_000):
        piece, at = generator.choice(near), generator.randrange(4096, len(data) - 64)
        data[at:at + len(piece)] = piece
    data, chunk_size = bytes(data), 5 * MB
    chunks = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)]
    stream_id = create_stream_over_http(server.url, data)
    for index, chunk in enumerate(chunks):
        fields = [(b"chunkIndex", b"%d" % index), (b"totalChunks", b"%d" % len(chunks)),
                  (b"sha", hashlib.sha256(chunk).hexdigest().encode())]
        content_type = "multipart/form-data; boundary=" + boundary.decode()
        response = requests.patch(f"{server.url}/uploads/{stream_id}", data=multipart_chunk(boundary, fields, chunk),
                                  headers={**HEADERS, "Content-Type": content_type}, timeout=60)
        assert response.status_code == (201 if index == len(chunks) - 1 else 200), response.text
    assert download_sha(server.url, response.json()["path"]) == hashlib.sha256(data).hexdigest()


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
