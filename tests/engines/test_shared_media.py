"""Published media on the shared backend, against real engines (PostgreSQL and SeaweedFS's S3): the media index and
its objects (publish, exists, list, delete, a taken path, tenancy, import), and media served through a real app (bytes,
Range, ETag and 304, HEAD, nosniff, 404 for another org, 503 when the store is down) with flat memory for a large
object and no connection left open by a client that goes away mid-download."""
import hashlib
import os
import time
import uuid
from pathlib import Path

import pytest

from service import create_app
from service.interface.checksums import file_sha256
from service.interface import media_path
from service.storage.shared import SharedRepository
from service.storage.shared.database import Database
from service.interface import MB
from support.media import MP4, PNG, blob
from support.tokens import HEADERS, OTHER_HEADERS, TOKENS
from support.uploads import upload

ORG, OTHER_ORG = "default", "other"


@pytest.fixture(scope="module")
def database_url(postgres):
    url = postgres.new_database()
    Database(url).upgrade()
    return url


@pytest.fixture(scope="module")
def bucket(seaweed):
    return seaweed.create_bucket(f"media-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def prefix():
    """A key prefix of this test's own in the module's bucket."""
    return f"t-{uuid.uuid4().hex[:12]}/"


@pytest.fixture
def s3_env(seaweed, monkeypatch):
    """The environment boto3 reads in the service process (here, the test process): endpoint, keys, region."""
    for name, value in seaweed.env().items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def repo(tmp_path, database_url, bucket, prefix, s3_env):
    repository = SharedRepository(tmp_path / "node", database_url, bucket, prefix, clock=lambda: 1_700_000_000.0)
    repository.media.remove_all()
    yield repository
    repository.media.remove_all()
    repository.database.close()


@pytest.fixture
def app(tmp_path, database_url, bucket, prefix, s3_env):
    application = create_app({"DATABASE_URL": database_url, "S3_BUCKET": bucket, "S3_PREFIX": prefix,
                              "API_TOKENS": TOKENS, "DATA_DIR": str(tmp_path / "node"), "TESTING": True})
    repository = application.extensions["repository"]
    repository.media.remove_all()
    yield application
    repository.media.remove_all()
    repository.database.close()


@pytest.fixture
def client(app):
    return app.test_client()


def local_file(directory, data, name="source"):
    path = Path(directory) / name
    path.write_bytes(data)
    return path


def object_bytes(seaweed, bucket, key):
    return seaweed.client().get_object(Bucket=bucket, Key=key)["Body"].read()


def object_keys(seaweed, bucket, prefix):
    answer = seaweed.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(entry["Key"] for entry in answer.get("Contents", ()))


def publish(repo, org, path, source):
    return repo.media.publish(org, path, source, file_sha256(source))


def read_open_media(opened):
    with opened.file as file:
        return file.read()


# -- the store --------------------------------------------------------------------------------------------------------

def test_publish_exists_list_and_delete(repo, tmp_path, seaweed, bucket, prefix):
    data = blob(PNG, 5000)
    path = media_path("image", "0123456789abcdef-photo.png")
    assert repo.media.exists(ORG, path) is False
    assert publish(repo, ORG, path, local_file(tmp_path, data)) == path
    assert repo.media.exists(ORG, path) is True
    assert repo.media.list_media(ORG) == [(path, 1_700_000_000.0)]
    key = repo.media.media_key(ORG, path)
    assert key == f"{prefix}media/{ORG}/images/0123456789abcdef-photo.png"
    assert object_bytes(seaweed, bucket, key) == data
    opened = repo.media.open(ORG, path)
    assert (opened.size, opened.etag, opened.last_modified) == (len(data), hashlib.sha256(data).hexdigest(),
                                                                1_700_000_000.0)
    assert read_open_media(opened) == data

    assert repo.media.delete(ORG, path) is True
    assert repo.media.exists(ORG, path) is False
    assert repo.media.list_media(ORG) == []
    assert repo.media.open(ORG, path) is None
    assert object_keys(seaweed, bucket, prefix) == []
    assert repo.media.delete(ORG, path) is False


def test_list_media_is_in_path_order(repo, tmp_path):
    names = ["b-x.png", "B-x.png", "a_b.png", "abc.png"]
    for seed, name in enumerate(names):
        assert publish(repo, ORG, media_path("image", name), local_file(tmp_path, blob(PNG, 100, seed=seed)))
    assert [path for path, _ in repo.media.list_media(ORG)] == [media_path("image", name) for name in
                                                                ["B-x.png", "a_b.png", "abc.png", "b-x.png"]]


def test_a_taken_path_is_refused_and_keeps_its_bytes(repo, tmp_path, seaweed, bucket, prefix):
    path = media_path("video", "0123456789abcdef-clip.mp4")
    first, second = blob(MP4, 3000), blob(MP4, 4000, seed=7)
    assert publish(repo, ORG, path, local_file(tmp_path, first, "first")) == path
    assert publish(repo, ORG, path, local_file(tmp_path, second, "second")) is None
    assert read_open_media(repo.media.open(ORG, path)) == first
    assert object_keys(seaweed, bucket, prefix) == [repo.media.media_key(ORG, path)]


def test_an_object_without_a_row_is_not_overwritten_nor_visible(repo, tmp_path, seaweed, bucket):
    # What a node that died between the upload and the row leaves behind: no request sees it, no publish replaces it.
    path = media_path("image", "0123456789abcdef-orphan.png")
    seaweed.client().put_object(Bucket=bucket, Key=repo.media.media_key(ORG, path), Body=b"orphan")
    assert repo.media.exists(ORG, path) is False
    assert publish(repo, ORG, path, local_file(tmp_path, blob(PNG, 100))) is None
    assert repo.media.exists(ORG, path) is False


def test_another_orgs_media_is_not_there(repo, tmp_path):
    path = media_path("image", "0123456789abcdef-photo.png")
    assert publish(repo, ORG, path, local_file(tmp_path, blob(PNG, 100)))
    assert repo.media.exists(OTHER_ORG, path) is False
    assert repo.media.open(OTHER_ORG, path) is None
    assert repo.media.list_media(OTHER_ORG) == []
    assert repo.media.delete(OTHER_ORG, path) is False
    assert repo.media.exists(ORG, path) is True
    # The same path is free for the other org, with its own bytes.
    assert publish(repo, OTHER_ORG, path, local_file(tmp_path, blob(PNG, 200, seed=3), "other")) == path
    assert read_open_media(repo.media.open(OTHER_ORG, path)) == blob(PNG, 200, seed=3)
    assert read_open_media(repo.media.open(ORG, path)) == blob(PNG, 100)


def test_keys_keep_the_case_of_org_ids_and_names(repo, tmp_path):
    lower, upper = media_path("image", "abc.png"), media_path("image", "ABC.png")
    assert publish(repo, "acme", lower, local_file(tmp_path, blob(PNG, 100, seed=1), "a"))
    assert publish(repo, "acme", upper, local_file(tmp_path, blob(PNG, 100, seed=2), "b"))
    assert publish(repo, "ACME", lower, local_file(tmp_path, blob(PNG, 100, seed=3), "c"))
    assert read_open_media(repo.media.open("acme", lower)) == blob(PNG, 100, seed=1)
    assert read_open_media(repo.media.open("acme", upper)) == blob(PNG, 100, seed=2)
    assert read_open_media(repo.media.open("ACME", lower)) == blob(PNG, 100, seed=3)


def test_register_belongs_to_the_callers_transaction(repo, seaweed, bucket):
    path = media_path("video", "0123456789abcdef-clip.mp4")
    key = repo.media.media_key(ORG, path)
    data = blob(MP4, 1000)
    seaweed.client().put_object(Bucket=bucket, Key=key, Body=data)
    with pytest.raises(RuntimeError):
        with repo.database.transaction() as connection:
            assert repo.media.register(connection, ORG, path, key, len(data), hashlib.sha256(data).hexdigest()) == (
                path, True)
            raise RuntimeError("the stream's completion failed")
    assert repo.media.exists(ORG, path) is False
    with repo.database.transaction() as connection:
        assert repo.media.register(connection, ORG, path, key, len(data), hashlib.sha256(data).hexdigest()) == (
            path, True)
    with repo.database.transaction() as connection:
        assert repo.media.register(connection, ORG, path, key, len(data), "0" * 64) == (None, False)
    assert read_open_media(repo.media.open(ORG, path)) == data


def test_import_copies_verifies_and_is_rerunnable(repo, tmp_path, seaweed, bucket):
    path = media_path("image", "0123456789abcdef-old.png")
    data = blob(PNG, 3 * MB + 5)
    source = local_file(tmp_path, data)
    os.utime(source, (1_600_000_000, 1_600_000_000))
    assert repo.media.import_file(ORG, path, source, "an-etag") == "copied"
    assert repo.media.list_media(ORG) == [(path, 1_600_000_000.0)]
    assert object_bytes(seaweed, bucket, repo.media.media_key(ORG, path)) == data
    assert repo.media.import_file(ORG, path, source, "an-etag") == "unchanged"
    assert repo.media.open(ORG, path).etag == "an-etag"  # what the file backend served


def test_remove_all_removes_rows_and_objects(repo, tmp_path, seaweed, bucket, prefix):
    for org in (ORG, OTHER_ORG):
        assert publish(repo, org, media_path("image", "x.png"), local_file(tmp_path, blob(PNG, 100)))
    repo.media.remove_all()
    assert repo.media.list_media(ORG) == [] and repo.media.list_media(OTHER_ORG) == []
    assert object_keys(seaweed, bucket, prefix) == []


# -- serving through the app ------------------------------------------------------------------------------------------

@pytest.fixture
def stored(client):
    data = blob(PNG, 300_000)
    response = upload(client, HEADERS, data)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["path"], data


def test_an_uploaded_image_is_served_with_its_headers(client, stored):
    path, data = stored
    response = client.get(path, headers=HEADERS)
    assert response.status_code == 200
    assert response.data == data
    assert response.headers["Content-Type"] == "image/png"
    assert response.headers["Content-Length"] == str(len(data))
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["ETag"] == f'"{hashlib.sha256(data).hexdigest()}"'
    assert response.headers["Accept-Ranges"] == "bytes"
    assert response.headers["Last-Modified"]


def test_a_range_is_206_with_those_bytes(client, stored):
    path, data = stored
    response = client.get(path, headers={**HEADERS, "Range": "bytes=100000-199999"})
    assert response.status_code == 206
    assert response.data == data[100_000:200_000]
    assert response.headers["Content-Range"] == f"bytes 100000-199999/{len(data)}"
    tail = client.get(path, headers={**HEADERS, "Range": "bytes=-10"})
    assert tail.status_code == 206 and tail.data == data[-10:]


def test_an_unsatisfiable_range_is_416_json(client, stored):
    path, data = stored
    response = client.get(path, headers={**HEADERS, "Range": f"bytes={len(data) + 10}-"})
    assert response.status_code == 416 and response.is_json


def test_the_etag_answers_304(client, stored):
    path, _ = stored
    etag = client.get(path, headers=HEADERS).headers["ETag"]
    response = client.get(path, headers={**HEADERS, "If-None-Match": etag})
    assert response.status_code == 304 and response.data == b""
    assert client.get(path, headers={**HEADERS, "If-None-Match": '"other"'}).status_code == 200


def test_head_has_the_headers_and_no_body(client, stored):
    path, data = stored
    response = client.head(path, headers=HEADERS)
    assert response.status_code == 200
    assert response.data == b""
    assert response.headers["Content-Length"] == str(len(data))
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["ETag"]


def test_media_needs_the_token_and_another_orgs_path_is_404(client, stored):
    path, _ = stored
    assert client.get(path).status_code == 401
    response = client.get(path, headers=OTHER_HEADERS)
    assert response.status_code == 404 and response.get_json() == {"error": "media not found"}
    assert client.get(path.replace("/images/", "/videos/"), headers=HEADERS).status_code == 404


def test_an_object_gone_behind_its_row_is_404(app, client, stored, seaweed, bucket):
    path, _ = stored
    seaweed.client().delete_object(Bucket=bucket, Key=app.extensions["repository"].media.media_key(ORG, path))
    response = client.get(path, headers=HEADERS)
    assert response.status_code == 404 and response.get_json() == {"error": "media not found"}


def test_a_store_that_is_down_is_503_naming_it_and_then_recovers(client, stored, seaweed):
    path, data = stored
    seaweed.stop()
    try:
        response = client.get(path, headers=HEADERS)
        assert response.status_code == 503
        assert "object store" in response.get_json()["error"]
    finally:
        seaweed.start()
    assert client.get(path, headers=HEADERS).data == data


# -- large objects: memory and connections ---------------------------------------------------------------------------

LARGE = 60 * MB


@pytest.fixture
def large_video(app, tmp_path):
    """A 60 MB video published straight through the store (single uploads stop at 10 MB)."""
    source = tmp_path / "large.mp4"
    digest = hashlib.sha256()
    with open(source, "wb") as file:
        for index in range(LARGE // MB):
            block = (MP4 if index == 0 else b"") + os.urandom(MB - (len(MP4) if index == 0 else 0))
            digest.update(block)
            file.write(block)
    path = media_path("video", "0123456789abcdef-large.mp4")
    assert publish(app.extensions["repository"], ORG, path, source)
    source.unlink()
    return path, digest.hexdigest()


def resident_bytes():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_a_large_object_streams_with_flat_memory(client, large_video):
    path, sha = large_video
    # Measured from before the first download: a freed block of a greedy reader can stay resident in the allocator's
    # heap, where a later download would reuse it unseen.
    before = peak = resident_bytes()
    for _ in range(2):
        response = client.get(path, headers=HEADERS, buffered=False)
        assert response.status_code == 200
        digest, received = hashlib.sha256(), 0
        for block in response.response:
            digest.update(block)
            received += len(block)
            peak = max(peak, resident_bytes())
        response.close()
        assert (received, digest.hexdigest()) == (LARGE, sha)
    growth = peak - before
    assert growth < 30 * MB, f"resident memory grew by {growth / MB:.1f} MB while serving {LARGE // MB} MB"


def s3_connections(seaweed):
    """How many TCP connections of this process are established to the store's S3 port."""
    port = seaweed.ports["s3.port"]
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
                count += 1
    return count


def test_a_client_gone_mid_download_leaves_no_connection_open(client, large_video, seaweed):
    path, _ = large_video
    kept = []  # the responses stay referenced: only closing them, not garbage collection, may end their GETs
    for _ in range(10):
        response = client.get(path, headers=HEADERS, buffered=False)
        next(iter(response.response))
        response.close()
        kept.append(response)
    time.sleep(0.2)
    # Ten unfinished GETs left open would be ten more connections; the pool may keep a few idle ones.
    assert s3_connections(seaweed) <= 3
    ranged = client.get(path, headers={**HEADERS, "Range": f"bytes={LARGE - 5}-"})
    assert ranged.status_code == 206 and len(ranged.data) == 5
