"""Upload endpoints through the Flask test client: single uploads, chunked streams, media serving."""
import base64
import errno
import io
import os
import re
import time

import pytest

from service import create_app
from service.errors import disk_errors
from service.domain import uploads
from service.storage import SWEEP_INTERVAL_SECONDS, get_repository

from service.storage.common.incoming import IncomingFile
from service.interface import MB, TOKEN_HEADER
from support.datadir import stored_names
from support.media import GIF, JPEG, MP4, PNG, blob, sha256
from support.tokens import TOKENS
from support.uploads import create_stream, expire_every_stream, send_chunk, stream_status, upload

def split(data, size):
    return [data[i:i + size] for i in range(0, len(data), size)]


# -- single-request upload -------------------------------------------------------------------------

def test_single_upload_returns_a_path_serving_the_same_bytes(client, auth):
    data = blob(PNG, 5000)
    response = upload(client, auth, data, sha=sha256(data))
    assert response.status_code == 201
    path = response.get_json()["path"]
    assert re.fullmatch(r"/api/v1/images/[0-9a-f]{16}-photo\.png", path)
    media = client.get(path, headers=auth)
    assert media.status_code == 200
    assert media.data == data
    assert media.headers["Content-Type"] == "image/png"
    assert media.headers["X-Content-Type-Options"] == "nosniff"
    assert media.headers["ETag"]


@pytest.mark.parametrize("destination, magic, name, segment, extension, content_type", [
    ("stepImage", JPEG, "a.jpeg", "images", ".jpg", "image/jpeg"),
    ("stepImage", PNG, "a.jpg", "images", ".png", "image/png"),
    ("stepVideo", MP4, "a.mov", "videos", ".mp4", "video/mp4"),
    ("stepVideoGif", GIF, "a", "videos", ".gif", "image/gif"),
])
def test_format_is_sniffed_and_decides_extension_and_content_type(
        client, auth, destination, magic, name, segment, extension, content_type):
    data = blob(magic, 3000)
    path = upload(client, auth, data, destination, name).get_json()["path"]
    assert path.startswith(f"/api/v1/{segment}/") and path.endswith("-a" + extension)
    media = client.get(path, headers=auth)
    assert media.headers["Content-Type"] == content_type and media.data == data


@pytest.mark.parametrize("destination, magic, accepted", [
    ("stepImage", GIF, "JPEG or PNG"),
    ("stepImage", b"<svg xmlns=", "JPEG or PNG"),
    ("stepVideo", PNG, "MP4"),
    ("stepVideoGif", MP4, "GIF"),
])
def test_wrong_format_is_refused_naming_the_accepted_ones(app, client, auth, destination, magic, accepted):
    response = upload(client, auth, blob(magic, 100), destination, "x.png")
    assert response.status_code == 400
    assert f"{destination} accepts {accepted} only" in response.get_json()["error"]
    assert stored_names(app, "default", "media") == []


def test_exactly_the_destination_limit_is_accepted(app, client, auth):
    data = blob(PNG, 8 * MB)
    response = upload(client, auth, data)
    assert response.status_code == 201
    path = response.get_json()["path"]
    assert stored_names(app, "default", "media") == [path.rsplit("/", 1)[1]]
    assert client.get(path, headers=auth).get_data() == data


@pytest.mark.parametrize("destination, magic, size, message", [
    ("stepImage", PNG, 8 * MB + 1, "file of size 8.1MB is larger than 8MB"),
    ("stepImage", PNG, 10 * MB + 1, "file of size 10.1MB is larger than 8MB"),
    ("stepVideo", MP4, 10 * MB + 1, "file of size 10.1MB is larger than 10MB"),
])
def test_too_large_single_upload_is_413_with_the_contract_message(app, client, auth, destination, magic, size,
                                                                   message):
    response = upload(client, auth, blob(magic, size), destination)
    assert response.status_code == 413
    assert response.get_json() == {"error": message}
    assert stored_names(app, "default", "media") == []


@pytest.mark.parametrize("destination, magic, size, message", [
    # Breaks 10 MB and 8 MB: the smaller limit is named, and the size is the file's (its body rounds to 10.3MB).
    ("stepImage", PNG, 10_695_475, "file of size 10.2MB is larger than 8MB"),
    ("stepVideo", MP4, 11 * MB, "file of size 11MB is larger than 10MB"),
    ("stepVideoGif", GIF, 31 * MB, "file of size 31MB is larger than 10MB"),
])
def test_a_body_over_the_request_limit_names_the_size_of_its_file(app, client, auth, destination, magic, size,
                                                                  message):
    response = upload(client, auth, blob(magic, size), destination)
    assert response.status_code == 413
    assert response.get_json() == {"error": message}
    assert stored_names(app, "default", "media") == []


def test_a_file_sent_before_its_destination_is_measured_against_the_request_limit(client, auth):
    data = blob(PNG, 10_695_475)
    response = client.post("/uploads", headers=auth, data={"file": (io.BytesIO(data), "big.png")})
    assert response.status_code == 413
    assert response.get_json() == {"error": "file of size 10.2MB is larger than 10MB"}


def test_a_body_over_the_read_limit_is_refused_before_it_is_read(client, auth):
    data = blob(MP4, 33 * MB)
    response = upload(client, auth, data, "stepVideo")
    assert response.status_code == 413
    # Not read, so the size of the whole body stands in for the file's.
    assert re.fullmatch(r"file of size 33\.1MB is larger than 10MB", response.get_json()["error"])


def test_form_fields_that_make_the_body_too_large_are_a_413_about_the_body(app, client, auth):
    fields = {f"note{i}": "n" * 60_000 for i in range(3)}
    response = upload(client, auth, blob(PNG, 10 * MB), "stepVideo", **fields)
    assert response.status_code == 413
    size = response.request.content_length
    assert response.get_json() == {"error": f"request body of {size} bytes is larger than the limit of 10551296 bytes: "
                                            "at most 10 MB of file and 64 KB of form fields"}
    assert stored_names(app, "default", "media") == []


def test_sha_of_a_single_upload_is_checked(app, client, auth):
    data = blob(PNG, 1000)
    response = upload(client, auth, data, sha=sha256(data + b"x"))
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("sha: ")
    assert stored_names(app, "default", "media") == []


@pytest.mark.parametrize("fields, named", [
    ({"destinationId": "stepImage", "sha": "abc"}, "sha"),
    ({"destinationId": "stepImage", "sha": "g" * 64}, "sha"),
    ({"destinationId": "stepAudio"}, "destinationId"),
    ({}, "destinationId"),
    ({"destinationId": "stepImage", "colour": "red"}, "colour"),
])
def test_bad_single_upload_fields_are_400_naming_the_field(client, auth, fields, named):
    form = {"file": (io.BytesIO(blob(PNG, 100)), "x.png"), **fields}
    response = client.post("/uploads", headers=auth, data=form)
    assert response.status_code == 400
    assert response.get_json()["error"].startswith(f"{named}: ")


def test_missing_file_is_400(client, auth):
    response = client.post("/uploads", headers=auth, data={"destinationId": "stepImage", "file": "not a file part"},
                           content_type="multipart/form-data")
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("file: ")


def test_unsupported_content_type_is_400(client, auth):
    response = client.post("/uploads", headers=auth, data=b"raw", content_type="application/octet-stream")
    assert response.status_code == 400
    assert "multipart/form-data" in response.get_json()["error"]


@pytest.mark.parametrize("name", ["../../../../etc/passwd.png", "..\\..\\evil.png", "..", "a/../../b.png", "\x00.png"])
def test_file_name_traversal_is_neutralised(app, client, auth, name):
    response = upload(client, auth, blob(PNG, 100), name=name)
    assert response.status_code == 201
    path = response.get_json()["path"]
    media_name = path.rsplit("/", 1)[1]
    assert re.fullmatch(r"[0-9a-f]{16}-[A-Za-z0-9._-]+\.png", media_name) and ".." not in media_name
    assert stored_names(app, "default", "media", "images") == [media_name]


# -- media serving ---------------------------------------------------------------------------------

@pytest.fixture
def stored(client, auth):
    data = blob(PNG, 4096)
    return upload(client, auth, data).get_json()["path"], data


def test_media_range_request_is_206(client, auth, stored):
    path, data = stored
    response = client.get(path, headers={**auth, "Range": "bytes=100-199"})
    assert response.status_code == 206
    assert response.data == data[100:200]
    assert response.headers["Content-Range"] == f"bytes 100-199/{len(data)}"


def test_media_etag_answers_304(client, auth, stored):
    path, _ = stored
    etag = client.get(path, headers=auth).headers["ETag"]
    assert client.get(path, headers={**auth, "If-None-Match": etag}).status_code == 304


def test_media_head(client, auth, stored):
    path, data = stored
    response = client.head(path, headers=auth)
    assert response.status_code == 200
    assert response.data == b""
    assert response.headers["Content-Length"] == str(len(data))
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_media_of_another_org_is_404(client, other_auth, stored):
    path, _ = stored
    response = client.get(path, headers=other_auth)
    assert response.status_code == 404


@pytest.mark.parametrize("suffix", ["..%2f..%2fdefault-token", "..", "%2e%2e%2f%2e%2e%2fstreams", ".incoming",
                                    "..%2fvideos%2fx.mp4", "nope.png"])
def test_media_path_traversal_is_404(client, auth, stored, suffix):
    assert client.get(f"/api/v1/images/{suffix}", headers=auth).status_code == 404


def test_image_is_not_served_under_videos(client, auth, stored):
    path, _ = stored
    assert client.get(path.replace("/images/", "/videos/"), headers=auth).status_code == 404


# -- chunked streams -------------------------------------------------------------------------------

def test_stream_completes_from_chunks_sent_out_of_order(client, auth):
    data = blob(MP4, 50_000)
    chunks = split(data, 12_000)
    stream_id = create_stream(client, auth, data)
    assert re.fullmatch(r"[0-9a-f]{32}", stream_id)
    for index in (3, 1, 4, 2):
        response = send_chunk(client, auth, stream_id, index, len(chunks), chunks[index])
        assert response.status_code == 200
        assert response.get_json() == {"streamId": stream_id, "chunkIndex": index}
    response = send_chunk(client, auth, stream_id, 0, len(chunks), chunks[0], sha=sha256(chunks[0]))
    assert response.status_code == 201
    path = response.get_json()["path"]
    assert re.fullmatch(r"/api/v1/videos/[0-9a-f]{16}-clip\.mp4", path)
    assert client.get(path, headers=auth).data == data


def test_resending_any_chunk_after_completion_answers_the_same_path(app, client, auth):
    data = blob(MP4, 3000)
    chunks = split(data, 1000)
    stream_id = create_stream(client, auth, data)
    path = [send_chunk(client, auth, stream_id, i, 3, c) for i, c in enumerate(chunks)][-1].get_json()["path"]
    for index in (2, 0):
        response = send_chunk(client, auth, stream_id, index, 3, chunks[index])
        assert response.status_code == 201
        assert response.get_json() == {"path": path}
    assert stored_names(app, "default", "media") == [path.rsplit("/", 1)[1]]
    assert client.get(path, headers=auth).get_data() == data


def test_resending_a_chunk_before_completion_replaces_it(client, auth):
    data = blob(MP4, 3000)
    chunks = split(data, 1000)
    stream_id = create_stream(client, auth, data)
    assert send_chunk(client, auth, stream_id, 0, 3, chunks[0]).status_code == 200
    assert send_chunk(client, auth, stream_id, 1, 3, b"corrupted in transit").status_code == 200
    assert send_chunk(client, auth, stream_id, 1, 3, chunks[1]).status_code == 200
    assert send_chunk(client, auth, stream_id, 0, 3, chunks[0]).status_code == 200
    response = send_chunk(client, auth, stream_id, 2, 3, chunks[2])
    assert response.status_code == 201
    assert client.get(response.get_json()["path"], headers=auth).data == data


def test_chunk_sha_mismatch_is_400_and_the_stream_stays_usable(client, auth):
    data = blob(MP4, 2000)
    chunks = split(data, 1000)
    stream_id = create_stream(client, auth, data)
    response = send_chunk(client, auth, stream_id, 0, 2, chunks[0], sha=sha256(b"something else"))
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("sha: ")
    assert client.get(f"/uploads/{stream_id}", headers=auth).get_json()["receivedChunks"] == []
    assert send_chunk(client, auth, stream_id, 0, 2, chunks[0], sha=sha256(chunks[0])).status_code == 200
    assert send_chunk(client, auth, stream_id, 1, 2, chunks[1], sha=sha256(chunks[1])).status_code == 201


def test_whole_file_sha_mismatch_discards_the_stream(app, client, auth):
    data = blob(MP4, 2000)
    stream_id = create_stream(client, auth, data)
    wrong = b"X" * 1000
    send_chunk(client, auth, stream_id, 1, 2, wrong)
    response = send_chunk(client, auth, stream_id, 0, 2, data[:1000])
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("sha: ")
    assert client.get(f"/uploads/{stream_id}", headers=auth).status_code == 404
    assert send_chunk(client, auth, stream_id, 1, 2, data[1000:]).status_code == 404
    assert stored_names(app, "default", "media") == []
    assert stored_names(app, "default", "streams") == []


def test_size_mismatch_on_completion_discards_the_stream(client, auth):
    data = blob(MP4, 2000)
    stream_id = create_stream(client, auth, data)
    send_chunk(client, auth, stream_id, 0, 2, data[:1000])
    response = send_chunk(client, auth, stream_id, 1, 2, data[1000:1500])
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("fileSize: ")
    assert client.get(f"/uploads/{stream_id}", headers=auth).status_code == 404


def test_wrong_format_at_chunk_0_is_400_naming_the_accepted_formats(client, auth):
    data = blob(MP4, 2000)
    stream_id = create_stream(client, auth, data)
    response = send_chunk(client, auth, stream_id, 0, 2, blob(PNG, 1000))
    assert response.status_code == 400
    assert "stepVideo accepts MP4 only" in response.get_json()["error"]
    assert send_chunk(client, auth, stream_id, 0, 2, data[:1000]).status_code == 200


TINY_PNG = blob(PNG, 28)
# Chunks of a 28-byte file whose chunk 0 is shorter than any format signature (totalChunks may be up to fileSize).
TINY_CUTS = [(0, 4), (4, 10), (10, 20), (20, 28)]


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 1, 0, 2), (2, 3, 1, 0)])
def test_a_chunk_0_shorter_than_a_signature_is_accepted_and_the_format_decided_by_the_whole_file(app, client, auth,
                                                                                                   order):
    """Chunk 0 alone was sniffed: a 4-byte chunk 0 of a PNG was refused as not a recognised file, so the stream could
    never complete."""
    stream_id = create_stream(client, auth, TINY_PNG, destination="stepImage", name="tiny.png")
    answers = [send_chunk(client, auth, stream_id, index, 4, TINY_PNG[slice(*TINY_CUTS[index])]) for index in order]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 201]
    path = answers[-1].get_json()["path"]
    assert path.endswith("-tiny.png")
    assert client.get(path, headers=auth).data == TINY_PNG


@pytest.mark.parametrize("data, what", [
    (blob(MP4, 28), "an MP4 file"),
    (b"plain text, not an image!!!!", "not a recognised image or video file"),
])
def test_a_file_whose_short_chunk_0_hid_a_wrong_format_is_refused_on_completion(app, client, auth, data, what):
    stream_id = create_stream(client, auth, data, destination="stepImage", name="tiny.png")
    for index in (0, 1, 2):
        assert send_chunk(client, auth, stream_id, index, 4, data[slice(*TINY_CUTS[index])]).status_code == 200
    response = send_chunk(client, auth, stream_id, 3, 4, data[slice(*TINY_CUTS[3])])
    assert response.status_code == 400
    assert response.get_json() == {"error": f"file: stepImage accepts JPEG or PNG only; this is {what}; "
                                            "the stream is discarded"}
    assert client.get(f"/uploads/{stream_id}", headers=auth).status_code == 404
    assert stored_names(app, "default", "media") == []
    assert stored_names(app, "default", "streams") == []


def test_a_chunk_0_replaced_by_a_shorter_one_is_sniffed_again_on_completion(app, client, auth):
    """The format a long chunk 0 showed does not outlive it: the file that completes is sniffed from its own bytes."""
    final = b"XXXX" + TINY_PNG[4:]
    stream_id = create_stream(client, auth, final, destination="stepImage", name="tiny.png")
    assert send_chunk(client, auth, stream_id, 0, 4, TINY_PNG[:12]).status_code == 200
    assert send_chunk(client, auth, stream_id, 0, 4, final[:4]).status_code == 200
    for index in (1, 2):
        assert send_chunk(client, auth, stream_id, index, 4, final[slice(*TINY_CUTS[index])]).status_code == 200
    response = send_chunk(client, auth, stream_id, 3, 4, final[slice(*TINY_CUTS[3])])
    assert response.status_code == 400
    assert "this is not a recognised image or video file" in response.get_json()["error"]
    assert stored_names(app, "default", "media") == []


@pytest.mark.parametrize("index, total, named", [
    ("x", "2", "chunkIndex"), ("1.5", "2", "chunkIndex"), ("", "2", "chunkIndex"), ("-1", "2", "chunkIndex"),
    ("2", "2", "chunkIndex"), ("0", "two", "totalChunks"), ("0", "0", "totalChunks"), ("0", "2001", "totalChunks"),
])
def test_bad_chunk_fields_are_400_naming_the_field(client, auth, index, total, named):
    stream_id = create_stream(client, auth, blob(MP4, 2000))
    form = {"chunkIndex": index, "totalChunks": total, "file": (io.BytesIO(blob(MP4, 1000)), "blob")}
    response = client.patch(f"/uploads/{stream_id}", headers=auth, data=form)
    assert response.status_code == 400
    assert response.get_json()["error"].startswith(f"{named}: ")


def test_total_chunks_may_not_change(client, auth):
    data = blob(MP4, 3000)
    stream_id = create_stream(client, auth, data)
    send_chunk(client, auth, stream_id, 0, 3, data[:1000])
    response = send_chunk(client, auth, stream_id, 1, 4, data[1000:2000])
    assert response.status_code == 400
    assert response.get_json()["error"] == "totalChunks: this stream has 3 chunks, not 4"


def test_received_bytes_may_not_exceed_file_size(client, auth):
    data = blob(MP4, 2000)
    stream_id = create_stream(client, auth, data)
    send_chunk(client, auth, stream_id, 0, 2, data[:1000])
    response = send_chunk(client, auth, stream_id, 1, 2, b"y" * 1001)
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("file: ")


def test_chunk_over_10mb_is_413(client, auth):
    stream_id = create_stream(client, auth, blob(MP4, 30 * MB))
    response = send_chunk(client, auth, stream_id, 1, 3, b"z" * (10 * MB + 1))
    assert response.status_code == 413
    assert response.get_json() == {"error": "file of size 10.1MB is larger than 10MB"}


def test_chunk_body_over_the_request_limit_names_the_size_of_its_chunk(app, client, auth):
    stream_id = create_stream(client, auth, blob(MP4, 30 * MB))
    response = send_chunk(client, auth, stream_id, 1, 3, b"z" * 10_695_475)
    assert response.status_code == 413
    assert response.get_json() == {"error": "file of size 10.2MB is larger than 10MB"}
    assert client.get(f"/uploads/{stream_id}", headers=auth).get_json()["receivedChunks"] == []


def test_stream_over_the_destination_limit_is_413_at_creation(client, auth):
    response = client.post("/uploads", headers=auth, json={
        "destinationId": "stepVideoGif", "fileName": "a.gif", "fileSize": 150 * MB + 1, "sha": "0" * 64})
    assert response.status_code == 413
    assert response.get_json() == {"error": "file of size 150.1MB is larger than 150MB"}


# A JSON integer of more digits than Python reads as a number (sys.get_int_max_str_digits(), 4300 by default).
UNREADABLE = "9" * 5000


@pytest.mark.parametrize("members, status, error", [
    (f'"fileSize": {UNREADABLE}', 413, "file is larger than 500MB"),
    (f'"fileSize": {2 ** 70}', 413, "file of size 1125899906842624MB is larger than 500MB"),
    (f'"fileSize": -{UNREADABLE}', 400, "fileSize: must be at least 1 byte"),
    (f'"fileSize": [{UNREADABLE}]', 400, "fileSize: must be an integer"),
    (f'"fileSize": 10, "fileName": {UNREADABLE}', 400, "fileName: must be a string"),
    (f'"fileSize": 10, "bogus": {UNREADABLE}', 400, "bogus: unknown field"),
])
def test_a_stream_creation_with_a_number_too_long_to_read_is_answered_about_its_field(client, auth, members, status,
                                                                                      error):
    """Python's limit on the digits of an int made the whole body unreadable: 400 'request body: must be a JSON
    object', which the client cannot act on."""
    fields = '"destinationId": "stepVideo", "sha": "' + "0" * 64 + '"'
    if '"fileName"' not in members:
        fields += ', "fileName": "a.mp4"'
    response = client.post("/uploads", headers=auth, data="{" + fields + ", " + members + "}",
                           content_type="application/json")
    assert (response.status_code, response.get_json()) == (status, {"error": error})


@pytest.mark.parametrize("body, named", [
    ({"fileName": "a", "fileSize": 1, "sha": "0" * 64}, "destinationId"),
    ({"destinationId": "nope", "fileName": "a", "fileSize": 1, "sha": "0" * 64}, "destinationId"),
    ({"destinationId": "stepVideo", "fileSize": 1, "sha": "0" * 64}, "fileName"),
    ({"destinationId": "stepVideo", "fileName": "a", "fileSize": "1", "sha": "0" * 64}, "fileSize"),
    ({"destinationId": "stepVideo", "fileName": "a", "fileSize": 1.5, "sha": "0" * 64}, "fileSize"),
    ({"destinationId": "stepVideo", "fileName": "a", "fileSize": 0, "sha": "0" * 64}, "fileSize"),
    ({"destinationId": "stepVideo", "fileName": "a", "fileSize": 1, "sha": "0" * 63}, "sha"),
    ({"destinationId": "stepVideo", "fileName": "a", "fileSize": 1}, "sha"),
    ([1, 2], "request body"),
])
def test_bad_stream_creation_is_400_naming_the_field(client, auth, body, named):
    response = client.post("/uploads", headers=auth, json=body)
    assert response.status_code == 400
    assert response.get_json()["error"].startswith(f"{named}: ")


def test_stream_status_tells_what_to_resend(client, auth):
    data = blob(MP4, 2500)
    stream_id = create_stream(client, auth, data, name="line 3.mp4")
    send_chunk(client, auth, stream_id, 2, 3, data[2000:])
    send_chunk(client, auth, stream_id, 0, 3, data[:1000])
    status = client.get(f"/uploads/{stream_id}", headers=auth).get_json()
    expires = status.pop("expiresAt")
    assert status == {"streamId": stream_id, "destinationId": "stepVideo", "fileName": "line 3.mp4",
                      "fileSize": 2500, "totalChunks": 3, "receivedChunks": [0, 2], "receivedBytes": 1500,
                      "state": "open", "protocol": "chunks"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", expires)
    path = send_chunk(client, auth, stream_id, 1, 3, data[1000:2000]).get_json()["path"]
    status = client.get(f"/uploads/{stream_id}", headers=auth).get_json()
    assert (status["state"], status["path"], status["receivedChunks"], status["receivedBytes"]) == (
        "complete", path, [0, 1, 2], 2500)


def test_new_stream_status_before_any_chunk(client, auth):
    stream_id = create_stream(client, auth, blob(MP4, 100))
    status = client.get(f"/uploads/{stream_id}", headers=auth).get_json()
    assert (status["totalChunks"], status["receivedChunks"], status["receivedBytes"]) == (None, [], 0)


def test_delete_aborts_a_stream(app, client, auth):
    data = blob(MP4, 2000)
    stream_id = create_stream(client, auth, data)
    send_chunk(client, auth, stream_id, 0, 2, data[:1000])
    assert client.delete(f"/uploads/{stream_id}", headers=auth).status_code == 204
    assert client.get(f"/uploads/{stream_id}", headers=auth).get_json() == {"error": "stream not found"}
    assert send_chunk(client, auth, stream_id, 1, 2, data[1000:]).status_code == 404
    assert client.delete(f"/uploads/{stream_id}", headers=auth).status_code == 404
    assert stored_names(app, "default", "streams") == []


@pytest.mark.parametrize("protocol", ["chunks", "tus"])
def test_delete_of_an_expired_stream_is_404_before_any_sweep(app, client, auth, protocol):
    """The file backend's DELETE did not check the expiry: 204 for a stream that every other request answers 404 for."""
    data = blob(MP4, 2000)
    headers = dict(auth)
    if protocol == "tus":
        headers["Tus-Resumable"] = "1.0.0"
        metadata = "destinationId " + base64.b64encode(b"stepVideo").decode()
        response = client.post("/uploads", headers=dict(headers, **{"Upload-Length": str(len(data)),
                                                                    "Upload-Metadata": metadata}))
        assert response.status_code == 201
        stream_id = response.headers["Location"].rsplit("/", 1)[1]
    else:
        stream_id = create_stream(client, auth, data)
        assert send_chunk(client, auth, stream_id, 0, 2, data[:1000]).status_code == 200
    expire_every_stream(get_repository(app))
    # The first request after the expiry, so that no sweep (due after it, by the moved clock) has removed the stream.
    response = client.delete(f"/uploads/{stream_id}", headers=headers)
    assert (response.status_code, response.get_json()) == (404, {"error": "stream not found"})
    assert client.get(f"/uploads/{stream_id}", headers=auth).status_code == 404
    assert client.delete(f"/uploads/{stream_id}", headers=headers).status_code == 404


def test_streams_of_another_org_are_not_found(client, auth, other_auth):
    data = blob(MP4, 2000)
    stream_id = create_stream(client, auth, data)
    for response in (client.get(f"/uploads/{stream_id}", headers=other_auth),
                     send_chunk(client, other_auth, stream_id, 0, 2, data[:1000]),
                     client.delete(f"/uploads/{stream_id}", headers=other_auth)):
        assert response.status_code == 404
        assert response.get_json() == {"error": "stream not found"}
    assert send_chunk(client, auth, stream_id, 0, 2, data[:1000]).status_code == 200


@pytest.mark.parametrize("stream_id", ["0" * 32, "..%2f..%2fdefault-token", "%2e%2e", "A" * 32, "0" * 31 + "g"])
def test_unknown_or_malformed_stream_ids_are_404(client, auth, stream_id):
    for response in (client.get(f"/uploads/{stream_id}", headers=auth),
                     send_chunk(client, auth, stream_id, 0, 1, blob(MP4, 10)),
                     client.delete(f"/uploads/{stream_id}", headers=auth)):
        assert response.status_code == 404


def test_expired_streams_are_swept_and_then_not_found(app, client, auth):
    data = blob(MP4, 2000)
    stream_id = create_stream(client, auth, data)
    send_chunk(client, auth, stream_id, 0, 2, data[:1000])
    repo = get_repository(app)
    assert repo.sweep() == 0
    expire_every_stream(repo)
    assert repo.sweep() == 1
    assert client.get(f"/uploads/{stream_id}", headers=auth).get_json() == {"error": "stream not found"}
    assert stored_names(app, "default", "streams") == []


def test_idle_stream_is_not_found_once_past_its_expiry(tmp_path, auth):
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "STREAM_TTL_HOURS": 1.0})
    client = app.test_client()
    stream_id = create_stream(client, auth, blob(MP4, 100))
    directory = get_repository(app).orgs_root / "default" / "streams" / stream_id
    os.utime(directory, (time.time() - 3601, time.time() - 3601))
    assert client.get(f"/uploads/{stream_id}", headers=auth).status_code == 404


def test_the_first_request_after_start_up_sweeps_expired_streams(tmp_path, auth):
    config = {"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "STREAM_TTL_HOURS": 1.0}
    stream_id = create_stream(create_app(config).test_client(), auth, blob(MP4, 100))
    directory = tmp_path / "data" / "orgs" / "default" / "streams" / stream_id
    os.utime(directory, (time.time() - 3601, time.time() - 3601))
    restarted = create_app(config)
    assert directory.exists()  # building the app does no storage work
    restarted.test_client().get("/healthz").close()  # swept once the answer has gone out
    assert not directory.exists()


# -- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, url", [
    ("post", "/uploads"), ("patch", "/uploads/" + "0" * 32), ("get", "/uploads/" + "0" * 32),
    ("delete", "/uploads/" + "0" * 32), ("get", "/api/v1/images/x.png"), ("head", "/api/v1/videos/x.mp4"),
])
@pytest.mark.parametrize("headers", [{}, {TOKEN_HEADER: "wrong-token"}])
def test_every_upload_endpoint_needs_a_token(client, method, url, headers):
    response = getattr(client, method)(url, headers=headers)
    assert response.status_code == 401
    if method != "head":
        # Only /graph/v2 adds a GraphQL `errors` list; uploads and media keep the house shape alone.
        assert set(response.get_json()) == {"error"}


def test_disk_full_is_507_and_leaves_nothing(app, client, auth, monkeypatch):
    def disk_full(self, data):
        with disk_errors():
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(IncomingFile, "write", disk_full)
    response = upload(client, auth, blob(PNG, 1000))
    assert response.status_code == 507
    assert stored_names(app, "default", "media") == []


def test_unexpected_failure_is_500_without_traceback(client, auth, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(uploads, "create_stream", broken)
    response = client.post("/uploads", headers=auth, json={
        "destinationId": "stepVideo", "fileName": "a", "fileSize": 1, "sha": "0" * 64})
    assert response.status_code == 500
    assert response.get_json() == {"error": "internal server error"}


def test_requests_sweep_expired_streams_once_the_interval_has_passed(tmp_path, auth, monkeypatch):
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "STREAM_TTL_HOURS": 1.0})
    client = app.test_client()
    stream_id = create_stream(client, auth, blob(MP4, 100))  # the first request: its sweep found nothing
    directory = get_repository(app).orgs_root / "default" / "streams" / stream_id
    os.utime(directory, (time.time() - 3601, time.time() - 3601))
    client.get("/uploads/" + "0" * 32, headers=auth).close()
    assert directory.exists()  # the interval since the last sweep has not passed yet
    later = time.time() + SWEEP_INTERVAL_SECONDS
    monkeypatch.setattr(get_repository(app), "clock", lambda: later)
    client.get("/uploads/" + "0" * 32, headers=auth).close()
    assert not directory.exists()


def test_client_gone_mid_chunk_leaves_no_part_and_the_stream_usable(app, client, auth, monkeypatch, backend):
    started = []
    real_new_chunk_file = uploads.new_chunk_file

    def new_chunk_file(*args):
        started.append(real_new_chunk_file(*args))
        return started[-1]

    monkeypatch.setattr(uploads, "new_chunk_file", new_chunk_file)
    data = blob(MP4, 2000)
    stream_id = create_stream(client, auth, data)
    boundary = "cut-here"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"chunkIndex\"\r\n\r\n0\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"totalChunks\"\r\n\r\n2\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"blob\"\r\n\r\n").encode()
    sent = head + data[:500]
    response = client.patch(f"/uploads/{stream_id}", headers=auth, input_stream=io.BytesIO(sent),
                            content_type=f"multipart/form-data; boundary={boundary}", content_length=len(sent) + 600)
    assert response.status_code == 400
    assert started[0].size == 500  # half a chunk had been written to disk when the body ended
    # Its bookkeeping only: nothing of the cut-off chunk (the shared backend keeps the row, nothing in the bucket).
    assert stored_names(app, "default", "streams", stream_id) == (
        ["ledger", "meta.json", "prefix"] if backend.name == "file" else [stream_id])
    assert send_chunk(client, auth, stream_id, 0, 2, data[:1000]).status_code == 200
    assert send_chunk(client, auth, stream_id, 1, 2, data[1000:]).status_code == 201


def multipart_body(boundary, *parts):
    body = b""
    for disposition, content in parts:
        body += f"--{boundary}\r\nContent-Disposition: form-data; {disposition}\r\n\r\n".encode() + content + b"\r\n"
    return body + f"--{boundary}--\r\n".encode()


def test_a_form_field_over_64_kb_is_413_naming_it(client, auth):
    body = multipart_body("b", ('name="destinationId"', b"x" * (64 * 1024 + 1)),
                          ('name="file"; filename="x.png"', blob(PNG, 100)))
    response = client.post("/uploads", headers=auth, data=body, content_type="multipart/form-data; boundary=b")
    assert response.status_code == 413
    assert response.get_json() == {"error": "destinationId: a form field is at most 64 KB"}


def test_a_form_of_more_than_100_parts_is_400(client, auth):
    parts = [(f'name="f{i}"', b"v") for i in range(101)] + [('name="file"; filename="x.png"', blob(PNG, 100))]
    response = client.post("/uploads", headers=auth, data=multipart_body("b", *parts),
                           content_type="multipart/form-data; boundary=b")
    assert response.status_code == 400
    assert response.get_json() == {"error": "the multipart/form-data body has more than 100 parts"}


STRAY_FILE_PARTS = ["sha", "bogus"]


def stray_file_error(name):
    return {"error": f"{name}: must be a form field, not a file (only `file` is sent with a filename)"}


@pytest.mark.parametrize("name", STRAY_FILE_PARTS)
def test_a_single_upload_with_a_file_part_not_named_file_is_400_naming_it(app, client, auth, name):
    """A `sha` sent as a file part was never checked, and any other file part was accepted silently."""
    body = multipart_body("b", ('name="destinationId"', b"stepImage"), (f'name="{name}"; filename="s.txt"', b"0" * 64),
                          ('name="file"; filename="a.png"', blob(PNG, 1000)))
    response = client.post("/uploads", headers=auth, data=body, content_type="multipart/form-data; boundary=b")
    assert response.status_code == 400
    assert response.get_json() == stray_file_error(name)
    assert stored_names(app, "default", "media") == []


@pytest.mark.parametrize("stray_first", [True, False], ids=["stray-before-file", "stray-after-file"])
@pytest.mark.parametrize("name", STRAY_FILE_PARTS)
def test_a_chunk_with_a_file_part_not_named_file_is_400_and_stores_nothing(app, client, auth, backend, name,
                                                                            stray_first):
    """The stray part took the in-order append slot (the real chunk went aside), and the chunk was acknowledged."""
    data = blob(MP4, 2000)
    stream_id = create_stream(client, auth, data)
    parts = [('name="chunkIndex"', b"0"), ('name="totalChunks"', b"2"), ('name="file"; filename="c"', data[:1000])]
    parts.insert(2 if stray_first else 3, (f'name="{name}"; filename="s.txt"', b"0" * 64))
    response = client.patch(f"/uploads/{stream_id}", headers=auth, data=multipart_body("b", *parts),
                            content_type="multipart/form-data; boundary=b")
    assert response.status_code == 400
    assert response.get_json() == stray_file_error(name)
    status = stream_status(client, auth, stream_id)
    assert (status["receivedChunks"], status["receivedBytes"]) == ([], 0)
    assert stored_names(app, "default", "streams", stream_id) == (
        ["ledger", "meta.json", "prefix"] if backend.name == "file" else [stream_id])
    assert send_chunk(client, auth, stream_id, 0, 2, data[:1000]).status_code == 200
    response = send_chunk(client, auth, stream_id, 1, 2, data[1000:])
    assert response.status_code == 201
    assert client.get(response.get_json()["path"], headers=auth).data == data


@pytest.mark.parametrize("content_type, named", [
    ("multipart/form-data", "no boundary"),
    ("multipart/form-data; boundary=other", "malformed"),
])
def test_a_body_that_is_not_the_multipart_it_claims_is_400(client, auth, content_type, named):
    body = multipart_body("b", ('name="destinationId"', b"stepImage"), ('name="file"; filename="x.png"', blob(PNG, 9)))
    response = client.post("/uploads", headers=auth, data=body, content_type=content_type)
    assert response.status_code == 400
    assert named in response.get_json()["error"]


def test_a_chunk_asks_once_whether_its_stream_is_a_tus_upload(client, auth, monkeypatch):
    """The view refuses a tus upload's chunk before reading its body; the store's rules do not ask again under the
    stream's lock (a stream's protocol is fixed when it is created)."""
    asked = []
    real = uploads.require_chunked
    monkeypatch.setattr(uploads, "require_chunked", lambda record: asked.append(record.protocol) or real(record))
    data = MP4 + b"x" * 100
    stream_id = create_stream(client, auth, data)
    assert send_chunk(client, auth, stream_id, 0, 2, data[:60]).status_code == 200
    assert send_chunk(client, auth, stream_id, 1, 2, data[60:]).status_code == 201
    assert asked == ["chunks", "chunks"]
