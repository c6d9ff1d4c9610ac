"""tus 1.0 on /uploads (CONTRACT 7), status by status, through real gunicorn (threaded workers, as shipped)."""
import base64
import email.utils
import hashlib
import http.client
import json
import os
import socket
import time

import pytest
import requests

from service.interface import TOKEN_HEADER
from support.datadir import stream_ids
from support.tokens import HEADERS, OTHER_TOKEN, TOKEN

AUTH = HEADERS
TUS = dict(AUTH, **{"Tus-Resumable": "1.0.0"})
OCTETS = "application/offset+octet-stream"
PNG = b"\x89PNG\r\n\x1a\n"
MP4 = b"\x00\x00\x00\x18ftypmp42"


@pytest.fixture(scope="module")
def server(threaded_server):
    return threaded_server


@pytest.fixture(scope="module")
def url(server):
    return server.url


def b64(text):
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def metadata(**pairs):
    return ",".join(f"{key} {b64(value)}" for key, value in pairs.items())


def png(size, seed=1):
    return PNG + random_bytes(size - len(PNG), seed)


def random_bytes(size, seed):
    return hashlib.shake_256(str(seed).encode()).digest(size) if size < 1 << 20 else os.urandom(size)


def create(url, data, destination="stepImage", headers=None, **extra):
    fields = dict(destinationId=destination, filename="part.png", **extra)
    response = requests.post(f"{url}/uploads", timeout=30, headers=dict(
        TUS, **{"Upload-Length": str(len(data)), "Upload-Metadata": metadata(**fields)}, **(headers or {})))
    assert response.status_code == 201, response.text
    return url + response.headers["Location"]


def patch(location, offset, body, headers=None, tus=True):
    return requests.patch(location, data=body, timeout=60, headers=dict(
        TUS if tus else AUTH, **{"Upload-Offset": str(offset), "Content-Type": OCTETS}, **(headers or {})))


def head(location, headers=None):
    return requests.head(location, timeout=30, headers=dict(TUS, **(headers or {})))


def offset_of(location):
    response = head(location)
    assert response.status_code == 200
    return int(response.headers["Upload-Offset"])


def fetch(url, path):
    response = requests.get(url + path, headers=AUTH, timeout=60)
    assert response.status_code == 200
    return response.content


def checksum(algorithm, body):
    return {"Upload-Checksum": f"{algorithm} {b64(hashlib.new(algorithm, body).digest())}"}


def assert_json_error(response, status, *fragments):
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    message = response.json()["error"]
    for fragment in fragments:
        assert fragment in message
    return message


def test_options_needs_no_token_and_announces_the_server(url):
    response = requests.options(f"{url}/uploads", timeout=30)
    assert response.status_code == 204
    assert response.headers["Tus-Resumable"] == "1.0.0"
    assert response.headers["Tus-Version"] == "1.0.0"
    assert set(response.headers["Tus-Extension"].split(",")) == {
        "creation", "creation-with-upload", "termination", "expiration", "checksum"}
    assert response.headers["Tus-Max-Size"] == "524288000"
    assert {"sha1", "sha256"} <= set(response.headers["Tus-Checksum-Algorithm"].split(","))


def test_creation_answers_location_and_expiry(url):
    before = time.time()
    response = requests.post(f"{url}/uploads", timeout=30, headers=dict(
        TUS, **{"Upload-Length": "100", "Upload-Metadata": metadata(destinationId="stepImage", filename="a.png")}))
    assert response.status_code == 201
    assert response.headers["Tus-Resumable"] == "1.0.0"
    assert response.headers["Location"].startswith("/uploads/")
    expires = email.utils.parsedate_to_datetime(response.headers["Upload-Expires"]).timestamp()
    assert before + 23.9 * 3600 < expires < time.time() + 24 * 3600 + 1


@pytest.mark.parametrize("method", ["post", "patch", "head", "delete"])
@pytest.mark.parametrize("version", [None, "0.2.2"])
def test_a_tus_request_without_tus_resumable_1_0_0_is_412(url, method, version):
    location = create(url, png(100))
    headers = dict(AUTH, **{"Upload-Length": "100", "Upload-Offset": "0", "Content-Type": OCTETS,
                            "Upload-Metadata": metadata(destinationId="stepImage")})
    if version:
        headers["Tus-Resumable"] = version
    target = f"{url}/uploads" if method == "post" else location
    response = getattr(requests, method)(target, headers=headers, timeout=30, data=b"" if method != "head" else None)
    assert response.status_code == 412
    assert response.headers["Tus-Version"] == "1.0.0"
    if method != "head":
        assert_json_error(response, 412, "Tus-Resumable", "1.0.0")
    assert offset_of(location) == 0


@pytest.mark.parametrize("method", ["post", "patch", "head"])
def test_a_tus_request_without_token_is_401(url, method):
    location = create(url, png(100))
    headers = {"Tus-Resumable": "1.0.0", "Upload-Length": "100", "Upload-Offset": "0", "Content-Type": OCTETS}
    target = f"{url}/uploads" if method == "post" else location
    response = getattr(requests, method)(target, headers=headers, timeout=30)
    assert response.status_code == 401
    if method != "head":
        assert_json_error(response, 401, TOKEN_HEADER)


@pytest.mark.parametrize("length, message", [
    (str(8 * 1024 * 1024 + 1), "file of size 8.1MB is larger than 8MB"),
    # Past 19 digits (it was a 400 'must be a non-negative integer'), up to what Python reads as a number, and past it.
    ("100000000000000000000", "file of size 95367431640625MB is larger than 8MB"),
    ("9" * 5000, "file is larger than 8MB"),
], ids=["8MB+1", "21-digits", "5000-digits"])
def test_creation_over_the_destination_limit_is_413(url, length, message):
    response = requests.post(f"{url}/uploads", timeout=30, headers=dict(
        TUS, **{"Upload-Length": length, "Upload-Metadata": metadata(destinationId="stepImage")}))
    assert assert_json_error(response, 413) == message
    assert response.headers["Tus-Resumable"] == "1.0.0"


@pytest.mark.parametrize("headers, fragment", [
    ({"Upload-Metadata": metadata(filename="x.png")}, "destinationId"),
    ({"Upload-Metadata": metadata(destinationId="stepAudio")}, "destinationId: unknown destination"),
    ({"Upload-Metadata": "destinationId c3RlcEltYWdl!!"}, "not valid base64"),
    ({"Upload-Metadata": "destinationId c3RlcEltYWdl x"}, "Upload-Metadata"),
    ({"Upload-Metadata": metadata(destinationId="stepImage", sha256="abc")}, "sha256"),
    ({"Upload-Length": "ten"}, "Upload-Length"),
    ({"Upload-Length": "0"}, "Upload-Length"),
    ({"Upload-Length": None, "Upload-Defer-Length": "1"}, "Upload-Defer-Length"),
    ({"Upload-Concat": "partial"}, "Upload-Concat"),
])
def test_bad_creation_requests_are_400_naming_the_header(url, headers, fragment):
    sent = dict(TUS, **{"Upload-Length": "100", "Upload-Metadata": metadata(destinationId="stepImage")})
    sent.update(headers)
    sent = {key: value for key, value in sent.items() if value is not None}
    response = requests.post(f"{url}/uploads", headers=sent, timeout=30)
    assert_json_error(response, 400, fragment)


def test_head_reports_offset_length_metadata_and_no_store(url):
    data = png(5000)
    location = create(url, data)
    sent_metadata = metadata(destinationId="stepImage", filename="part.png")
    assert patch(location, 0, data[:1234]).status_code == 204
    response = head(location)
    assert response.status_code == 200
    assert response.headers["Upload-Offset"] == "1234"
    assert response.headers["Upload-Length"] == "5000"
    assert response.headers["Upload-Metadata"] == sent_metadata
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Tus-Resumable"] == "1.0.0"
    assert "Upload-Expires" in response.headers and "Media-Path" not in response.headers


def test_patches_in_order_complete_with_media_path_and_status(url):
    data = png(300_000)
    location = create(url, data, sha256=hashlib.sha256(data).hexdigest())
    for start in range(0, 200_000, 100_000):
        response = patch(location, start, data[start:start + 100_000])
        assert response.status_code == 204
        assert response.headers["Upload-Offset"] == str(start + 100_000)
        assert "Media-Path" not in response.headers
    response = patch(location, 200_000, data[200_000:])
    assert response.status_code == 204
    path = response.headers["Media-Path"]
    assert path.startswith("/api/v1/images/") and path.endswith("-part.png")
    assert response.headers["Upload-Offset"] == "300000"
    assert head(location).headers["Media-Path"] == path
    assert fetch(url, path) == data
    status = requests.get(location, headers=AUTH, timeout=30).json()
    assert status["protocol"] == "tus" and status["state"] == "complete" and status["path"] == path
    assert status["receivedBytes"] == 300_000 and status["totalChunks"] is None
    # A lost answer to the completing PATCH is retried as an empty PATCH at the end: the same path.
    again = patch(location, 300_000, b"")
    assert again.status_code == 204 and again.headers["Media-Path"] == path


def test_status_of_an_open_tus_upload(url):
    data = png(1000)
    location = create(url, data)
    patch(location, 0, data[:400])
    status = requests.get(location, headers=AUTH, timeout=30).json()
    assert status["protocol"] == "tus" and status["state"] == "open"
    assert status["receivedBytes"] == 400 and status["receivedChunks"] == [] and status["totalChunks"] is None
    assert status["fileName"] == "part.png" and status["fileSize"] == 1000


@pytest.mark.parametrize("offset", [0, 99, 101, 2000])
def test_a_wrong_offset_is_409_and_appends_nothing(url, offset):
    data = png(1000)
    location = create(url, data)
    patch(location, 0, data[:100])
    response = patch(location, offset, data[offset:offset + 10] or b"x")
    assert_json_error(response, 409, "Upload-Offset", "100")
    assert response.headers["Tus-Resumable"] == "1.0.0"
    assert offset_of(location) == 100
    assert patch(location, 100, data[100:]).status_code == 204


def test_a_body_past_upload_length_is_413_and_appends_nothing(url):
    data = png(1000)
    location = create(url, data)
    response = patch(location, 0, data + b"extra")
    assert_json_error(response, 413, "Upload-Length")
    assert offset_of(location) == 0
    assert patch(location, 0, data).status_code == 204


def test_missing_offset_or_wrong_content_type_is_400(url):
    location = create(url, png(100))
    response = requests.patch(location, data=b"x", timeout=30, headers=dict(TUS, **{"Content-Type": OCTETS}))
    assert_json_error(response, 400, "Upload-Offset")
    response = requests.patch(location, data=b"x", timeout=30, headers=dict(
        TUS, **{"Content-Type": "application/octet-stream", "Upload-Offset": "0"}))
    assert_json_error(response, 400, "Content-Type", OCTETS)
    assert offset_of(location) == 0


@pytest.mark.parametrize("algorithm", ["sha256", "sha1"])
def test_checksums_verified_460_on_mismatch_and_nothing_appended(url, algorithm):
    data = png(2000)
    location = create(url, data)
    response = patch(location, 0, data[:1000], checksum(algorithm, data[:999]))
    assert_json_error(response, 460, "Upload-Checksum")
    assert offset_of(location) == 0
    response = patch(location, 0, data[:1000], checksum(algorithm, data[:1000]))
    assert response.status_code == 204 and response.headers["Upload-Offset"] == "1000"


@pytest.mark.parametrize("value, status, fragment", [
    ("md5 " + b64(hashlib.md5(b"x").digest()), 400, "md5"),
    ("crc32 AAAA", 400, "not supported"),
    ("sha256 not*base64", 400, "base64"),
])
def test_unsupported_or_malformed_checksums_are_400(url, value, status, fragment):
    location = create(url, png(100))
    response = patch(location, 0, b"x", {"Upload-Checksum": value})
    assert_json_error(response, status, "Upload-Checksum", fragment)
    assert offset_of(location) == 0


def test_whole_file_sha256_mismatch_discards_the_upload(url):
    data = png(1000)
    location = create(url, data, sha256="0" * 64)
    response = patch(location, 0, data)
    assert_json_error(response, 400, "sha256", "discarded")
    assert head(location).status_code == 404


def test_wrong_format_at_offset_0_is_400_and_appends_nothing(url):
    data = MP4 + random_bytes(500, 3)
    location = create(url, data)
    response = patch(location, 0, data)
    assert_json_error(response, 400, "stepImage accepts JPEG or PNG only", "MP4")
    assert offset_of(location) == 0
    # The decision waits for the bytes that tell: a 3-byte first PATCH is kept, the one that completes the magic
    # number is judged.
    location = create(url, png(100))
    assert patch(location, 0, MP4[:3]).status_code == 204
    assert_json_error(patch(location, 3, MP4[3:12]), 400, "MP4")
    assert offset_of(location) == 3


def test_creation_with_upload(url):
    data = png(50_000)
    fields = metadata(destinationId="stepImage", filename="whole.png")
    response = requests.post(f"{url}/uploads", data=data[:20_000], timeout=30, headers=dict(
        TUS, **{"Upload-Length": str(len(data)), "Upload-Metadata": fields, "Content-Type": OCTETS}))
    assert response.status_code == 201
    assert response.headers["Upload-Offset"] == "20000"
    location = url + response.headers["Location"]
    assert patch(location, 20_000, data[20_000:]).status_code == 204
    response = requests.post(f"{url}/uploads", data=data, timeout=30, headers=dict(
        TUS, **{"Upload-Length": str(len(data)), "Upload-Metadata": fields, "Content-Type": OCTETS}))
    assert response.status_code == 201 and response.headers["Upload-Offset"] == "50000"
    assert fetch(url, response.headers["Media-Path"]) == data


def test_creation_with_an_unfit_body_stores_nothing(url, server):
    before = stream_ids(server)
    response = requests.post(f"{url}/uploads", data=MP4 + b"x" * 100, timeout=30, headers=dict(
        TUS, **{"Upload-Length": "112", "Upload-Metadata": metadata(destinationId="stepImage"),
                "Content-Type": OCTETS}))
    assert_json_error(response, 400, "MP4")
    assert "Location" not in response.headers
    assert stream_ids(server) <= before


def _cut_off_creation(url, body, declared, padding=0):
    """Send a creation-with-upload that declares `declared` bytes of body, send only `body`, half-close the connection
    (the client still listens) and read the answer: (status, headers, JSON body). `padding` headers of 8000 bytes make
    the head long enough for the server to hand the request on before any of its body (after 64 KB)."""
    pad = "".join(f"X-Padding-{number}: {'p' * 8000}\r\n" for number in range(padding))
    request = (f"POST /uploads HTTP/1.1\r\nHost: 127.0.0.1\r\n{TOKEN_HEADER}: {TOKEN}\r\nTus-Resumable: 1.0.0\r\n"
               f"Upload-Length: {declared}\r\nUpload-Metadata: {metadata(destinationId='stepImage')}\r\n{pad}"
               f"Content-Type: {OCTETS}\r\nContent-Length: {declared}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as sock:
        sock.sendall(request + body)
        sock.shutdown(socket.SHUT_WR)
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        return answer.status, answer.headers, json.loads(answer.read())


def test_a_creation_with_upload_cut_off_keeps_what_arrived_and_says_where_to_resume(url):
    """The upload was deleted while the answer said its bytes were kept, and it had no Location to resume from."""
    data = png(200_000, seed=11)
    status, headers, answer = _cut_off_creation(url, data[:100_000], len(data))
    assert status == 400
    assert answer == {"error": "the body ended before its Content-Length; the 100000 bytes that arrived are kept "
                               "(Upload-Offset 100000)"}
    assert headers["Tus-Resumable"] == "1.0.0" and headers["Upload-Offset"] == "100000"
    assert "Upload-Expires" in headers
    location = url + headers["Location"]
    assert offset_of(location) == 100_000
    response = patch(location, 100_000, data[100_000:])
    assert response.status_code == 204
    assert fetch(url, response.headers["Media-Path"]) == data


def test_a_creation_with_upload_cut_off_before_its_first_byte_creates_nothing(url, server):
    """Nothing to resume: the upload is removed, and the answer says so (it said the 0 bytes that arrived were kept)."""
    before = stream_ids(server)
    status, headers, answer = _cut_off_creation(url, b"", 200_000, padding=9)
    assert status == 400 and "Location" not in headers
    assert answer == {"error": "the body ended before its Content-Length and none of it arrived; the upload was not "
                               "created"}
    assert stream_ids(server) <= before


def test_termination(url):
    location = create(url, png(100))
    response = requests.delete(location, headers=TUS, timeout=30)
    assert response.status_code == 204 and response.headers["Tus-Resumable"] == "1.0.0"
    assert head(location).status_code == 404
    assert_json_error(patch(location, 0, b"x"), 404, "stream not found")


def test_unknown_and_other_orgs_uploads_are_404(url):
    location = create(url, png(100))
    other = {TOKEN_HEADER: OTHER_TOKEN}
    assert head(location, other).status_code == 404
    assert_json_error(patch(location, 0, b"x", other), 404, "stream not found")
    assert head(f"{url}/uploads/{'0' * 32}").status_code == 404
    assert head(f"{url}/uploads/nonsense").status_code == 404


def test_each_protocol_on_the_others_stream_is_409_naming_the_right_one(url):
    tus_location = create(url, png(100))
    response = requests.patch(tus_location, headers=AUTH, timeout=30,
                              data={"chunkIndex": "0", "totalChunks": "1"}, files={"file": ("a.png", png(100))})
    assert_json_error(response, 409, "tus upload", "Tus-Resumable")
    assert offset_of(tus_location) == 0

    data = png(100)
    created = requests.post(f"{url}/uploads", headers=AUTH, timeout=30, json={
        "destinationId": "stepImage", "fileName": "a.png", "fileSize": 100, "sha": hashlib.sha256(data).hexdigest()})
    chunk_location = f"{url}/uploads/{created.json()['streamId']}"
    assert_json_error(patch(chunk_location, 0, data), 409, "chunked stream", "multipart")
    assert head(chunk_location).status_code == 409
    # The chunk stream is still usable.
    response = requests.patch(chunk_location, headers=AUTH, timeout=30,
                              data={"chunkIndex": "0", "totalChunks": "1"}, files={"file": ("a.png", data)})
    assert response.status_code == 201
    assert fetch(url, response.json()["path"]) == data


def test_expired_uploads_are_404(tmp_path, backend, start_gunicorn):
    started = start_gunicorn(tmp_path / "data", workers=1, env={"WIS_STREAM_TTL_HOURS": str(1.5 / 3600)},
                             backend=backend)
    try:
        location = create(started.url, png(100))
        assert head(location).status_code == 200
        time.sleep(2)
        assert head(location).status_code == 404
        assert_json_error(patch(location, 0, b"x"), 404, "stream not found")
    finally:
        started.stop()


def _cut_off_patch(url, location, offset, body, declared):
    """Send a PATCH that declares `declared` bytes, send only `body`, then drop the connection."""
    path = location[len(url):]
    request = (f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{TOKEN_HEADER}: {TOKEN}\r\nTus-Resumable: 1.0.0\r\n"
               f"Upload-Offset: {offset}\r\nContent-Type: {OCTETS}\r\nContent-Length: {declared}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as sock:
        sock.sendall(request + body)
        time.sleep(0.2)


def _wait_for_offset(location, expected, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if offset_of(location) == expected:
            return
        time.sleep(0.1)
    assert offset_of(location) == expected


def test_a_patch_cut_off_mid_body_keeps_what_arrived_and_resumes(url):
    data = png(3 * 1024 * 1024, seed=7)
    location = create(url, data, sha256=hashlib.sha256(data).hexdigest())
    _cut_off_patch(url, location, 0, data[:1_000_000], len(data))
    _wait_for_offset(location, 1_000_000)
    _cut_off_patch(url, location, 1_000_000, data[1_000_000:1_500_000], len(data) - 1_000_000)
    _wait_for_offset(location, 1_500_000)
    response = patch(location, 1_500_000, data[1_500_000:])
    assert response.status_code == 204
    assert fetch(url, response.headers["Media-Path"]) == data


def test_a_cut_off_patch_with_a_checksum_keeps_nothing(url):
    data = png(1_000_000)
    location = create(url, data)
    path = location[len(url):]
    request = (f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{TOKEN_HEADER}: {TOKEN}\r\nTus-Resumable: 1.0.0\r\n"
               f"Upload-Offset: 0\r\nContent-Type: {OCTETS}\r\nContent-Length: {len(data)}\r\n"
               f"Upload-Checksum: sha256 {b64(hashlib.sha256(data).digest())}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as sock:
        sock.sendall(request + data[:400_000])
    time.sleep(1)
    assert offset_of(location) == 0
    assert patch(location, 0, data).status_code == 204
