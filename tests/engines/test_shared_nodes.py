"""CONTRACT 8 across nodes: two real gunicorn instances with separate, empty data directories on one PostgreSQL
database and one bucket prefix. The chunks of one stream meet on both and it completes exactly once; concurrent
upserts of one id on both lose nothing and count each write once; media uploaded on one are served by the other; a
node killed with SIGKILL mid-request loses nothing it acknowledged and its streams and tus uploads resume through the
other; nodes restarted on new empty data directories find everything."""
import concurrent.futures
import random
import socket
import threading
import time
from collections import Counter

import pytest
import requests

from service.interface import MB, TUS_COMMIT_PART_BYTES
from support.media import mp4, png, sha256
from support.servers import SHIPPED_WORKER_CLASS
from support.over_http import (
    TUS_BODY_TYPE, TUS_HEADERS, create_stream_over_http, send_chunk_over_http, tus_create, tus_offset, tus_patch,
)
from support.tokens import HEADERS

GRAPH = "/graph/v2"
STATION_CREATE = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"
PROCESS_CREATE = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"
PRODUCT_CREATE = "mutation($input: ProductCreateInput!) { productCreate(input: $input) }"
# Threads per worker: requests of one node meet in one process as well as across its two workers.
THREADED = ("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4")


def start_nodes(start, tmp_path, shared_backend, settings, name):
    """Two nodes on `settings` (one database, one bucket prefix), each with a new empty data directory, started by a
    start_gunicorn fixture (which stops them)."""
    return [start(tmp_path / f"{name}-node{number}", workers=2, extra_args=THREADED, backend=shared_backend,
                  settings=settings) for number in (1, 2)]


@pytest.fixture(scope="module")
def nodes(tmp_path_factory, shared_backend, start_module_gunicorn):
    return start_nodes(start_module_gunicorn, tmp_path_factory.mktemp("nodes"), shared_backend,
                       shared_backend.settings(), "pair")


@pytest.fixture
def fresh_nodes(tmp_path, shared_backend, start_gunicorn):
    """A pair of its own for one test, on fresh stores; stopped after it (a node the test killed stays dead)."""
    settings = shared_backend.settings()
    return settings, start_nodes(start_gunicorn, tmp_path, shared_backend, settings, "fresh")


# -- requests -------------------------------------------------------------------------------------------------------

def gql(url, query, variables=None, session=requests):
    response = session.post(url + GRAPH, headers=HEADERS, json={"query": query, "variables": variables or {}},
                            timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def upsert(url, kind, identifier, name, session=requests):
    """stationCreate or processCreate; return CREATED or UPDATED (an answer with errors fails the test)."""
    mutation = {"station": STATION_CREATE, "process": PROCESS_CREATE}[kind]
    answer = gql(url, mutation, {"input": {kind: {"id": identifier, "name": name}}}, session)
    assert "errors" not in answer, answer
    return answer["data"][f"{kind}Create"]


def revision(url, kind, identifier):
    answer = gql(url, f"query($id: String!) {{ {kind}(id: $id) {{ revision }} }}", {"id": identifier})
    return answer["data"][kind]["revision"]


def upload_media(url, data, name="photo.png", destination="stepImage"):
    response = requests.post(url + "/uploads", headers=HEADERS, data={"destinationId": destination},
                             files={"file": (name, data)}, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["path"]


def download(url, path, **headers):
    response = requests.get(url + path, headers=dict(HEADERS, **headers), timeout=60)
    assert response.status_code in (200, 206, 304), (response.status_code, response.text[:300])
    return response


def stream_state(url, stream_id):
    response = requests.get(f"{url}/uploads/{stream_id}", headers=HEADERS, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def cut_chunks(data, sizes):
    assert sum(sizes) == len(data)
    chunks, start = [], 0
    for size in sizes:
        chunks.append(data[start:start + size])
        start += size
    return chunks


def start_partial_request(url, method, path, headers, body, sent):
    """Send a request whose body is announced whole but only its first `sent` bytes go out; return the open socket
    (the request stays in flight at the server until the socket closes)."""
    host, port = url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=10)
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    head += [f"{key}: {value}" for key, value in headers.items()]
    connection.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body[:sent])
    return connection


def multipart_chunk(index, total, chunk, boundary="partial-chunk"):
    """A chunk PATCH body (fields first, as clients send them) and its Content-Type."""
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"chunkIndex\"\r\n\r\n{index}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"totalChunks\"\r\n\r\n{total}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"blob\"\r\n\r\n").encode()
    body += chunk + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


# -- 1. one stream, chunks on both nodes ------------------------------------------------------------------------------

def test_chunks_of_one_stream_on_both_nodes_complete_it_exactly_once(nodes):
    data = mp4(23 * MB, seed=1)
    chunks = cut_chunks(data, [5 * MB, 5 * MB, 3 * MB, 5 * MB, 2 * MB, 3 * MB])
    stream_id = create_stream_over_http(nodes[0].url, data)
    order = list(range(len(chunks)))
    random.Random(7).shuffle(order)

    def send(position, index):
        node = nodes[position % 2]  # alternately to each node, in shuffled order
        return index, send_chunk_over_http(node.url, stream_id, index, len(chunks), chunks[index])

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda args: send(*args), enumerate(order)))

    completions = [body for _index, (status, body) in answers if status == 201]
    assert len(completions) == 1, answers
    path = completions[0]["path"]
    for index, (status, body) in answers:
        assert (status, body) in ((201, {"path": path}), (200, {"streamId": stream_id, "chunkIndex": index}))

    # A retry after completion, on either node, answers 201 with the same path.
    for node in nodes:
        assert send_chunk_over_http(node.url, stream_id, 2, len(chunks), chunks[2]) == (201, {"path": path})
    for node in nodes:
        assert sha256(download(node.url, path).content) == sha256(data)
        state = stream_state(node.url, stream_id)
        assert (state["state"], state["path"], state["receivedBytes"]) == ("complete", path, len(data))


# -- 2. concurrent upserts on both nodes ------------------------------------------------------------------------------

def test_concurrent_upserts_on_both_nodes_lose_nothing_and_count_each_write_once(nodes):
    ids = ["shared_a", "Shared_B", "shared_c"]
    acknowledged = Counter()
    created = Counter()
    lock = threading.Lock()

    def writer(node, thread):
        with requests.Session() as session:
            for number in range(25):
                kind = ("station", "process")[number % 2]
                identifier = ids[(thread + number) % len(ids)]
                result = upsert(node.url, kind, identifier, f"{node.port}-{thread}-{number}", session)
                assert result in ("CREATED", "UPDATED")
                with lock:
                    acknowledged[kind, identifier] += 1
                    created[kind, identifier] += result == "CREATED"

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(writer, node, thread) for node in nodes for thread in range(4)]:
            future.result()

    assert sum(acknowledged.values()) == 2 * 4 * 25
    for (kind, identifier), count in acknowledged.items():
        assert created[kind, identifier] == 1, (kind, identifier)
        for node in nodes:
            assert revision(node.url, kind, identifier) == count, (kind, identifier)


def test_a_product_created_on_one_node_while_its_process_is_deleted_on_the_other_ends_with_one_refused(nodes):
    """CONTRACT 10's referential rule across nodes: never a product naming a deleted process."""
    outcomes = Counter()
    for round_ in range(12):
        process_id, product_id = f"race_proc_{round_}", f"race_prod_{round_}"
        upsert(nodes[0].url, "process", process_id, "raced")
        barrier = threading.Barrier(2)
        deleting, creating = nodes[round_ % 2], nodes[1 - round_ % 2]

        def delete():
            barrier.wait(timeout=30)
            return gql(deleting.url, "mutation($id: String!) { processDelete(id: $id) }", {"id": process_id})

        def create():
            barrier.wait(timeout=30)
            return gql(creating.url, PRODUCT_CREATE, {"input": {"product": {
                "id": product_id, "name": "P", "finalProcessId": process_id, "dependencies": []}}})

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            deleted, created = (future.result() for future in [pool.submit(delete), pool.submit(create)])
        product = gql(nodes[0].url, "query($id: String!) { product(id: $id) { id } }", {"id": product_id})
        process = gql(nodes[1].url, "query($id: String!) { process(id: $id) { id } }", {"id": process_id})
        if "errors" in deleted:
            assert deleted["errors"][0]["extensions"] == {"code": "CONFLICT", "products": [product_id]}
            assert created["data"] == {"productCreate": "CREATED"}
            assert product["data"]["product"] and process["data"]["process"]
            outcomes["product first"] += 1
        else:
            assert created["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
            assert product["data"]["product"] is None and process["data"]["process"] is None
            outcomes["delete first"] += 1
    assert sum(outcomes.values()) == 12


# -- 3. media across nodes --------------------------------------------------------------------------------------------

def test_media_uploaded_on_one_node_are_served_by_the_other(nodes):
    data = png(3 * MB, seed=3)
    path = upload_media(nodes[0].url, data)
    whole = download(nodes[1].url, path)
    assert whole.status_code == 200 and whole.content == data
    assert whole.headers["X-Content-Type-Options"] == "nosniff"
    ranged = download(nodes[1].url, path, Range="bytes=1000-1999")
    assert ranged.status_code == 206 and ranged.content == data[1000:2000]
    assert ranged.headers["Content-Range"] == f"bytes 1000-1999/{len(data)}"
    # The same validator on both nodes: a client's cached copy stays good whichever node answers.
    etag = download(nodes[0].url, path).headers["ETag"]
    assert whole.headers["ETag"] == etag
    assert download(nodes[1].url, path, **{"If-None-Match": etag}).status_code == 304


# -- 4. a node killed mid-request -------------------------------------------------------------------------------------

def test_a_node_killed_mid_request_loses_nothing_acknowledged_and_its_uploads_resume_on_the_other(fresh_nodes):
    _settings, (doomed, survivor) = fresh_nodes
    stop = threading.Event()
    lock = threading.Lock()
    acknowledged = Counter()
    writers_per_id = Counter()
    media = {}

    def upserter(thread):
        identifier = f"station_{thread % 2}"
        with lock:
            writers_per_id[identifier] += 1
        with requests.Session() as session:
            number = 0
            while not stop.is_set():
                try:
                    result = upsert(doomed.url, "station", identifier, f"{thread}-{number}", session)
                except requests.RequestException:
                    return  # the node is gone: this write was never acknowledged
                assert result in ("CREATED", "UPDATED")
                with lock:
                    acknowledged[identifier] += 1
                number += 1

    def uploader():
        number = 0
        while not stop.is_set():
            data = png(256 * 1024, seed=100 + number)
            try:
                response = requests.post(doomed.url + "/uploads", headers=HEADERS, timeout=30,
                                         data={"destinationId": "stepImage"}, files={"file": ("p.png", data)})
            except requests.RequestException:
                return
            assert response.status_code == 201, response.text
            media[response.json()["path"]] = sha256(data)
            number += 1

    # A chunked stream: chunks 0 and 2 acknowledged by the doomed node, chunk 1 half sent when it dies.
    video = mp4(12 * MB, seed=4)
    chunks = cut_chunks(video, [4 * MB, 4 * MB, 4 * MB])
    stream_id = create_stream_over_http(doomed.url, video)
    for index in (0, 2):
        assert send_chunk_over_http(doomed.url, stream_id, index, 3, chunks[index])[0] == 200
    body, content_type = multipart_chunk(1, 3, chunks[1])
    cut_chunk = start_partial_request(doomed.url, "PATCH", f"/uploads/{stream_id}",
                                      dict(HEADERS, **{"Content-Type": content_type}), body, 2 * MB)

    # A tus upload: 4 MB acknowledged, then a PATCH of the rest half sent when the node dies.
    clip = mp4(12 * MB, seed=5)
    tus_id = tus_create(doomed.url, clip, "tus.mp4")
    assert tus_patch(doomed.url, tus_id, 0, clip[:4 * MB]).status_code == 204
    cut_tus = start_partial_request(doomed.url, "PATCH", f"/uploads/{tus_id}", dict(TUS_HEADERS, **{
        "Upload-Offset": str(4 * MB), "Content-Type": TUS_BODY_TYPE}), clip[4 * MB:], 3 * MB)

    failures = []

    def recording(target, *args):
        def run():
            try:
                target(*args)
            except BaseException as error:  # an assertion in a thread must fail the test, not only be printed
                failures.append(error)
        return threading.Thread(target=run)

    threads = [recording(upserter, thread) for thread in range(4)] + [recording(uploader)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 20
        while (sum(acknowledged.values()) < 20 or len(media) < 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        doomed.kill()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        cut_chunk.close()
        cut_tus.close()
    assert not any(thread.is_alive() for thread in threads)
    assert not failures, failures
    assert sum(acknowledged.values()) >= 20 and len(media) >= 3, (acknowledged, media)

    # Every acknowledged write is there; at most the one write in flight per thread was done without an answer.
    for identifier, count in acknowledged.items():
        assert count <= revision(survivor.url, "station", identifier) <= count + writers_per_id[identifier]
    for path, digest in media.items():
        assert sha256(download(survivor.url, path).content) == digest

    # The stream resumes on the survivor from what it says it holds.
    state = stream_state(survivor.url, stream_id)
    # Half a chunk is never held.
    assert (state["state"], state["receivedChunks"]) == ("open", [0, 2])
    status, body = send_chunk_over_http(survivor.url, stream_id, 1, 3, chunks[1])
    assert status == 201, body
    assert sha256(download(survivor.url, body["path"]).content) == sha256(video)

    # So does the tus upload, from the offset HEAD gives.
    offset = tus_offset(survivor.url, tus_id)
    assert 4 * MB <= offset <= 7 * MB  # what was acknowledged, at most what was sent
    finished = tus_patch(survivor.url, tus_id, offset, clip[offset:])
    assert finished.status_code == 204, finished.text
    assert sha256(download(survivor.url, finished.headers["Media-Path"]).content) == sha256(clip)


# -- 5. new nodes, new empty data directories -------------------------------------------------------------------------

def test_nodes_restarted_on_new_empty_data_directories_find_everything(tmp_path, shared_backend, fresh_nodes,
                                                                      start_gunicorn):
    settings, (first, second) = fresh_nodes
    assert upsert(first.url, "process", "line_1", "Line 1") == "CREATED"
    assert upsert(second.url, "process", "final", "Final") == "CREATED"
    product = {"id": "gearbox", "name": "Gearbox", "finalProcessId": "final",
               "dependencies": [{"processId": "final", "upstreamProcessId": "line_1"}]}
    assert gql(first.url, PRODUCT_CREATE, {"input": {"product": product}}) == {"data": {"productCreate": "CREATED"}}
    assert upsert(second.url, "station", "st_1", "Station 1") == "CREATED"
    image = png(MB, seed=6)
    image_path = upload_media(first.url, image)
    video = mp4(9 * MB, seed=7)
    chunks = cut_chunks(video, [3 * MB, 3 * MB, 3 * MB])
    stream_id = create_stream_over_http(second.url, video)
    assert send_chunk_over_http(first.url, stream_id, 0, 3, chunks[0])[0] == 200
    assert send_chunk_over_http(second.url, stream_id, 2, 3, chunks[2])[0] == 200
    for node in (first, second):
        node.stop()

    new_nodes = start_nodes(start_gunicorn, tmp_path, shared_backend, settings, "new")
    for node in new_nodes:
        everything = gql(node.url, """{ processes { id name revision } products { id finalProcessId revision }
                                        stations { id name revision } }""")
        assert everything == {"data": {
            "processes": [{"id": "final", "name": "Final", "revision": 1},
                          {"id": "line_1", "name": "Line 1", "revision": 1}],
            "products": [{"id": "gearbox", "finalProcessId": "final", "revision": 1}],
            "stations": [{"id": "st_1", "name": "Station 1", "revision": 1}]}}
        assert download(node.url, image_path).content == image
        state = stream_state(node.url, stream_id)
        assert (state["state"], state["receivedChunks"], state["totalChunks"]) == ("open", [0, 2], 3)
    status, body = send_chunk_over_http(new_nodes[1].url, stream_id, 1, 3, chunks[1])
    assert status == 201, body
    for node in new_nodes:
        assert sha256(download(node.url, body["path"]).content) == sha256(video)


# -- 6. a whole file in one tus PATCH, its node killed mid-way ----------------------------------------------------

def test_a_node_killed_mid_whole_file_tus_patch_keeps_the_parts_it_committed(tmp_path, shared_backend, fresh_nodes,
                                                                            start_gunicorn):
    """CONTRACT 13: tus-js-client and Uppy send a whole file in one PATCH; its node commits it in parts of 16 MiB as it
    arrives, so after a kill -9 the other node's HEAD gives the last committed part, the upload resumes from there
    and completes with the right SHA-256; the dead node's spooled remainder goes when it starts again."""
    settings, (doomed, survivor) = fresh_nodes
    clip = mp4(48 * MB, seed=8)
    tus_id = tus_create(doomed.url, clip, "whole.mp4")
    # 20 MiB of the 48 go out, then the client waits: the first 16 MiB are a committed part, 4 MiB are in the spool.
    cut = start_partial_request(doomed.url, "PATCH", f"/uploads/{tus_id}", dict(TUS_HEADERS, **{
        "Upload-Offset": "0", "Content-Type": TUS_BODY_TYPE}), clip, 20 * MB)
    try:
        deadline = time.monotonic() + 60
        while tus_offset(survivor.url, tus_id) == 0:
            assert time.monotonic() < deadline, "no part of the PATCH was committed"
            time.sleep(0.2)
        doomed.kill()
    finally:
        cut.close()
    spool = doomed.data_dir / "spool"
    assert [leftover.name[:4] for leftover in spool.iterdir()] == ["tus-"]

    offset = tus_offset(survivor.url, tus_id)
    assert offset == TUS_COMMIT_PART_BYTES
    finished = tus_patch(survivor.url, tus_id, offset, clip[offset:])
    assert finished.status_code == 204, finished.text
    assert sha256(download(survivor.url, finished.headers["Media-Path"]).content) == sha256(clip)

    start_gunicorn(doomed.data_dir, workers=1, backend=shared_backend, settings=settings)
    assert list(spool.iterdir()) == []
