"""The request-body policy of every route (service.web.body_limits), end to end on real gunicorn: a body is held to its
route's limit the same way whatever its Content-Type and whether it comes with a Content-Length or chunked, and a 413
names exactly what was too large: the request body, or (for an upload form, a declared fileSize or Upload-Length) the
file, in CONTRACT 5's words."""
import io
import json
import re
import socket

import pytest
import requests

from service.interface import MAX_REQUEST_BODY, MB, TOKEN_HEADER
from support.datadir import stored_names
from support.media import GIF, MP4, PNG, blob, sha256
from support.over_http import create_stream_over_http, tus_metadata
from support.tokens import HEADERS, TOKEN

BODY_TOO_LARGE = f"request body is larger than the limit of {MAX_REQUEST_BODY} bytes"
MALFORMED_CHUNKED = "the request body is not valid chunked transfer coding"
TUS = {"Tus-Resumable": "1.0.0"}
OCTETS = "application/offset+octet-stream"
STATION = {"query": 'mutation { stationCreate(input: {station: {id: "st_kept", name: "Kept"}}) }'}
# Bounds how long a test waits on a socket (the server answers in well under a second).
SOCKET_TIMEOUT = 60


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend, start_module_gunicorn):
    """Test mode, so that the /_test/ endpoints and /_test/objects (what is stored) are there."""
    return start_module_gunicorn(tmp_path_factory.mktemp("body-limits") / "data", workers=2, backend=backend,
                                 env={"WIS_TEST_MODE": "1"})


@pytest.fixture(scope="module")
def stream_id(server):
    """An open chunk stream, beside a station: what a refused request must leave as it was."""
    assert requests.post(server.url + "/graph/v2", json=STATION, headers=HEADERS, timeout=30).status_code == 200
    return create_stream_over_http(server.url, blob(MP4, 3 * MB))


@pytest.fixture
def stored(server, stream_id):
    """What the server stores before the test."""
    return objects(server)


def objects(server):
    response = requests.get(server.url + "/_test/objects", headers=HEADERS, timeout=30)
    assert response.status_code == 200
    return response.json()


def chunk(data):
    """One chunk of a chunked body: its size in hexadecimal, its bytes."""
    return b"%x\r\n" % len(data) + data + b"\r\n"


LAST_CHUNK = b"0\r\n\r\n"


def over_the_limit():
    """A chunked body of 11 MB, 1 MB a chunk: over the 10 MB + 64 KB every route but the upload forms accepts."""
    return chunk(b"x" * MB) * 11 + LAST_CHUNK


def send(server, method, path, headers, body=b""):
    """Send one request over a new connection, its body as given (chunk framing included); return (status, JSON)."""
    head = "".join(f"{name}: {value}\r\n" for name, value in {TOKEN_HEADER: TOKEN, **headers}.items())
    request = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{head}\r\n".encode() + body
    with socket.create_connection(("127.0.0.1", server.port), timeout=SOCKET_TIMEOUT) as sock:
        try:
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered before the whole body was sent: the answer is still there to read
        answer = b""
        while True:
            try:
                received = sock.recv(65536)
            except ConnectionResetError:
                break
            if not received:
                break
            answer += received
    match = re.match(rb"HTTP/1\.1 (\d{3}) [^\r]*\r\n(.*?)\r\n\r\n(.*)", answer, re.S)
    assert match, answer[:300]
    headers, content = match.group(2).lower(), match.group(3)
    assert b"content-type: application/json" in headers, answer[:300]
    return int(match.group(1)), json.loads(content)


def chunked(content_type=None, **headers):
    return {**({"Content-Type": content_type} if content_type else {}), "Transfer-Encoding": "chunked", **headers}


# -- item 6: a chunked body over the limit is a 413, on every route, whatever its type ----------------------------

@pytest.mark.parametrize("method, path, headers", [
    ("POST", "/graph/v2", chunked("application/json")),
    ("POST", "/graph/v2", chunked("text/plain")),
    ("POST", "/graph/v2", chunked("application/graphql")),
    ("POST", "/graph/v2", chunked()),
    ("POST", "/uploads", chunked("application/json")),
    ("POST", "/uploads", chunked("application/octet-stream")),
    ("POST", "/uploads", chunked(OCTETS, **TUS, **{"Upload-Metadata": tus_metadata(destinationId="stepVideo")})),
    ("PATCH", "/uploads/<stream>", chunked("application/json")),
    ("POST", "/_test/faults", chunked("application/json")),
    ("POST", "/_test/reset", chunked("text/plain")),
    ("DELETE", "/uploads/<stream>", chunked("text/plain")),
], ids=["graphql json", "graphql text", "graphql graphql", "graphql untyped", "stream creation json", "uploads octets",
        "tus creation without Upload-Length", "chunk json", "test faults", "test reset", "stream delete"])
def test_a_chunked_body_over_the_limit_is_413_about_the_body_and_changes_nothing(server, stream_id, stored, method,
                                                                                 path, headers):
    path = path.replace("<stream>", stream_id)
    assert send(server, method, path, headers, over_the_limit()) == (413, {"error": BODY_TOO_LARGE})
    assert objects(server) == stored


def test_a_huge_chunk_size_is_measured_like_any_body(server, stored):
    """One chunk declared far larger than anything sent: the body is refused once it passes the limit."""
    body = b"ffffffffffffffffffff\r\n" + b"x" * (11 * MB)
    for path, content_type in (("/graph/v2", "text/plain"), ("/uploads", "application/json")):
        assert send(server, "POST", path, chunked(content_type), body) == (413, {"error": BODY_TOO_LARGE})
    assert objects(server) == stored


@pytest.mark.parametrize("framing", [b"zz\r\nabc\r\n" + LAST_CHUNK, b"-3\r\nabc\r\n" + LAST_CHUNK,
                                     b"3\r\nabcdef\r\n" + LAST_CHUNK, b"3;\x01\r\nabc\r\n" + LAST_CHUNK],
                         ids=["not hexadecimal", "negative", "longer than declared", "bad extension"])
@pytest.mark.parametrize("path, content_type", [
    ("/graph/v2", "application/json"), ("/uploads", "application/json"),
    ("/uploads", "multipart/form-data; boundary=xyz"), ("/_test/faults", "application/json")])
def test_a_malformed_chunked_body_is_a_400_saying_so(server, stored, path, content_type, framing):
    status, answer = send(server, "POST", path, chunked(content_type), framing)
    assert status == 400 and answer["error"].startswith(MALFORMED_CHUNKED), answer
    assert objects(server) == stored


def test_a_tus_patch_with_a_malformed_chunk_appends_nothing(server):
    data = blob(MP4, 1000)
    created = requests.post(server.url + "/uploads", timeout=30, headers={**HEADERS, **TUS, "Upload-Length": "1000",
                            "Upload-Metadata": tus_metadata(destinationId="stepVideo")})
    assert created.status_code == 201, created.text
    location = created.headers["Location"]
    status, answer = send(server, "PATCH", location, chunked(OCTETS, **TUS, **{"Upload-Offset": "0"}),
                          b"zz\r\n" + data + b"\r\n" + LAST_CHUNK)
    assert status == 400 and "Upload-Offset 0" in answer["error"], answer
    head = requests.head(server.url + location, headers={**HEADERS, **TUS}, timeout=30)
    assert head.headers["Upload-Offset"] == "0"
    # The upload goes on from there.
    done = requests.patch(server.url + location, data=data, timeout=30, headers={
        **HEADERS, **TUS, "Upload-Offset": "0", "Content-Type": OCTETS})
    assert done.status_code == 204 and done.headers["Media-Path"].startswith("/api/v1/videos/")


# -- chunked bodies within their limit are read whole, as with a Content-Length ------------------------------------

def pieces(data, size=MB):
    """`data` as an iterable of pieces: requests sends such a body chunked."""
    return (data[start:start + size] for start in range(0, len(data), size))


def test_chunked_bodies_within_the_limit_are_served_as_with_a_content_length(server):
    graphql = requests.post(server.url + "/graph/v2", data=pieces(b'{"query": "{ __typename }"}', 5),
                            headers={**HEADERS, "Content-Type": "application/json"}, timeout=30)
    assert (graphql.status_code, graphql.json()) == (200, {"data": {"__typename": "Query"}})

    # A stream creation padded to exactly the limit (a Content-Length body of that size is accepted too).
    data = blob(MP4, 2000)
    creation = (b'{"destinationId": "stepVideo", "fileName": "clip.mp4", "fileSize": 2000, "sha": "%s"}'
                % sha256(data).encode())
    creation += b" " * (MAX_REQUEST_BODY - len(creation))
    created = requests.post(server.url + "/uploads", data=pieces(creation), timeout=30,
                            headers={**HEADERS, "Content-Type": "application/json"})
    assert created.status_code == 201, created.text

    form = multipart_form("stepImage", "photo.png", blob(PNG, 3 * MB))
    uploaded = requests.post(server.url + "/uploads", data=pieces(form.body), timeout=60,
                             headers={**HEADERS, "Content-Type": form.content_type})
    assert uploaded.status_code == 201, uploaded.text
    media = requests.get(server.url + uploaded.json()["path"], headers=HEADERS, timeout=30)
    assert media.content == blob(PNG, 3 * MB)


class multipart_form:
    """A single-upload form as bytes, to send chunked."""

    def __init__(self, destination, name, data, boundary="body-limits"):
        self.content_type = f"multipart/form-data; boundary={boundary}"
        self.body = (f'--{boundary}\r\nContent-Disposition: form-data; name="destinationId"\r\n\r\n{destination}\r\n'
                     f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n\r\n'
                     ).encode() + data + f"\r\n--{boundary}--\r\n".encode()


@pytest.mark.parametrize("destination, magic, size, message", [
    ("stepImage", PNG, 10_695_475, "file of size 10.2MB is larger than 8MB"),
    ("stepVideoGif", GIF, 11 * MB, "file of size 11MB is larger than 10MB"),
])
def test_a_chunked_upload_form_over_the_limit_names_its_file_as_with_a_content_length(server, destination, magic,
                                                                                       size, message):
    form = multipart_form(destination, "big.bin", blob(magic, size))
    response = requests.post(server.url + "/uploads", data=pieces(form.body), timeout=60,
                             headers={**HEADERS, "Content-Type": form.content_type})
    assert (response.status_code, response.json()) == (413, {"error": message})


# -- item 7: a 413 names the request body, or the file, exactly ----------------------------------------------------

@pytest.mark.parametrize("content_type, message", [
    ("application/json", "request body of 100000000000000000000000 bytes is larger than the limit of "
                         f"{MAX_REQUEST_BODY} bytes"),
    ("text/plain", "request body of 100000000000000000000000 bytes is larger than the limit of "
                   f"{MAX_REQUEST_BODY} bytes"),
    # An upload form is refused unread past 32 MB: its body's size stands in for its file's.
    ("multipart/form-data; boundary=xyz", "file of size 95367431640625000MB is larger than 10MB"),
])
def test_a_huge_content_length_is_named_exactly(server, stored, content_type, message):
    headers = {"Content-Type": content_type, "Content-Length": str(10**23)}
    assert send(server, "POST", "/uploads", headers) == (413, {"error": message})
    assert objects(server) == stored


def test_a_huge_declared_file_size_is_named_exactly(server, stored):
    creation = requests.post(server.url + "/uploads", headers=HEADERS, timeout=30, json={
        "destinationId": "stepVideo", "fileName": "huge.mp4", "fileSize": 2**63 + 1, "sha": "0" * 64})
    assert (creation.status_code, creation.json()) == (413, {"error": "file of size 8796093022208.1MB is larger "
                                                                      "than 500MB"})
    tus = requests.post(server.url + "/uploads", timeout=30, headers={
        **HEADERS, **TUS, "Upload-Length": str(2**63), "Upload-Metadata": tus_metadata(destinationId="stepImage")})
    assert (tus.status_code, tus.json()) == (413, {"error": "file of size 8796093022208MB is larger than 8MB"})
    assert objects(server) == stored


def test_a_content_length_body_over_the_limit_is_413_about_the_body_on_graphql(server, stored):
    body = b"x" * (MAX_REQUEST_BODY + 1)
    response = requests.post(server.url + "/graph/v2", data=io.BytesIO(body), timeout=60,
                             headers={**HEADERS, "Content-Type": "text/plain", "Content-Length": str(len(body))})
    assert (response.status_code, response.json()) == (413, {"error": f"request body of {len(body)} bytes is larger "
                                                                      f"than the limit of {MAX_REQUEST_BODY} bytes"})
    assert objects(server) == stored


# -- the same through the Flask test client, as a server that de-chunks a body hands it over ------------------------

def post_chunked(client, path, body, content_type):
    """POST `body` with no Content-Length, as gunicorn or werkzeug's server hand a chunked body to the app."""
    return client.post(path, input_stream=io.BytesIO(body), content_type=content_type,
                       headers={**HEADERS, "Transfer-Encoding": "chunked"},
                       environ_overrides={"wsgi.input_terminated": True})


def test_a_chunked_body_one_byte_past_the_limit_is_413_and_one_at_the_limit_is_read(client):
    document = b'{"query": "{ __typename }"}'
    at_the_limit = document + b" " * (MAX_REQUEST_BODY - len(document))
    response = post_chunked(client, "/graph/v2", at_the_limit, "application/json")
    assert (response.status_code, response.get_json()) == (200, {"data": {"__typename": "Query"}})
    response = post_chunked(client, "/graph/v2", at_the_limit + b" ", "application/json")
    assert (response.status_code, response.get_json()) == (413, {"error": BODY_TOO_LARGE})


def test_a_chunked_upload_form_past_the_read_limit_is_refused_naming_the_request_limit(app, client):
    form = multipart_form("stepVideo", "huge.mp4", blob(MP4, 33 * MB))
    response = post_chunked(client, "/uploads", form.body, form.content_type)
    # Received no further than 32 MB and one byte: the size is not known, the limit it breaks is.
    assert (response.status_code, response.get_json()) == (413, {"error": "file is larger than 10MB"})
    assert stored_names(app, "default", "media") == []
