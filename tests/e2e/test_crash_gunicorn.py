"""Crashes: kill -9 a gunicorn worker, or the whole server, while clients upsert processes and upload media.

Afterwards every JSON file on disk parses, every acknowledged write is there, every file at a media path is whole
(its SHA-256 is that of a file a client sent), and the interrupted chunked upload resumes from what the server
reports and completes with the right SHA-256.
"""
import hashlib
import json
import os
import signal
import threading
import time
from collections import defaultdict

import requests

from service.storage.files import FileRepository
from service.storage.files.streams.ledger import LEDGER, Ledger
from support.datadir import media_files
from support.media import mp4, png, sha256
from support.power_cut import power_cut
from support.over_http import create_stream_over_http, read_process_over_http, send_chunk_over_http, upsert_over_http
from support.servers import shipped_server
from support.tokens import HEADERS


CHUNK = 64 * 1024
CHUNKS = 120
WRITERS = 4
# Requests in flight when the server dies fail; clients give up on them quickly and carry on.
TIMEOUT = 10


class Load:
    """Client threads that keep writing until stopped, recording what they sent and what was acknowledged."""

    def __init__(self, url):
        self.url = url
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.attempts = defaultdict(list)  # process id -> [[name, acknowledged]] in the order they were sent
        self.sent_files = {}  # SHA-256 -> bytes of every file a client sent (singly or as a stream)
        self.single_uploads = {}  # acknowledged media path -> SHA-256
        self.video = mp4(CHUNKS * CHUNK - 1234, seed=99)
        self.sent_files[sha256(self.video)] = self.video
        self.chunks = [self.video[i:i + CHUNK] for i in range(0, len(self.video), CHUNK)]
        self.stream_id = create_stream_over_http(url, self.video)
        self.acknowledged_chunks = set()
        self.threads = [threading.Thread(target=self._writer, args=(n,)) for n in range(WRITERS)]
        self.threads += [threading.Thread(target=self._uploader), threading.Thread(target=self._single_uploader)]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc_info):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def acknowledged_writes(self):
        with self.lock:
            return sum(acked for attempts in self.attempts.values() for _, acked in attempts)

    def _writer(self, number):
        """Upserts its own ids (one writer each) and ids every writer shares."""
        for write in range(10_000):
            if self.stop.is_set():
                return
            identifier = [f"own_{number}_a", f"own_{number}_b", "shared_a", "shared_b"][write % 4]
            attempt = [f"writer {number} write {write}", False]
            with self.lock:
                self.attempts[identifier].append(attempt)
            try:
                attempt[1] = upsert_over_http(self.url, identifier, attempt[0], timeout=TIMEOUT) is not None
            except requests.RequestException:
                time.sleep(0.05)  # the server is down or restarting a worker

    def _uploader(self):
        """Sends the stream's chunks in order, stopping at the first failure; never the last chunk, which the test
        sends when it resumes the upload."""
        for index in range(len(self.chunks) - 1):
            if self.stop.is_set():
                return
            try:
                status, _ = send_chunk_over_http(self.url, self.stream_id, index, len(self.chunks), self.chunks[index],
                                       timeout=TIMEOUT)
            except requests.RequestException:
                return
            if status != 200:
                return
            self.acknowledged_chunks.add(index)

    def _single_uploader(self):
        for number in range(10_000):
            if self.stop.is_set():
                return
            data = png(300_000 + number, seed=number)
            with self.lock:
                self.sent_files[sha256(data)] = data
            try:
                response = requests.post(f"{self.url}/uploads", headers=HEADERS, timeout=TIMEOUT,
                                         data={"destinationId": "stepImage"}, files={"file": ("photo.png", data)})
            except requests.RequestException:
                time.sleep(0.05)
                continue
            if response.status_code == 201:
                self.single_uploads[response.json()["path"]] = sha256(data)


def wait_until(condition, what, timeout=20):
    """Poll `condition` (bounded) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def worker_pids(server):
    with open(f"/proc/{server.process.pid}/task/{server.process.pid}/children") as handle:
        return {int(pid) for pid in handle.read().split()}


def is_gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[1].startswith("Z")  # a zombie has finished dying
    except FileNotFoundError:
        return True


def wait_for_load(load):
    """Until writes, chunks and single uploads are all under way."""
    wait_until(lambda: load.acknowledged_writes() >= 20 and len(load.acknowledged_chunks) >= 5
               and load.single_uploads, "the clients to get going")


def check_after_restart(load, url, data_dir):
    """Every invariant a crash must not break, checked through the restarted service and on disk."""
    for path in data_dir.rglob("*"):
        if path.is_file() and path.suffix == ".json":
            json.loads(path.read_bytes())  # every document and stream record parses
        if path.name == LEDGER:
            Ledger(path.parent).next()  # every stream's ledger holds a whole commit

    for identifier, attempts in load.attempts.items():
        stored = read_process_over_http(url, identifier)
        acknowledged = [n for n, (_, acked) in enumerate(attempts) if acked]
        if identifier.startswith("own_"):
            # A write that died unacknowledged after the last acknowledged one may have landed, nothing earlier.
            possible = {name for name, _ in attempts[acknowledged[-1] if acknowledged else 0:]}
        else:
            possible = {name for name, _ in attempts}
        assert stored is not None and stored["name"] in possible, (identifier, stored)
        assert len(acknowledged) <= stored["revision"] <= len(attempts)
        assert stored["steps"] == [{"name": stored["name"]}]

    listed = requests.post(f"{url}/graph/v2", headers=HEADERS, timeout=30,
                           json={"query": "{ processes(first: 1000) { id } }"}).json()["data"]["processes"]
    acknowledged_ids = {i for i, attempts in load.attempts.items() if any(acked for _, acked in attempts)}
    # Temporary files of writes that died are never listed as processes.
    assert acknowledged_ids <= {process["id"] for process in listed} <= set(load.attempts)

    for file in media_files(data_dir):
        assert not file.name.startswith("."), file  # no temporary file under a media path
        assert hashlib.sha256(file.read_bytes()).hexdigest() in load.sent_files, file  # never a half file
    for path, digest in load.single_uploads.items():
        response = requests.get(url + path, headers=HEADERS, timeout=30)
        assert response.status_code == 200 and sha256(response.content) == digest

    status = requests.get(f"{url}/uploads/{load.stream_id}", headers=HEADERS, timeout=30).json()
    assert status["state"] == "open"
    assert load.acknowledged_chunks <= set(status["receivedChunks"])
    missing = [i for i in range(len(load.chunks)) if i not in status["receivedChunks"]]
    answers = [send_chunk_over_http(url, load.stream_id, i, len(load.chunks), load.chunks[i]) for i in missing]
    assert [status for status, _ in answers] == [200] * (len(missing) - 1) + [201]
    served = requests.get(url + answers[-1][1]["path"], headers=HEADERS, timeout=30)
    assert sha256(served.content) == sha256(load.video)


def load_then_kill_the_whole_server(start_gunicorn, tmp_path):
    """A server on `tmp_path/data` under the clients' load, then kill -9 of its master and workers; the Load."""
    server = shipped_server(start_gunicorn, tmp_path, tmp_path / "data")
    try:
        with Load(server.url) as load:
            wait_for_load(load)
            processes = {server.process.pid, *worker_pids(server)}
            for pid in processes:
                os.kill(pid, signal.SIGKILL)
            server.process.wait(timeout=10)
            wait_until(lambda: all(map(is_gone, processes)), "the server's processes to die")
    finally:
        server.stop()
    return load


def test_kill_9_of_a_worker_loses_nothing_acknowledged_and_the_upload_resumes(tmp_path, start_gunicorn):
    server = shipped_server(start_gunicorn, tmp_path, tmp_path / "data")
    try:
        with Load(server.url) as load:
            wait_for_load(load)
            victim = min(worker_pids(server))
            os.kill(victim, signal.SIGKILL)
            wait_until(lambda: len(worker_pids(server) - {victim}) == 2, "gunicorn to replace the worker")
            before = load.acknowledged_writes()
            wait_until(lambda: load.acknowledged_writes() >= before + 20, "writes after the worker was replaced")
        check_after_restart(load, server.url, server.data_dir)
    finally:
        server.stop()


def test_kill_9_of_the_whole_server_loses_nothing_acknowledged_and_the_upload_resumes(tmp_path, start_gunicorn):
    load = load_then_kill_the_whole_server(start_gunicorn, tmp_path)
    restarted = shipped_server(start_gunicorn, tmp_path, tmp_path / "data")
    try:
        check_after_restart(load, restarted.url, restarted.data_dir)
    finally:
        restarted.stop()


def test_a_power_cut_after_kill_9_loses_nothing_acknowledged(tmp_path, start_gunicorn):
    """The whole server killed under load, then what a power cut may take of its files since the last checkpoint
    taken (documents, history entries, event lines; not the write-ahead log's records): the restarted server puts
    every acknowledged change back at its first look at the org, and the checks of a kill hold."""
    load = load_then_kill_the_whole_server(start_gunicorn, tmp_path)
    left = FileRepository(tmp_path / "data")
    checkpointed = left.events.wal.checkpoint("default") or 0
    assert left.events.wal.records_after("default", checkpointed)  # something for the power cut to take
    power_cut(left, checkpointed)
    restarted = shipped_server(start_gunicorn, tmp_path, tmp_path / "data")
    try:
        read_process_over_http(restarted.url, "shared_a")  # the first look at the org after the "reboot"
        check_after_restart(load, restarted.url, restarted.data_dir)
    finally:
        restarted.stop()


def test_a_clean_stop_checkpoints_every_change_it_acknowledged(tmp_path, start_gunicorn):
    """A checkpoint comes about a second after a commit; SIGTERM makes each worker's at once before it exits, so that a
    power cut after a clean stop has nothing to take and the next start nothing to put back."""
    server = shipped_server(start_gunicorn, tmp_path, tmp_path / "data")
    for number in range(6):
        assert upsert_over_http(server.url, f"proc_{number % 3}", f"Proc {number}") in {"CREATED", "UPDATED"}
    server.stop()
    left = FileRepository(tmp_path / "data")
    assert left.events.bounds("default").latest == 6
    assert left.events.wal.checkpoint("default") == 6
