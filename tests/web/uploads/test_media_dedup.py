"""Re-uploading the same media stores nothing new (CONTRACT 10): single uploads, chunk streams and tus uploads whose
bytes and cleaned file name match media the org has at that destination answer the existing path, on both backends,
also when two arrive at once."""
import base64
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
import requests

from service.storage import get_repository
from support.datadir import media_names_of, stored_names
from support.media import GIF, MP4, png, random_blob, sha256
from support.over_http import create_stream_over_http, send_chunk_over_http, tus_create, tus_patch
from support.tokens import HEADERS
from support.uploads import create_stream, send_chunk, upload, uploaded_path

ORG = "default"
TUS = {"Tus-Resumable": "1.0.0"}


def streamed_path(client, auth, data, destination="stepVideo", name="clip.mp4", chunk_size=1000):
    """Send `data` as a chunk stream; the path its completing chunk answers."""
    stream_id = create_stream(client, auth, data, destination, name)
    chunks = [data[at:at + chunk_size] for at in range(0, len(data), chunk_size)]
    for index, chunk in enumerate(chunks):
        response = send_chunk(client, auth, stream_id, index, len(chunks), chunk)
        assert response.status_code in (200, 201), response.get_json()
    assert response.status_code == 201
    return response.get_json()["path"]


def tus_path(client, auth, data, name="clip.mp4", destination="stepVideo"):
    """Send `data` as a tus upload in one PATCH; the media path its status then names."""
    metadata = ",".join(f"{key} {base64.b64encode(value.encode()).decode()}"
                        for key, value in {"destinationId": destination, "filename": name}.items())
    created = client.post("/uploads", headers=dict(auth, **TUS, **{"Upload-Length": str(len(data)),
                                                                   "Upload-Metadata": metadata}))
    assert created.status_code == 201
    location = created.headers["Location"]
    patched = client.patch(location, data=data, headers=dict(auth, **TUS, **{
        "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"}))
    assert patched.status_code == 204
    return client.get(location, headers=auth).get_json()["path"]


def test_a_single_upload_of_the_same_bytes_and_name_answers_the_first_path(app, client, auth):
    data = png(5000, seed=1)
    first = uploaded_path(client, auth, data, name="step 1.png")
    # The cleaned name is what counts: `step_1.png` is what `step 1.png` becomes.
    assert uploaded_path(client, auth, data, name="step_1.png") == first
    assert stored_names(app, ORG, "media", "images") == [first.rsplit("/", 1)[1]]


def test_other_bytes_another_name_or_another_org_store_new_media(app, client, auth, other_auth):
    data = png(5000, seed=1)
    first = uploaded_path(client, auth, data, name="a.png")
    others = {uploaded_path(client, auth, png(5000, seed=2), name="a.png"),
              uploaded_path(client, auth, data, name="b.png")}
    assert first not in others and len(others) == 2
    assert len(stored_names(app, ORG, "media", "images")) == 3
    # Another org never learns (nor gets) this org's path.
    theirs = uploaded_path(client, other_auth, data, name="a.png")
    assert theirs != first
    assert client.get(theirs, headers=other_auth).data == data


def test_the_three_protocols_find_each_others_media(app, client, auth):
    data = random_blob(MP4, 5500, seed=3)
    single = upload(client, auth, data, destination="stepVideo", name="clip.mp4")
    assert single.status_code == 201
    path = single.get_json()["path"]
    assert streamed_path(client, auth, data) == path
    assert tus_path(client, auth, data) == path
    assert stored_names(app, ORG, "media", "videos") == [path.rsplit("/", 1)[1]]
    assert client.get(path, headers=auth).data == data


def test_a_stream_completed_first_is_found_by_a_single_upload(app, client, auth):
    data = random_blob(MP4, 3000, seed=4)
    path = streamed_path(client, auth, data)
    assert uploaded_path(client, auth, data, destination="stepVideo", name="clip.mp4") == path
    assert stored_names(app, ORG, "media", "videos") == [path.rsplit("/", 1)[1]]


def test_destinations_sharing_the_videos_folder_do_not_mix(app, client, auth):
    # stepVideo takes MP4 and stepVideoGif GIF: the sniffed format's extension keeps their names apart.
    gif = random_blob(GIF, 3000, seed=5)
    gif_path = uploaded_path(client, auth, gif, destination="stepVideoGif", name="clip.gif")
    assert gif_path.endswith("-clip.gif")
    assert uploaded_path(client, auth, gif, destination="stepVideoGif", name="clip.gif") == gif_path


def test_media_deleted_since_come_back_at_their_path(app, client, auth):
    """Deleted (by `wis gc --delete`), the same bytes under the same name uploaded again are published at the path
    they had, by each protocol, so that revisions naming it can be restored; other bytes get a path of their own."""
    data, video = png(5000, seed=6), random_blob(MP4, 3000, seed=13)
    repo = get_repository(app)
    first, clip = uploaded_path(client, auth, data), tus_path(client, auth, video)
    for path in (first, clip):
        assert repo.media.delete(ORG, path)
        assert status_of(client, path, auth) == 404
    assert uploaded_path(client, auth, png(5000, seed=14)) != first
    assert uploaded_path(client, auth, data) == first
    assert streamed_path(client, auth, video) == clip
    assert [client.get(path, headers=auth).data for path in (first, clip)] == [data, video]
    assert repo.media.delete(ORG, clip)
    assert tus_path(client, auth, video) == clip
    assert client.get(clip, headers=auth).data == video
    assert stored_names(app, ORG, "media", "videos") == [clip.rsplit("/", 1)[1]]


def status_of(client, path, auth):
    with client.get(path, headers=auth) as response:
        return response.status_code


@pytest.mark.file_backend_only("media of a data directory written before the index existed")
def test_media_uploaded_before_the_index_are_found(app, client, auth):
    data = png(5000, seed=7)
    earlier = "/api/v1/images/00000000000000aa-photo.png"
    folder = get_repository(app).orgs_root / ORG / "media" / "images"
    folder.mkdir(parents=True)
    (folder / "00000000000000aa-photo.png").write_bytes(data)
    (folder / "00000000000000bb-photo.png").write_bytes(png(5000, seed=8))
    assert uploaded_path(client, auth, data, name="photo.png") == earlier
    later = uploaded_path(client, auth, png(5000, seed=8), name="photo.png")
    assert later == "/api/v1/images/00000000000000bb-photo.png"
    assert len(stored_names(app, ORG, "media", "images")) == 2


# -- at once, through real gunicorn (two workers) ----------------------------------------------------------------------

@pytest.fixture
def two_workers(tmp_path, backend, start_gunicorn):
    return start_gunicorn(tmp_path / "data", workers=2, backend=backend)


def at_once(count, send):
    barrier = threading.Barrier(count)

    def go(number):
        barrier.wait(timeout=30)
        return send(number)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(go, range(count)))


def test_identical_single_uploads_at_once_end_with_one_path(two_workers):
    data = png(200_000, seed=9)

    def send(_):
        response = requests.post(f"{two_workers.url}/uploads", headers=HEADERS, timeout=60,
                                 data={"destinationId": "stepImage"}, files={"file": ("pair.png", data)})
        assert response.status_code == 201, response.text
        return response.json()["path"]

    paths = set(at_once(4, send))
    assert len(paths) == 1
    assert media_names_of(two_workers, "images") == [paths.pop().rsplit("/", 1)[1]]


def test_identical_streams_completing_at_once_end_with_one_path(two_workers):
    data = random_blob(MP4, 300_000, seed=10)
    streams = [create_stream_over_http(two_workers.url, data, name="pair.mp4") for _ in range(2)]
    half = len(data) // 2
    for stream_id in streams:
        assert send_chunk_over_http(two_workers.url, stream_id, 0, 2, data[:half])[0] == 200

    def complete(number):
        status, body = send_chunk_over_http(two_workers.url, streams[number], 1, 2, data[half:])
        assert status == 201, body
        return body["path"]

    paths = set(at_once(2, complete))
    assert len(paths) == 1
    assert media_names_of(two_workers) == [paths.pop().rsplit("/", 1)[1]]


def test_identical_tus_uploads_completing_at_once_end_with_one_path(two_workers):
    data = random_blob(MP4, 300_000, seed=11)
    uploads = [tus_create(two_workers.url, data, name="pair.mp4") for _ in range(2)]

    def complete(number):
        response = tus_patch(two_workers.url, uploads[number], 0, data)
        assert response.status_code == 204, response.text
        status = requests.get(f"{two_workers.url}/uploads/{uploads[number]}", headers=HEADERS, timeout=30)
        return status.json()["path"]

    paths = set(at_once(2, complete))
    assert len(paths) == 1
    path = paths.pop()
    assert media_names_of(two_workers) == [path.rsplit("/", 1)[1]]
    assert sha256(requests.get(two_workers.url + path, headers=HEADERS, timeout=30).content) == sha256(data)


def test_answering_existing_media_starts_its_age_again(app, client, auth):
    # So that `wis gc --min-age-hours` spares media that a push is about to reference again.
    data = png(5000, seed=12)
    path = uploaded_path(client, auth, data)
    repo = get_repository(app)
    long_ago = time.time() - 30 * 24 * 3600
    if hasattr(repo, "database"):
        with repo.database.transaction() as connection:
            connection.execute("UPDATE media SET created_at = %s", (long_ago,))
    else:
        os.utime(repo.media.file_for(ORG, path), (long_ago, long_ago))
    assert dict(repo.media.list_media(ORG))[path] < long_ago + 1
    assert uploaded_path(client, auth, data) == path
    assert dict(repo.media.list_media(ORG))[path] > time.time() - 3600


def test_the_migration_gives_the_oldest_of_earlier_copies_the_identity(postgres):
    """Rows of a database written before deduplication: re-uploads left copies; the oldest is the one answered."""
    from service.storage.shared.database import MIGRATIONS, Database

    url = postgres.new_database()
    with psycopg.connect(url, autocommit=True) as connection:
        for migration in MIGRATIONS[:4]:
            connection.execute(migration)
        connection.execute("CREATE TABLE wis_schema (version integer NOT NULL); INSERT INTO wis_schema VALUES (4)")
        rows = [("acme", "/api/v1/images/00000000000000bb-photo.png", "a" * 64, 200.0),
                ("acme", "/api/v1/images/00000000000000aa-photo.png", "a" * 64, 100.0),
                ("acme", "/api/v1/images/00000000000000cc-photo.png", "b" * 64, 300.0),
                ("other", "/api/v1/images/00000000000000dd-photo.png", "a" * 64, 400.0),
                ("acme", "/api/v1/videos/noprefix.mp4", "c" * 64, 100.0)]
        for org, path, sha, created in rows:
            connection.execute("INSERT INTO media (org, path, object_key, size, sha256, created_at) "
                               "VALUES (%s, %s, 'key', 1, %s, %s)", (org, path, sha, created))
    assert Database(url).upgrade() == (4, len(MIGRATIONS))
    with psycopg.connect(url) as connection:
        identities = dict(connection.execute("SELECT org || path, identity FROM media").fetchall())
    assert identities == {
        "acme/api/v1/images/00000000000000aa-photo.png": "images/photo.png",
        "acme/api/v1/images/00000000000000bb-photo.png": None,
        "acme/api/v1/images/00000000000000cc-photo.png": "images/photo.png",
        "other/api/v1/images/00000000000000dd-photo.png": "images/photo.png",
        "acme/api/v1/videos/noprefix.mp4": None,
    }
