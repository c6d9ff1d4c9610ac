"""Hostile input: path traversal in every name and id, other orgs' objects, oversized headers and bodies,
GraphQL documents built to occupy a worker, and slow clients holding connections.

Every refusal must be quick, a 4xx, and must leave the data directory as it was; the requests that go
through real gunicorn carry a 20 s client timeout as a guard against hangs (never a timed assertion).
"""
import hashlib
import io
import json
import os
import re
import socket
import threading
import time

import pytest
import requests

from service import create_app
from service.interface import MAX_REQUEST_BODY
from service.storage import get_repository
from service.interface import TOKEN_HEADER
from support.datadir import snapshot
from support.media import MP4, PNG
from support.tokens import HEADERS, TOKEN, TOKENS
from support.uploads import uploaded_path

HANG_GUARD = 20
IMAGE = PNG + bytes(range(256))
VIDEO = MP4 + bytes(range(256))
PROCESS_CREATE = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"
PRODUCT_CREATE = "mutation($input: ProductCreateInput!) { productCreate(input: $input) }"
STATION_CREATE = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"
# Names that try to leave their directory, hide a separator, end early, or pass for ASCII.
TRAVERSALS = [
    "..", "../..", "../../default-token", "..%2f..%2fdefault-token", "%2e%2e%2f%2e%2e%2fdefault-token",
    "%252e%252e%252f", "..\\..\\default-token", "....//....//default-token", "/etc/passwd", "abc\x00.png",
    "abc%00.png", "\uff0e\uff0e\uff0fdefault-token", "abc\u2215..\u2215x", "\u0430bc", "abc\n", " abc",
]


def gql(client, headers, query, variables=None):
    response = client.post("/graph/v2", json={"query": query, "variables": variables}, headers=headers)
    return response.status_code, response.get_json()


def open_stream(client, headers, size=2 * len(VIDEO)):
    response = client.post("/uploads", json={"destinationId": "stepVideo", "fileName": "clip.mp4", "fileSize": size,
                                             "sha": "0" * 64}, headers=headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["streamId"]


def assert_json_error(response, status):
    assert response.status_code == status, (response.status_code, response.data[:300])
    assert response.is_json and isinstance(response.get_json()["error"], str)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """One app for the module: each test checks what a request changed, so they can share the data."""
    return create_app({"DATA_DIR": str(tmp_path_factory.mktemp("hostile-data")), "API_TOKENS": TOKENS,
                       "TESTING": True})


@pytest.fixture
def data_dir(app):
    return app.config["DATA_DIR"]


@pytest.fixture
def secret(data_dir, client, auth):
    """A file an attacker would like to read: the server's own token file beside the orgs."""
    path = os.path.join(data_dir, "default-token")
    with open(path, "w") as handle:
        handle.write("SECRET-TOKEN-VALUE\n")
    return "SECRET-TOKEN-VALUE"


# ---------------------------------------------------------------- path traversal

@pytest.mark.parametrize("bad_id", TRAVERSALS)
@pytest.mark.parametrize("mutation, key, extra", [
    (PROCESS_CREATE, "process", {}),
    (STATION_CREATE, "station", {}),
    (PRODUCT_CREATE, "product", {"finalProcessId": "proc_a", "dependencies": []}),
], ids=["process", "station", "product"])
def test_traversal_in_object_ids_is_bad_user_input_and_stores_nothing(client, auth, data_dir, mutation, key, extra,
                                                                       bad_id):
    before = snapshot(data_dir)
    status, body = gql(client, auth, mutation, {"input": {key: {"id": bad_id, "name": "n", **extra}}})
    assert status == 200 and body["data"] == {mutation.split("{ ")[1].split("(")[0]: None}
    assert f"{key}.id" in [error["extensions"]["field"] for error in body["errors"]]
    assert snapshot(data_dir) == before


@pytest.mark.parametrize("bad_id", TRAVERSALS)
def test_traversal_in_nested_ids_and_references_is_bad_user_input(client, auth, data_dir, bad_id):
    gql(client, auth, PROCESS_CREATE, {"input": {"process": {"id": "proc_a", "name": "A"}}})
    before = snapshot(data_dir)
    process = {"id": "proc_b", "name": "B", "steps": [{"id": bad_id, "actions": [
        {"id": bad_id + "x", "toolUsed": {"id": bad_id}, "outputPart": {"id": bad_id, "serial": {"id": bad_id}},
         "inputParts": [{"part": {"id": bad_id}}]}]}]}
    status, body = gql(client, auth, PROCESS_CREATE, {"input": {"process": process}})
    fields = {error["extensions"]["field"] for error in body["errors"]}
    assert status == 200 and body["data"] == {"processCreate": None}
    assert {"process.steps[0].id", "process.steps[0].actions[0].id", "process.steps[0].actions[0].toolUsed.id",
            "process.steps[0].actions[0].outputPart.id", "process.steps[0].actions[0].outputPart.serial.id",
            "process.steps[0].actions[0].inputParts[0].part.id"} <= fields
    product = {"id": "prod_a", "name": "P", "finalProcessId": bad_id,
               "dependencies": [{"processId": bad_id, "upstreamProcessId": "proc_a"}]}
    status, body = gql(client, auth, PRODUCT_CREATE, {"input": {"product": product}})
    assert {"product.finalProcessId", "product.dependencies[0].processId"} <= {
        error["extensions"]["field"] for error in body["errors"]}
    assert snapshot(data_dir) == before


@pytest.mark.parametrize("bad_id", TRAVERSALS + ["default-token", "proc_a/../proc_a"])
@pytest.mark.parametrize("kind", ["process", "product", "station"])
def test_traversal_in_read_ids_reads_nothing(client, auth, secret, kind, bad_id):
    gql(client, auth, PROCESS_CREATE, {"input": {"process": {"id": "proc_a", "name": "A"}}})
    status, body = gql(client, auth, f"query($id: String!) {{ {kind}(id: $id) {{ id name }} }}", {"id": bad_id})
    assert (status, body) == (200, {"data": {kind: None}})
    status, body = gql(client, auth, "query($after: String) { processes(after: $after) { id } }", {"after": bad_id})
    assert status == 200 and secret not in json.dumps(body)


MEDIA_TRAVERSALS = [
    "/api/v1/images/../../../default-token", "/api/v1/images/..", "/api/v1/images/.", "/api/v1/images/",
    "/api/v1/images/%2e%2e%2fdefault-token", "/api/v1/images/..%2f..%2fdefault-token",
    "/api/v1/images/..\\..\\default-token", "/api/v1/images/photo.png\x00.jpg", "/api/v1/images/\uff50hoto.png",
    "/api/v1/images/../videos/clip.mp4", "/api/v1/images//etc/passwd", "/api/v1/IMAGES/photo.png",
    "/api/v2/images/photo.png", "api/v1/images/photo.png", "/api/v1/images/photo.png/", "/api/v1/images/photo.png\n",
    "file:///etc/passwd", "http://127.0.0.1/api/v1/images/photo.png",
]


@pytest.mark.parametrize("path", MEDIA_TRAVERSALS)
@pytest.mark.parametrize("where", ["image", "primaryImage", "video"])
def test_traversal_in_media_paths_of_a_process_is_bad_user_input(client, auth, data_dir, where, path):
    before = snapshot(data_dir)
    process = {"id": "proc_m", "name": "M"}
    if where == "image":
        process["image"], field = {"path": path}, "process.image.path"
    else:
        process["steps"], field = [{"id": "step_1", where: {"path": path}}], f"process.steps[0].{where}.path"
    status, body = gql(client, auth, PROCESS_CREATE, {"input": {"process": process}})
    assert status == 200 and body["data"] == {"processCreate": None}
    assert [error["extensions"]["field"] for error in body["errors"]] == [field]
    assert snapshot(data_dir) == before


@pytest.mark.parametrize("file_name", TRAVERSALS + ["../../../orgs/other/media/images/x.png", "C:\\Windows\\x.png",
                                                    "\x00", "", "." * 300, "a" * 5000 + ".png"])
def test_traversal_in_file_names_never_leaves_the_org_media_directory(app, client, auth, data_dir, file_name):
    before = set(snapshot(data_dir))
    response = client.post("/uploads", data={"destinationId": "stepImage", "file": (io.BytesIO(IMAGE), file_name)},
                           headers=auth)
    if response.status_code != 201:
        # A name that breaks the multipart framing (a line break, nothing at all) loses the file part itself.
        assert_json_error(response, 400)
        assert "file" in response.get_json()["error"] and set(snapshot(data_dir)) == before
        return
    path = response.get_json()["path"]
    name = path.rsplit("/", 1)[1]
    assert re.fullmatch(r"/api/v1/images/[0-9a-f]{16}-[A-Za-z0-9_][A-Za-z0-9._-]*\.png", path) and ".." not in name
    assert len(name) <= 255
    added = set(snapshot(data_dir)) - before
    media_file = get_repository(app).media.file_for("default", path)
    # Besides the media file, only the org's deduplication index (media/.same: keyed by the cleaned name) changes; the
    # file is there before when an earlier name of this module cleaned to the same name (the same bytes: its path).
    index = os.path.relpath(media_file.parent.parent / ".same", data_dir) + os.sep
    assert os.path.relpath(media_file, data_dir) in added | before
    assert all(name == os.path.relpath(media_file, data_dir) or name.startswith(index) for name in added), added
    assert client.get(path, headers=auth).data == IMAGE


@pytest.mark.parametrize("file_name", ["../../../default-token", "..\\..\\x.mp4", "\x00.mp4", "\uff0e\uff0e\uff0fx.mp4"])
def test_traversal_in_stream_file_names_is_neutralised_on_completion(client, auth, file_name):
    response = client.post("/uploads", json={"destinationId": "stepVideo", "fileName": file_name,
                                             "fileSize": len(VIDEO), "sha": hashlib.sha256(VIDEO).hexdigest()},
                           headers=auth)
    stream_id = response.get_json()["streamId"]
    response = client.patch(f"/uploads/{stream_id}", data={"chunkIndex": "0", "totalChunks": "1",
                                                           "file": (io.BytesIO(VIDEO), "../../x")}, headers=auth)
    assert response.status_code == 201
    assert re.fullmatch(r"/api/v1/videos/[0-9a-f]{16}-[A-Za-z0-9_][A-Za-z0-9._-]*\.mp4", response.get_json()["path"])


STREAM_ID_TRAVERSALS = [
    "..", ".", "..%2f..%2fdefault-token", "%2e%2e", "%2e%2e%2f%2e%2e", "..\\..", "%00", "a" * 32 + "%00",
    "\uff10" * 32, "A" * 32, "0" * 31, "0" * 33, "0" * 32 + "%2f..", "..;", "%252e%252e",
]


@pytest.mark.parametrize("segment", STREAM_ID_TRAVERSALS)
@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
def test_traversal_in_the_stream_id_segment_is_404_and_touches_nothing(client, auth, data_dir, secret, method,
                                                                       segment):
    open_stream(client, auth)
    before = snapshot(data_dir)
    data = {"chunkIndex": "0", "totalChunks": "2", "file": (io.BytesIO(VIDEO), "c")} if method == "PATCH" else None
    response = client.open(f"/uploads/{segment}", method=method, data=data, headers=auth)
    assert response.status_code in (404, 405), response.data[:200]  # 405: a segment that became a route of its own
    assert response.is_json and secret not in response.get_data(as_text=True)
    assert snapshot(data_dir) == before


@pytest.mark.parametrize("suffix", [
    "..%2f..%2f..%2f..%2fdefault-token", "%2e%2e/%2e%2e/%2e%2e/%2e%2e/default-token", "../../../../default-token",
    "..\\..\\..\\..\\default-token", ".%2e/.%2e/.%2e/.%2e/default-token", "photo.png%00", "..", "%2e%2e",
    "\uff0e\uff0e/\uff0e\uff0e/default-token", "..%252f..%252fdefault-token", "..%c0%af..%c0%afdefault-token",
])
@pytest.mark.parametrize("segment", ["images", "videos"])
def test_traversal_in_media_urls_is_404(client, auth, secret, segment, suffix):
    uploaded_path(client, auth, IMAGE)
    response = client.get(f"/api/v1/{segment}/{suffix}", headers=auth)
    assert response.status_code in (404, 308), response.data[:200]
    assert secret not in response.get_data(as_text=True) and TOKEN_HEADER not in response.get_data(as_text=True)


@pytest.mark.parametrize("url", [
    "/static/../auth.py", "/static/%2e%2e/auth.py", "/static/..%2fauth.py", "/static/graphiql/../../auth.py",
    "/static/..\\auth.py", "/static/%2e%2e%2f%2e%2e%2fdata/default-token", "/static//etc/passwd",
])
def test_traversal_out_of_the_static_files_is_404(client, url):
    response = client.get(url, follow_redirects=True)  # `//` is first redirected to `/`
    assert response.status_code == 404 and response.is_json
    assert "def require_org" not in response.get_data(as_text=True)


@pytest.mark.parametrize("token", [
    "\x00", TOKEN + "\x00", TOKEN.upper(), "\uff54\uff45\uff53\uff54-token-default", TOKEN[:-1], TOKEN + "x",
    f"{TOKEN},{TOKEN}", "default:" + TOKEN, "a" * 100_000, "../" + TOKEN,
])
def test_a_forged_token_is_401_on_every_endpoint(client, token):
    headers = {TOKEN_HEADER: token}
    for response in (client.post("/graph/v2", json={"query": "{ stations { id } }"}, headers=headers),
                     client.post("/uploads", json={}, headers=headers), client.get("/uploads/" + "0" * 32, headers=headers),
                     client.get("/api/v1/images/x.png", headers=headers)):
        assert_json_error(response, 401)


@pytest.mark.parametrize("header", [
    "bytes=" + ",".join(["0-1"] * 2000), "bytes=0-" + "9" * 400, "bytes=-" + "9" * 400, "bytes=5-1", "bytes=\x00",
    "bytes=../../x", "items=0-1", "bytes=0-0," * 500,
])
def test_hostile_range_headers_are_answered_without_a_server_error(client, auth, header):
    path = uploaded_path(client, auth, IMAGE)
    response = client.get(path, headers={**auth, "Range": header})
    assert response.status_code in (200, 206, 416), response.data[:200]
    assert response.status_code != 416 or response.is_json


# ---------------------------------------------------------------- other orgs

def test_another_orgs_ids_streams_and_media_are_not_found_and_never_touched(client, auth, other_auth, data_dir):
    media = uploaded_path(client, auth, IMAGE)
    video = uploaded_path(client, auth, VIDEO, "stepVideo", "clip.mp4")
    stream_id = open_stream(client, auth)
    client.patch(f"/uploads/{stream_id}", data={"chunkIndex": "0", "totalChunks": "2",
                                                "file": (io.BytesIO(VIDEO), "c")}, headers=auth)
    gql(client, auth, PROCESS_CREATE, {"input": {"process": {"id": "proc_a", "name": "Secret A", "image": {"path": media}}}})
    gql(client, auth, PRODUCT_CREATE, {"input": {"product": {"id": "prod_a", "name": "Secret P", "finalProcessId": "proc_a",
                                                             "dependencies": []}}})
    gql(client, auth, STATION_CREATE, {"input": {"station": {"id": "stat_a", "name": "Secret S"}}})
    status_before = client.get(f"/uploads/{stream_id}", headers=auth).get_json()
    before = snapshot(data_dir)

    for kind, identifier in (("process", "proc_a"), ("product", "prod_a"), ("station", "stat_a")):
        assert gql(client, other_auth, f'{{ {kind}(id: "{identifier}") {{ id }} }}') == (200, {"data": {kind: None}})
    _, body = gql(client, other_auth, "{ processes { id } products { id } stations { id } }")
    assert body == {"data": {"processes": [], "products": [], "stations": []}}
    for path in (media, video):
        assert_json_error(client.get(path, headers=other_auth), 404)
        assert client.head(path, headers=other_auth).status_code == 404
    assert_json_error(client.get(f"/uploads/{stream_id}", headers=other_auth), 404)
    assert_json_error(client.patch(f"/uploads/{stream_id}", data={"chunkIndex": "1", "totalChunks": "2",
                                                                 "file": (io.BytesIO(b"x" * 10), "c")},
                                   headers=other_auth), 404)
    assert_json_error(client.delete(f"/uploads/{stream_id}", headers=other_auth), 404)
    # Referencing the other org's media or processes is refused like a path that does not exist.
    status, body = gql(client, other_auth, PROCESS_CREATE, {"input": {"process": {
        "id": "proc_b", "name": "B", "image": {"path": media}, "steps": [{"id": "step_1", "video": {"path": video}}]}}})
    assert [error["extensions"]["field"] for error in body["errors"]] == ["process.image.path", "process.steps[0].video.path"]
    status, body = gql(client, other_auth, PRODUCT_CREATE, {"input": {"product": {
        "id": "prod_b", "name": "P", "finalProcessId": "proc_a", "dependencies": []}}})
    assert [error["extensions"]["field"] for error in body["errors"]] == ["product.finalProcessId"]
    assert "Secret" not in json.dumps(body)
    assert snapshot(data_dir) == before

    # The same ids in the other org are its own objects; the first org's stay as they were.
    assert gql(client, other_auth, STATION_CREATE, {"input": {"station": {"id": "stat_a", "name": "B's"}}})[1] == {
        "data": {"stationCreate": "CREATED"}}
    assert gql(client, auth, '{ station(id: "stat_a") { name revision } }')[1] == {
        "data": {"station": {"name": "Secret S", "revision": 1}}}
    assert client.get(f"/uploads/{stream_id}", headers=auth).get_json() == status_before
    assert client.get(media, headers=auth).data == IMAGE


# ---------------------------------------------------------------- oversized bodies

@pytest.fixture
def test_mode_app(tmp_path):
    return create_app({"DATA_DIR": str(tmp_path / "tm-data"), "API_TOKENS": TOKENS, "TESTING": True,
                       "TEST_MODE": True})


def writing_routes(app):
    """Every (method, rule) of the app that takes a request body."""
    return sorted((method, rule.rule) for rule in app.url_map.iter_rules()
                  for method in rule.methods & {"POST", "PATCH", "PUT"})


def stored_state(data_dir):
    """snapshot() of a test-mode data directory but the request journal, which records refused requests too."""
    return {path: digest for path, digest in snapshot(data_dir).items() if not path.startswith("test-mode/journal/")}


def test_every_route_that_takes_a_body_is_covered_below(test_mode_app):
    # A snapshot restore has a limit of its own (512 MiB: test_testing_snapshots.py), as have the pages' forms.
    assert writing_routes(test_mode_app) == [
        ("PATCH", "/uploads/<stream_id>"), ("POST", "/_test/faults"), ("POST", "/_test/reset"),
        ("POST", "/_test/restore"), ("POST", "/_test/snapshot"), ("POST", "/_test/webhooks/due"), ("POST", "/graph/v2"),
        ("POST", "/graphql"), ("POST", "/uploads"), ("POST", "/view/login"), ("POST", "/view/logout")]


@pytest.mark.parametrize("content_type", ["application/json", "multipart/form-data; boundary=xyz",
                                          "application/octet-stream", "text/plain", None])
@pytest.mark.parametrize("method, rule", [
    ("PATCH", "/uploads/<stream_id>"), ("POST", "/_test/faults"), ("POST", "/_test/reset"),
    ("POST", "/_test/webhooks/due"), ("POST", "/graph/v2"), ("POST", "/graphql"), ("POST", "/uploads")])
def test_a_body_over_the_limit_is_a_json_413_on_every_route(test_mode_app, auth, method, rule, content_type):
    """(The preview pages' forms have a limit of their own: test_pages_http.py.)"""
    client = test_mode_app.test_client()
    url = rule.replace("<stream_id>", open_stream(client, auth))
    before = stored_state(test_mode_app.config["DATA_DIR"])
    body = b"x" * (MAX_REQUEST_BODY + 1)
    response = client.open(url, method=method, data=body, content_type=content_type, headers=auth)
    if rule.startswith("/uploads") and content_type and content_type.startswith("multipart/"):
        # An upload form: the size of its body stands in for its file's (CONTRACT 5).
        expected = "file of size 10.1MB is larger than 10MB"
    else:
        expected = f"request body of {MAX_REQUEST_BODY + 1} bytes is larger than the limit of {MAX_REQUEST_BODY} bytes"
    assert_json_error(response, 413)
    assert response.get_json()["error"] == expected
    assert stored_state(test_mode_app.config["DATA_DIR"]) == before


# ---------------------------------------------------------------- documents built to occupy a worker

def fragment_bomb(levels):
    """Each fragment spreads the one before it twice: 2**levels fields once expanded."""
    fragments = "fragment f0 on Query { stations { id } }" + "".join(
        f" fragment f{i} on Query {{ ...f{i - 1} ...f{i - 1} }}" for i in range(1, levels + 1))
    return f"query {{ ...f{levels} }} " + fragments


BOMBS = {
    "nested 1000 deep": "{ stations " + "{ id " * 1000 + "}" * 1001,
    "1000 inline fragments deep": "{ " + "... on Query { " * 1000 + "__typename" + " }" * 1000 + " }",
    "5000 aliases": "{ " + " ".join(f"a{i}: __typename" for i in range(5000)) + " }",
    "5000 aliased stations": "{ " + " ".join(f"a{i}: stations {{ id }}" for i in range(5000)) + " }",
    "fragment bomb 2**40": fragment_bomb(40),
    "3000 spreads of one fragment": "{ " + "...f " * 3000 + "} fragment f on Query { stations { id } }",
    "fragment chain 1000 long": "{ ...f0 } " + " ".join(f"fragment f{i} on Query {{ ...f{i + 1} }}" for i in range(1000))
                                + " fragment f1000 on Query { __typename }",
    "fragment cycle": "{ ...a } fragment a on Query { ...b } fragment b on Query { ...a }",
    "3000 duplicate arguments": "{ stations(" + ", ".join(f"first: {i}" for i in range(3000)) + ") { id } }",
    "3000 directives": "{ stations " + "@include(if: true) " * 3000 + "{ id } }",
    "3000 variable definitions": "query(" + " ".join(f"$v{i}: Int" for i in range(3000)) + ") { stations { id } }",
    "list literal 1000 deep": "{ station(id: " + "[" * 1000 + "]" * 1000 + ") { id } }",
    "object literal 1000 deep": "mutation { stationCreate(input: " + "{a: " * 1000 + "1" + "}" * 1000 + ") }",
    "5 MB of whitespace": "{ stations { id } }" + " " * 5_000_000,
    "40 aliased pages of 1000": "{ " + " ".join(f"a{i}: processes(first: 1000) {{ id }}" for i in range(40)) + " }",
    "2 pages sized by a variable": "query($n: Int) { a: processes(first: $n) { id } b: stations(first: $n) { id } }",
    "1001 aliased single reads": "{ " + " ".join(f'a{i}: station(id: "st_1") {{ id }}' for i in range(1001)) + " }",
    "11 aliased mutations": "mutation { " + " ".join(
        f'm{i}: stationCreate(input: {{station: {{id: "st_{i}", name: "n"}}}})' for i in range(11)) + " }",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend, start_module_gunicorn):
    """Real gunicorn with the shipped configuration."""
    return start_module_gunicorn(tmp_path_factory.mktemp("hostile-gunicorn"), backend=backend,
                                 extra_args=("-c", "python:service.gunicorn_config"))




@pytest.mark.parametrize("query", BOMBS.values(), ids=BOMBS.keys())
def test_a_document_built_to_occupy_a_worker_is_refused_with_a_4xx(server, query):
    response = requests.post(server.url + "/graph/v2", json={"query": query}, headers=HEADERS, timeout=HANG_GUARD)
    assert 400 <= response.status_code < 500, response.text[:300]
    assert "data" not in response.json() and response.json()["errors"]


def test_the_limits_leave_room_for_ordinary_requests(server):
    ten_mutations = "mutation { " + " ".join(
        f'm{i}: stationCreate(input: {{station: {{id: "st_{i}", name: "n"}}}})' for i in range(10)) + " }"
    response = requests.post(server.url + "/graph/v2", json={"query": ten_mutations}, headers=HEADERS, timeout=HANG_GUARD)
    assert response.status_code == 200 and "errors" not in response.json()
    assert set(response.json()["data"].values()) <= {"CREATED", "UPDATED"} and len(response.json()["data"]) == 10
    stored = requests.post(server.url + "/graph/v2", json={"query": "{ stations(first: 800) { id name } }"},
                           headers=HEADERS, timeout=HANG_GUARD).json()["data"]["stations"]
    assert {f"st_{i}": "n" for i in range(10)}.items() <= {station["id"]: station["name"] for station in stored}.items()
    pages = "query($n: Int) { processes(first: $n) { id } } "
    for query, variables in ((pages, {"n": 1000}), ("{ processes { id } products { id } stations(first: 800) { id } }", {}),
                             ("{ " + " ".join(f'a{i}: station(id: "st_{i}") {{ id }}' for i in range(10)) + " }", {})):
        response = requests.post(server.url + "/graph/v2", json={"query": query, "variables": variables}, headers=HEADERS,
                                 timeout=HANG_GUARD)
        assert response.status_code == 200 and "errors" not in response.json(), response.text[:300]


VARIABLE_BOMBS = {
    "10 MB nested 5 million deep": b'{"query": "{ stations { id } }", "variables": ' + b'{"a":[' * 870_000
                                   + b"]}" * 870_000 + b"}",
    "10 MB nested inside $input": b'{"query": "' + PROCESS_CREATE.encode() + b'", "variables": {"input": {"process": '
                                  + b'{"steps":[' * 870_000 + b"]}" * 870_000 + b"}}}",
    "11 MB flat": json.dumps({"query": "{ stations { id } }", "variables": {"x": "y" * 11_000_000}}).encode(),
}


@pytest.mark.parametrize("body", VARIABLE_BOMBS.values(), ids=VARIABLE_BOMBS.keys())
def test_huge_variables_are_refused_with_a_4xx(server, body):
    response = requests.post(server.url + "/graph/v2", data=body, headers={**HEADERS, "Content-Type": "application/json"},
                             timeout=HANG_GUARD)
    assert 400 <= response.status_code < 500, response.text[:300]
    assert "data" not in response.json()


def test_input_breaking_a_rule_40000_times_gets_a_short_answer(server):
    """40,000 bad ids (as many steps as an input may hold objects): the answer lists 100 errors and says how many more
    there are, nothing is stored."""
    steps = [{"id": "!"}] * 40_000
    response = requests.post(server.url + "/graph/v2", headers=HEADERS, timeout=HANG_GUARD, json={
        "query": PROCESS_CREATE, "variables": {"input": {"process": {"id": "proc_huge", "name": "H", "steps": steps}}}})
    body = response.json()
    assert response.status_code == 200 and body["data"] == {"processCreate": None}
    assert len(response.content) < 100_000 and len(body["errors"]) == 101
    assert body["errors"][-1]["extensions"]["code"] == "TOO_MANY_ERRORS" and "39900 more" in body["errors"][-1]["message"]
    read = requests.post(server.url + "/graph/v2", headers=HEADERS, timeout=HANG_GUARD,
                         json={"query": '{ process(id: "proc_huge") { id } }'})
    assert read.json() == {"data": {"process": None}}


# ---------------------------------------------------------------- oversized headers, lines and bodies on gunicorn

def raw_exchange(server, request_bytes):
    """Send raw bytes to the server; return the status code of its answer (None if it closed without one)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=HANG_GUARD) as sock:
        try:
            sock.sendall(request_bytes)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before we finished sending; its answer may still be readable
        answer = b""
        try:
            while b"\r\n" not in answer:
                received = sock.recv(4096)
                if not received:
                    break
                answer += received
        except ConnectionResetError:
            pass
    match = re.match(rb"HTTP/1\.[01] (\d{3}) ", answer)
    return int(match.group(1)) if match else None


@pytest.mark.parametrize("request_bytes", [
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
    f"POST /graph/v2 HTTP/1.1\r\nHost: x\r\n{TOKEN_HEADER}: ".encode() + b"t" * 100_000 + b"\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(1000)) + b"\r\n",
    b"GET /api/v1/images/" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n" + b" b\r\n" * 20_000 + b"\r\n",
], ids=["100 KB header", "100 KB token", "1000 headers", "100 KB request line", "header folded 20000 times"])
def test_oversized_headers_and_request_lines_are_refused_with_a_4xx(server, request_bytes):
    status = raw_exchange(server, request_bytes)
    assert status is not None and 400 <= status < 500, status
    assert requests.get(server.url + "/healthz", timeout=HANG_GUARD).status_code == 200


@pytest.mark.parametrize("path, content_type", [
    ("/graph/v2", "application/json"), ("/uploads", "application/json"),
    ("/uploads", "multipart/form-data; boundary=xyz")])
def test_a_chunked_body_over_the_limit_is_a_413_on_gunicorn(server, path, content_type):
    """No Content-Length to refuse up front: the limit must hold while the body is read."""
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\n{TOKEN_HEADER}: {TOKEN}\r\nContent-Type: {content_type}\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
    piece = b"x" * (1024 * 1024)
    chunk = b"%x\r\n" % len(piece) + piece + b"\r\n"
    assert raw_exchange(server, head + chunk * 11 + b"0\r\n\r\n") == 413


# ---------------------------------------------------------------- slow clients

def test_slow_clients_holding_connections_do_not_stop_normal_requests(tmp_path, start_gunicorn):
    """60 connections that never finish their request: 30 silent, 30 sending a header byte every half second."""
    # The shipped config's worker count (cores + 1), which GunicornServer would otherwise override.
    workers = len(os.sched_getaffinity(0)) + 1
    server = start_gunicorn(tmp_path / "data", workers=workers, extra_args=("-c", "python:service.gunicorn_config"))
    stop = threading.Event()
    silent, slow = [], []
    try:
        for _ in range(30):
            silent.append(socket.create_connection(("127.0.0.1", server.port), timeout=HANG_GUARD))
        for _ in range(30):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=HANG_GUARD)
            sock.sendall(f"POST /graph/v2 HTTP/1.1\r\nHost: x\r\n{TOKEN_HEADER}: {TOKEN}\r\n".encode())
            slow.append(sock)
            time.sleep(0.1)  # spread over the workers, as a patient attacker would

        def trickle():
            # Bounded: at most 120 rounds, and it stops as soon as the test is done.
            for _ in range(120):
                if stop.wait(0.5):
                    return
                for sock in slow:
                    try:
                        sock.sendall(b"X")
                    except OSError:
                        pass

        trickler = threading.Thread(target=trickle, daemon=True)
        trickler.start()
        time.sleep(1)
        assert requests.get(server.url + "/healthz", timeout=HANG_GUARD).status_code == 200
        response = requests.post(server.url + "/graph/v2", headers=HEADERS, timeout=HANG_GUARD,
                                 json={"query": STATION_CREATE, "variables": {"input": {"station": {"id": "st_1", "name": "n"}}}})
        assert response.json() == {"data": {"stationCreate": "CREATED"}}
    finally:
        stop.set()
        for sock in silent + slow:
            sock.close()
        server.stop()
