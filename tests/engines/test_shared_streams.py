"""Upload streams on the shared backend, where S3's rules show through: parts of 5 MiB or more (but the last) built
from chunks of any size, a chunk joined into a part that cannot be replaced, and the expiry sweep that aborts the
multipart upload and removes staged objects. The behaviour shared with the file backend is tested on both backends
by the rest of the suite."""
import datetime
import random
import time

import pytest

from service import create_app
from service.storage import get_repository
from service.storage.shared import SharedRepository
from service.interface import MB
from support.media import MP4, sha256
from support.tokens import TOKENS
from support.uploads import create_stream, expire_every_stream, send_chunk, stream_status


@pytest.fixture
def app(tmp_path, shared_backend):
    application = create_app({"DATA_DIR": str(tmp_path / "node"), "API_TOKENS": TOKENS, "TESTING": True,
                              **shared_backend.settings()})
    yield application
    get_repository(application).close()


def movie(size, seed=1):
    return MP4 + random.Random(seed).randbytes(size - len(MP4))


def chunks_of(data, sizes):
    chunks, start = [], 0
    for size in sizes:
        chunks.append(data[start:start + size])
        start += size
    assert start == len(data)
    return chunks


def object_keys(app, stream_id):
    """Keys in the bucket staged for a stream (not its assembled file)."""
    repo = get_repository(app)
    return list(repo.objects.keys(f"streams/default/{stream_id}/"))


def multipart_uploads(app):
    repo = get_repository(app)
    answer = repo.objects.client.list_multipart_uploads(Bucket=repo.objects.bucket, Prefix=repo.objects.prefix)
    return answer.get("Uploads", [])


def test_small_chunks_in_any_order_make_parts_of_5_mib_and_a_last_smaller_one(app, auth):
    client = app.test_client()
    data = movie(13 * MB + 5)
    sizes = [3 * MB, 1, 2 * MB, 4 * MB - 1, 10 * MB // 3, 13 * MB + 5 - (9 * MB + 10 * MB // 3)]
    chunks = chunks_of(data, sizes)
    stream_id = create_stream(client, auth, data)
    order = [4, 0, 5, 2, 1, 3]
    answers = [send_chunk(client, auth, stream_id, index, len(chunks), chunks[index]) for index in order]
    assert [answer.status_code for answer in answers] == [200] * 5 + [201]
    path = answers[-1].get_json()["path"]
    assert sha256(client.get(path, headers=auth).data) == sha256(data)
    assert object_keys(app, stream_id) == [] and multipart_uploads(app) == []


def test_a_chunk_joined_into_a_part_is_re_sent_unchanged_or_refused(app, auth):
    client = app.test_client()
    data = movie(12 * MB)
    chunks = chunks_of(data, [6 * MB, 6 * MB])
    stream_id = create_stream(client, auth, data)
    assert send_chunk(client, auth, stream_id, 0, 2, chunks[0]).status_code == 200
    assert send_chunk(client, auth, stream_id, 0, 2, chunks[0]).status_code == 200  # a safe retry
    refused = send_chunk(client, auth, stream_id, 0, 2, movie(6 * MB, seed=2))
    assert refused.status_code == 400
    assert refused.get_json()["error"].startswith("chunkIndex: chunk 0 is already joined into a part")
    completed = send_chunk(client, auth, stream_id, 1, 2, chunks[1])
    assert completed.status_code == 201
    assert client.get(completed.get_json()["path"], headers=auth).data == data


def test_the_sweep_aborts_the_multipart_upload_and_removes_staged_objects(app, auth):
    client = app.test_client()
    data = movie(13 * MB)
    chunks = chunks_of(data, [6 * MB, 1 * MB, 6 * MB])
    stream_id = create_stream(client, auth, data)
    assert send_chunk(client, auth, stream_id, 0, 3, chunks[0]).status_code == 200  # a part: the upload exists
    assert send_chunk(client, auth, stream_id, 2, 3, chunks[2]).status_code == 200  # out of order: staged
    assert len(object_keys(app, stream_id)) == 1 and len(multipart_uploads(app)) == 1
    repo = get_repository(app)
    expire_every_stream(repo)
    assert repo.sweep() == 1
    assert object_keys(app, stream_id) == [] and multipart_uploads(app) == []
    assert client.get(f"/uploads/{stream_id}", headers=auth).status_code == 404


def test_a_whole_file_in_order_is_verified_without_reading_it_back(app, auth, monkeypatch):
    client = app.test_client()
    data = movie(11 * MB)
    chunks = chunks_of(data, [5 * MB, 5 * MB, MB])
    stream_id = create_stream(client, auth, data)
    objects = get_repository(app).objects
    reads = []
    real_read = objects.read
    monkeypatch.setattr(objects, "read", lambda *args, **kwargs: reads.append(args) or real_read(*args, **kwargs))
    answers = [send_chunk(client, auth, stream_id, index, 3, chunk) for index, chunk in enumerate(chunks)]
    assert [answer.status_code for answer in answers] == [200, 200, 201]
    assert reads == []  # nothing was read back from the bucket to verify the SHA-256
    assert client.get(answers[-1].get_json()["path"], headers=auth).data == data


def test_a_chunk_refused_after_it_was_staged_leaves_no_object(app, auth):
    client = app.test_client()
    data = movie(3000)
    stream_id = create_stream(client, auth, data)
    assert send_chunk(client, auth, stream_id, 1, 3, data[1000:2000]).status_code == 200  # staged: not next
    assert len(object_keys(app, stream_id)) == 1
    refused = send_chunk(client, auth, stream_id, 2, 4, data[2000:])  # staged, then refused under the lock
    assert refused.status_code == 400 and refused.get_json()["error"].startswith("totalChunks: ")
    assert len(object_keys(app, stream_id)) == 1
    assert send_chunk(client, auth, stream_id, 2, 3, data[2000:]).status_code == 200
    completed = send_chunk(client, auth, stream_id, 0, 3, data[:1000])
    assert completed.status_code == 201
    assert client.get(completed.get_json()["path"], headers=auth).data == data
    assert object_keys(app, stream_id) == []


def test_a_sweeping_host_with_a_skewed_clock_and_a_shorter_ttl_removes_nothing_live(tmp_path, shared_backend, auth):
    """CONTRACT 13, one clock: expiry is by the database's clock and each stream's own time-to-live, so a host two hours
    ahead with WIS_STREAM_TTL_HOURS=1 (sweeping as its requests or `wis gc` would) removes only what has expired."""
    settings = shared_backend.settings()
    node = create_app({"DATA_DIR": str(tmp_path / "node"), "API_TOKENS": TOKENS, "TESTING": True, **settings})
    client = node.test_client()
    data = movie(6 * MB, seed=9)
    chunks = chunks_of(data, [3 * MB, 3 * MB])
    live = create_stream(client, auth, data)
    assert send_chunk(client, auth, live, 0, 2, chunks[0]).status_code == 200
    stale = create_stream(client, auth, data)
    with get_repository(node).database.transaction() as connection:
        connection.execute("UPDATE streams SET touched_at = touched_at - ttl - 1 WHERE id = %s", (stale,))
    sweeper = SharedRepository(tmp_path / "skewed-host", settings["DATABASE_URL"], settings["S3_BUCKET"],
                               settings["S3_PREFIX"], stream_ttl_seconds=3600, clock=lambda: time.time() + 2 * 3600)
    try:
        assert sweeper.sweep() == 1
    finally:
        sweeper.close()
    assert client.get(f"/uploads/{stale}", headers=auth).status_code == 404
    status = stream_status(client, auth, live)
    assert status["receivedChunks"] == [0]
    # Its expiry is the node's 24 h from the database's now, not the sweeper's hour.
    expires = datetime.datetime.fromisoformat(status["expiresAt"].replace("Z", "+00:00")).timestamp()
    assert expires > time.time() + 23 * 3600
    done = send_chunk(client, auth, live, 1, 2, chunks[1])
    assert done.status_code == 201, done.get_json()
    assert sha256(client.get(done.get_json()["path"], headers=auth).get_data()) == sha256(data)
    get_repository(node).close()
