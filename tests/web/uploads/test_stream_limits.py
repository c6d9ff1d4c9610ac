"""Open upload streams are bounded per org (WIS_MAX_OPEN_STREAMS): over the limit, creation is a 429 naming the
limit and how to free a stream, for the chunk API and tus alike, and the limit holds when workers create the last
stream at once. The open-streams gauge of /metrics costs the same however many streams there are."""
import base64
import builtins
import hashlib
import io
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from service.config import load_config
from service.errors import TooManyStreams
from service.storage import get_repository
from service.storage.contract import StreamRecord
from service.storage.files.streams.store import FileStreamStore
from service.storage.shared.streams.rows import StreamRows
from support.metrics import metric_value
from support.uploads import expire_every_stream
from support.tokens import HEADERS, OTHER_HEADERS

TUS = {"Tus-Resumable": "1.0.0"}
LIMIT = 2


def create(client, headers):
    return client.post("/uploads", headers=headers, json={
        "destinationId": "stepImage", "fileName": "a.png", "fileSize": 10, "sha": "0" * 64})


def create_tus(client, headers):
    metadata = "destinationId " + base64.b64encode(b"stepImage").decode()
    return client.post("/uploads", headers=dict(headers, **TUS, **{"Upload-Length": "10", "Upload-Metadata": metadata}))


def assert_too_many(response, open_streams=LIMIT, limit=LIMIT):
    assert response.status_code == 429, response.get_data(as_text=True)
    message = response.get_json()["error"]
    assert f"has {open_streams} upload streams open and may have at most {limit} (WIS_MAX_OPEN_STREAMS)" in message
    assert "DELETE /uploads/<streamId>" in message and "24 hours after its last activity, WIS_STREAM_TTL_HOURS" in message


def test_over_the_limit_creation_is_429_naming_the_limit_and_how_to_free_a_stream(make_app):
    client = make_app(MAX_OPEN_STREAMS=LIMIT).test_client()
    first = create(client, HEADERS).get_json()["streamId"]
    assert create_tus(client, HEADERS).status_code == 201
    assert_too_many(create(client, HEADERS))
    refused = create_tus(client, HEADERS)
    assert_too_many(refused)
    assert refused.headers["Tus-Resumable"] == "1.0.0"
    assert create(client, OTHER_HEADERS).status_code == 201  # the limit is the org's
    assert client.delete(f"/uploads/{first}", headers=HEADERS).status_code == 204
    assert create(client, HEADERS).status_code == 201


def test_the_limit_is_1000_unless_set():
    assert load_config(environ={})["MAX_OPEN_STREAMS"] == 1000
    assert load_config(environ={"WIS_MAX_OPEN_STREAMS": "5"})["MAX_OPEN_STREAMS"] == 5


def test_a_completed_stream_no_longer_counts(make_app):
    client = make_app(MAX_OPEN_STREAMS=1).test_client()
    data = b"GIF89a" + b"\1" * 20
    stream_id = client.post("/uploads", headers=HEADERS, json={
        "destinationId": "stepVideoGif", "fileName": "a.gif", "fileSize": len(data),
        "sha": hashlib.sha256(data).hexdigest()}).get_json()["streamId"]
    assert_too_many(create(client, HEADERS), 1, 1)
    chunk = {"chunkIndex": "0", "totalChunks": "1", "file": (io.BytesIO(data), "a.gif")}
    assert client.patch(f"/uploads/{stream_id}", data=chunk, headers=HEADERS).status_code == 201
    assert create(client, HEADERS).status_code == 201


def test_an_expired_stream_no_longer_counts(make_app):
    app = make_app(MAX_OPEN_STREAMS=1)
    client = app.test_client()
    assert create(client, HEADERS).status_code == 201
    assert_too_many(create(client, HEADERS), 1, 1)
    expire_every_stream(get_repository(app))
    assert create(client, HEADERS).status_code == 201


def hold_between_count_and_creation(monkeypatch, backend, arrived):
    """Make each creation wait, after it has counted the org's streams and before it makes its own, until a second
    creation gets there too or a second has passed: were the count and the creation not one step under the org's
    lock, both would count the same streams and both create one."""
    target, name = (FileStreamStore, "_make") if backend.name == "file" else (StreamRows, "insert")
    real = getattr(target, name)

    def held(*args):
        try:
            arrived.wait(timeout=1)
        except threading.BrokenBarrierError:
            pass  # the other creation is kept out by the lock: go on alone
        return real(*args)
    monkeypatch.setattr(target, name, held)


def test_two_creations_of_the_last_stream_at_once_one_is_refused(make_app, backend, monkeypatch):
    repo = get_repository(make_app(MAX_OPEN_STREAMS=LIMIT))
    record = StreamRecord(destination_id="stepImage", file_name="a.png", file_size=10, sha="0" * 64,
                          media_prefix="0123456789abcdef")
    repo.streams.create("default", record)
    hold_between_count_and_creation(monkeypatch, backend, threading.Barrier(2))

    def attempt(_):
        try:
            return repo.streams.create("default", record)
        except TooManyStreams:
            return None
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(attempt, range(2)))
    assert sorted(outcome is None for outcome in outcomes) == [False, True]
    assert len(repo.streams.open_ids("default")) == LIMIT


def test_workers_of_a_server_creating_at_once_never_pass_the_limit(tmp_path, backend, start_gunicorn):
    server = start_gunicorn(tmp_path / "data", workers=2, backend=backend, env={"WIS_MAX_OPEN_STREAMS": "3"},
                            extra_args=("--threads", "4"))
    body = {"destinationId": "stepImage", "fileName": "a.png", "fileSize": 10, "sha": "0" * 64}
    tus = dict(HEADERS, **TUS, **{"Upload-Length": "10",
                                  "Upload-Metadata": "destinationId " + base64.b64encode(b"stepImage").decode()})

    def attempt(number):
        if number % 2:
            return requests.post(server.url + "/uploads", headers=tus, timeout=60)
        return requests.post(server.url + "/uploads", headers=HEADERS, json=body, timeout=60)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(attempt, range(8)))
    assert sorted(answer.status_code for answer in answers) == [201] * 3 + [429] * 5
    assert all("may have at most 3 (WIS_MAX_OPEN_STREAMS)" in answer.json()["error"]
               for answer in answers if answer.status_code == 429)


# -- the gauge --------------------------------------------------------------------------------------------------------

class Reads:
    """What a scrape reads from the stores: files opened, directories listed, rows of the database, by the thread that
    scrapes (the app's background threads, such as the webhook dispatcher looking for subscriptions, are not the
    scrape's reads: counting theirs made the test fail when one of them looked during a scrape)."""

    def __init__(self, monkeypatch, repo):
        self.files = self.listings = self.rows = 0
        real_open, real_scandir = builtins.open, os.scandir
        scraper = threading.get_ident()

        def counting_open(*args, **kwargs):
            self.files += threading.get_ident() == scraper
            return real_open(*args, **kwargs)

        def counting_scandir(*args):
            self.listings += threading.get_ident() == scraper
            return real_scandir(*args)
        monkeypatch.setattr(builtins, "open", counting_open)
        monkeypatch.setattr(os, "scandir", counting_scandir)
        if hasattr(repo, "database"):
            real_transaction = repo.database.transaction
            reads = self

            class CountingConnection:
                def __init__(self, connection):
                    self._connection = connection

                def execute(self, *args, **kwargs):
                    cursor = self._connection.execute(*args, **kwargs)
                    if threading.get_ident() == scraper:
                        reads.rows += max(cursor.rowcount, 0)
                    return cursor

            import contextlib

            @contextlib.contextmanager
            def counting_transaction():
                with real_transaction() as connection:
                    yield CountingConnection(connection)
            monkeypatch.setattr(repo.database, "transaction", counting_transaction)

    def total(self):
        return self.files, self.listings, self.rows


def scrape(client, repo, monkeypatch):
    """(open-streams gauge, what the scrape read)."""
    with monkeypatch.context() as patch:
        reads = Reads(patch, repo)
        text = client.get("/metrics").get_data(as_text=True)
    return metric_value(text, "wis_upload_streams_open"), reads.total()


@pytest.mark.exhaustive  # 1,000 streams opened
def test_the_open_streams_gauge_reads_as_much_with_1000_streams_as_with_10(make_app, monkeypatch):
    app = make_app(MAX_OPEN_STREAMS=1000)
    client, repo = app.test_client(), get_repository(app)
    client.get("/healthz")  # the sweep the first request starts
    record = StreamRecord(destination_id="stepImage", file_name="a.png", file_size=10, sha="0" * 64,
                          media_prefix="0123456789abcdef")

    def create_streams(count, already):
        for number in range(already, already + count):
            repo.streams.create(f"org{number % 10}", record)  # ten orgs: each counts its own at creation
        repo.sweep()

    create_streams(10, 0)
    few, read_for_few = scrape(client, repo, monkeypatch)
    create_streams(990, 10)
    many, read_for_many = scrape(client, repo, monkeypatch)
    assert (few, many) == (10, 1000)
    assert read_for_many == read_for_few
    assert read_for_few[0] + read_for_few[2] <= 2  # a small file, or a row


def test_a_sweep_that_counts_what_the_last_one_counted_changes_nothing_stored(make_app, backend):
    """File backend: the count is written only when it changes (a sweep of a data directory with no open stream writes
    no file there at all); shared backend: the same row."""
    app = make_app()
    client, repo = app.test_client(), get_repository(app)
    repo.sweep()
    assert metric_value(client.get("/metrics").get_data(as_text=True), "wis_upload_streams_open") == 0
    if backend.name == "file":
        assert not (repo.data_dir / "open-streams.json").exists()
    create(client, HEADERS)
    repo.sweep()
    assert metric_value(client.get("/metrics").get_data(as_text=True), "wis_upload_streams_open") == 1
