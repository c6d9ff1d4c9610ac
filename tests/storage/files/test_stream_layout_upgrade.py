"""Streams in flight written by an earlier version of the file backend resume and complete after an upgrade.

tests/data/streams-before-ledger is a data directory the code of commit cf96218 left, as a worker killed at that
moment would: a chunk stream of 4 chunks of which 0 and 1 are merged onto its prefix (`merged` pointer and
`boundaries` records) and 3 waits in a part, and a tus upload with 1000 of its 3000 bytes committed. It was made with
that code's service through the Flask test client; the files' bytes are derived from the seeds below.
"""
import hashlib
import os
import random
import shutil

import pytest

from service import create_app
from support.tokens import HEADERS, TOKENS
from support.uploads import send_chunk, stream_status
from support.paths import DATA

FIXTURE = DATA / "streams-before-ledger"
CHUNK_STREAM, TUS_UPLOAD = "7aa0d249ddd35b0b016050c7263b7ff7", "de5087cdedb4cb3ae6d234b019bcf96b"
VIDEO = b"\x00\x00\x00\x18ftypmp42" + random.Random("ledger-fixture-video").randbytes(3500 - 12)
IMAGE = b"\x89PNG\r\n\x1a\n" + random.Random("ledger-fixture-image").randbytes(3000 - 8)
TUS = {"Tus-Resumable": "1.0.0"}


@pytest.fixture
def data_dir(tmp_path):
    copied = tmp_path / "data"
    shutil.copytree(FIXTURE, copied)
    for stream in (copied / "orgs" / "default" / "streams").iterdir():
        os.utime(stream)  # active just now: a checkout's times would have them expired
    return copied


@pytest.fixture
def client(data_dir):
    return create_app({"DATA_DIR": str(data_dir), "API_TOKENS": TOKENS, "TESTING": True}).test_client()


def test_a_chunk_stream_of_the_earlier_layout_reports_its_chunks_and_completes(client):
    held = stream_status(client, HEADERS, CHUNK_STREAM)
    assert (held["state"], held["receivedChunks"], held["receivedBytes"]) == ("open", [0, 1, 3], 2500)
    chunks = [VIDEO[i:i + 1000] for i in range(0, len(VIDEO), 1000)]
    completed = send_chunk(client, HEADERS, CHUNK_STREAM, 2, len(chunks), chunks[2])
    assert completed.status_code == 201, completed.get_json()
    served = client.get(completed.get_json()["path"], headers=HEADERS).data
    assert hashlib.sha256(served).digest() == hashlib.sha256(VIDEO).digest()


def test_a_tus_upload_of_the_earlier_layout_resumes_at_its_offset_and_completes(client):
    head = client.head(f"/uploads/{TUS_UPLOAD}", headers=dict(HEADERS, **TUS))
    assert (head.status_code, head.headers["Upload-Offset"]) == (200, "1000")
    response = client.patch(f"/uploads/{TUS_UPLOAD}", data=IMAGE[1000:], headers=dict(HEADERS, **TUS, **{
        "Upload-Offset": "1000", "Content-Type": "application/offset+octet-stream"}))
    assert response.status_code == 204, response.get_data(as_text=True)
    assert client.get(response.headers["Media-Path"], headers=HEADERS).data == IMAGE


def test_the_chunk_stream_gets_a_ledger_in_place_of_its_pointer_and_boundaries(client, data_dir):
    stream_status(client, HEADERS, CHUNK_STREAM)
    directory = data_dir / "orgs" / "default" / "streams" / CHUNK_STREAM
    assert sorted(path.name for path in directory.iterdir()) == ["ledger", "meta.json", "part-3", "prefix"]


def test_an_upgrade_cut_short_after_the_ledger_was_written_is_finished(data_dir):
    directory = data_dir / "orgs" / "default" / "streams" / CHUNK_STREAM
    kept = {name: (directory / name).read_bytes() for name in ("merged", "boundaries")}
    client = create_app({"DATA_DIR": str(data_dir), "API_TOKENS": TOKENS, "TESTING": True}).test_client()
    stream_status(client, HEADERS, CHUNK_STREAM)
    for name, content in kept.items():  # as a worker killed between the ledger's rename and the unlinks leaves it
        (directory / name).write_bytes(content)
    assert stream_status(client, HEADERS, CHUNK_STREAM)["receivedChunks"] == [0, 1, 3]
    assert not (directory / "merged").exists() and not (directory / "boundaries").exists()
