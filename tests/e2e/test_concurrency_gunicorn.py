"""Concurrency through gunicorn as shipped (its config: threaded workers, 2 of them): many clients on the same ids and streams.

No acknowledged update is lost (the final revision counts every acknowledged write) and a stream whose chunks are
sent at once, each several times, by many threads completes exactly once.
"""
import json
import random
import threading
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from support.datadir import media_files
from support.media import mp4, sha256
from support.metrics import metric_value
from support.over_http import create_stream_over_http, read_process_over_http, send_chunk_over_http, upsert_over_http
from support.servers import shipped_server
from support.tokens import HEADERS



@pytest.fixture
def server(tmp_path, start_gunicorn):
    return shipped_server(start_gunicorn, tmp_path, tmp_path / "data")


def completed_streams(url):
    return metric_value(requests.get(f"{url}/metrics", timeout=10).text, "wis_upload_streams_completed_total")


def serving_workers(tmp_path, path):
    """Process ids of the workers that answered requests to `path`, from the JSON access log."""
    lines = (tmp_path / "access.log").read_text().splitlines()
    return {record["process"] for record in map(json.loads, lines) if record.get("path") == path}


def test_upserts_of_the_same_ids_from_many_clients_lose_no_acknowledged_write(server, tmp_path):
    ids, clients, writes_each = ["shared_a", "shared_b", "shared_c"], 12, 15
    acknowledged = defaultdict(list)  # id -> [(result, name)], one per acknowledged write
    failures = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(number, round_):
        rng = random.Random(number + 100 * round_)
        barrier.wait(timeout=30)
        for write in range(writes_each):
            identifier, name = rng.choice(ids), f"client {number} round {round_} write {write}"
            result = upsert_over_http(server.url, identifier, name)
            with lock:
                (acknowledged[identifier] if result else failures).append((result, name))

    # Which worker accepts a connection is up to the kernel: another round of the same load (bounded) when one
    # worker happened to take every request, so that the writes really cross processes.
    for round_ in range(3):
        with ThreadPoolExecutor(max_workers=clients) as pool:
            list(pool.map(client, range(clients), [round_] * clients))
        if len(serving_workers(tmp_path, "/graph/v2")) == 2:
            break
    assert failures == []
    assert len(serving_workers(tmp_path, "/graph/v2")) == 2
    assert sum(len(writes) for writes in acknowledged.values()) == clients * writes_each * (round_ + 1)
    for identifier in ids:
        writes = acknowledged[identifier]
        assert Counter(result for result, _ in writes)["CREATED"] == 1
        stored = read_process_over_http(server.url, identifier)
        assert stored["revision"] == len(writes)
        assert stored["name"] in {name for _, name in writes}
        assert stored["steps"] == [{"name": stored["name"]}]  # one write's whole content, never a mix


def test_chunks_of_several_streams_sent_at_once_and_repeated_complete_each_stream_once(server):
    chunk_size, copies, senders = 128 * 1024, 3, 16
    files = [mp4(6 * chunk_size + 1000 * n + 1, seed=n) for n in range(4)]
    streams = [create_stream_over_http(server.url, data, f"clip{n}.mp4") for n, data in enumerate(files)]
    chunks = {stream: [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)]
              for stream, data in zip(streams, files)}
    sends = [(stream, index) for stream in streams for index in range(len(chunks[stream]))] * copies
    random.Random(7).shuffle(sends)
    completed_before = completed_streams(server.url)
    barrier = threading.Barrier(senders)

    def send(task):
        stream, index = task
        return stream, send_chunk_over_http(server.url, stream, index, len(chunks[stream]), chunks[stream][index])

    def sender(batch):
        barrier.wait(timeout=30)
        return [send(task) for task in batch]

    with ThreadPoolExecutor(max_workers=senders) as pool:
        results = [result for batch in pool.map(sender, [sends[n::senders] for n in range(senders)])
                   for result in batch]

    assert {status for _, (status, _) in results} <= {200, 201}
    for stream, data in zip(streams, files):
        paths = {body["path"] for sent, (status, body) in results if sent == stream and status == 201}
        assert len(paths) == 1, paths
        path = paths.pop()
        served = requests.get(server.url + path, headers=HEADERS, timeout=30)
        assert sha256(served.content) == sha256(data)
        status = requests.get(f"{server.url}/uploads/{stream}", headers=HEADERS, timeout=30).json()
        assert (status["state"], status["path"]) == ("complete", path)
    # Exactly one request per stream completed it (retries of a complete stream answer 201 but are not counted).
    assert completed_streams(server.url) - completed_before == len(streams)
    assert sorted(sha256(p.read_bytes()) for p in media_files(server.data_dir, "videos")) == sorted(map(sha256, files))
