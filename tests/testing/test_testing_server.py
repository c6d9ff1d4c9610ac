"""The embeddable threaded server (service.testing) and the test-mode state endpoints."""
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from service import create_app
from service.storage.files import checkpoints
from service.testing import ServiceSession, ThreadedServer
from service.interface import TOKEN_HEADER
from support.media import SMALL_PNG
from support.over_http import upload_png
from support.tokens import TOKENS

STATION_CREATE = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"
TEST_ENDPOINTS = [("POST", "/_test/reset"), ("GET", "/_test/objects"), ("POST", "/_test/faults"),
                  ("DELETE", "/_test/faults"), ("GET", "/_test/requests")]


def open_stream(session, size=100):
    response = session.post("/uploads", json={"destinationId": "stepImage", "fileName": "big.png", "fileSize": size,
                                              "sha": hashlib.sha256(b"x").hexdigest()}, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()["streamId"]


def test_threaded_server_runs_without_pytest_fixtures():
    server = ThreadedServer()
    server.start()
    try:
        assert requests.get(server.url + "/healthz", timeout=5).json() == {"status": "ok"}
        assert requests.get(server.url + "/_test/objects", headers=server.headers, timeout=5).status_code == 200
        assert os.path.isdir(server.data_dir)
    finally:
        server.stop()
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url + "/healthz", timeout=5)
    assert not os.path.exists(server.data_dir)


@pytest.mark.parametrize("reset", [False, True], ids=["stopped", "reset, then stopped"])
def test_a_stopped_server_leaves_no_checkpoint_to_write_into_its_removed_data_dir(monkeypatch, reset):
    """A change's checkpoint is due a while after it (service.storage.files.checkpoints): stop() makes it at once and
    waits for it, so nothing writes in the data directory while it is removed, nor after; a reset between (a test
    suite's clean state) leaves no checkpoint thread behind either."""
    monkeypatch.setattr(checkpoints, "CHECKPOINT_SECONDS", 60)
    server = ThreadedServer()
    server.start()
    try:
        with server.session() as session:
            response = session.post("/graph/v2", json={"query": STATION_CREATE, "variables": {
                "input": {"station": {"id": "station_1", "name": "Press"}}}}, timeout=10)
            assert response.status_code == 200 and "errors" not in response.json(), response.text
        assert "wis-checkpoints" in [thread.name for thread in threading.enumerate()]
        if reset:
            server.reset()
    finally:
        server.stop()
    assert "wis-checkpoints" not in [thread.name for thread in threading.enumerate()]
    assert not os.path.exists(server.data_dir)


def test_threaded_server_keeps_a_data_dir_it_was_given(tmp_path):
    with ThreadedServer(token="given-token-123", data_dir=tmp_path / "data", org="acme") as server:
        assert server.url.startswith("http://127.0.0.1:")
        with server.session() as session:
            path = upload_png(session)
        response = requests.get(server.url + path, headers={TOKEN_HEADER: "given-token-123"}, timeout=5)
        assert response.content == SMALL_PNG
    assert (tmp_path / "data" / "orgs" / "acme").is_dir()


@pytest.mark.parametrize("method, path", TEST_ENDPOINTS)
def test_test_endpoints_are_absent_unless_test_mode_is_on(client, auth, method, path):
    assert client.open(path, method=method, headers=auth, json={"status": 503}).status_code == 404


@pytest.mark.parametrize("method, path", TEST_ENDPOINTS)
def test_test_endpoints_need_the_token(tmp_path, method, path):
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "TEST_MODE": True})
    assert app.test_client().open(path, method=method, json={"status": 503}).status_code == 401


def test_objects_lists_what_each_org_stored_and_reset_removes_it(tmp_path):
    other_token = "other-org-token"
    with ThreadedServer(config={"API_TOKENS": f"default:default-token,acme:{other_token}"},
                        token="default-token") as server, server.session() as session:
        path = upload_png(session)
        stream_id = open_stream(session)
        mutation = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"
        response = session.post("/graph/v2", json={"query": mutation, "variables": {
            "input": {"station": {"id": "station_1", "name": "Press"}}}}, timeout=10)
        assert response.status_code == 200 and "errors" not in response.json(), response.text
        with ServiceSession(server.url, other_token) as acme:
            acme_path = upload_png(acme)

        objects = session.get("/_test/objects", timeout=10).json()
        assert objects == {"orgs": {
            "acme": {"documents": {}, "media": [acme_path], "streams": []},
            "default": {"documents": {"stations": ["station_1"]}, "media": [path], "streams": [stream_id]},
        }}

        assert session.post("/_test/reset", timeout=10).json() == {"status": "reset"}
        assert session.get("/_test/objects", timeout=10).json() == {"orgs": {}}
        assert session.get(path, timeout=10).status_code == 404
        assert session.get(f"/uploads/{stream_id}", timeout=10).status_code == 404


def run_python(tmp_path, text):
    """What `text` printed, run as a script by a fresh interpreter (this one imported everything long ago)."""
    script = tmp_path / "script.py"
    script.write_text(text)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_threaded_server_works_from_a_plain_script_without_pytest(tmp_path):
    output = run_python(
        tmp_path,
        "import sys, requests\n"
        "from service.testing import ThreadedServer\n"
        "with ThreadedServer() as server:\n"
        "    print(requests.get(server.url + '/healthz', timeout=5).json()['status'])\n"
        "print('pytest' in sys.modules)\n")
    assert output.split() == ["ok", "False"]


def test_threaded_server_loads_graphql_and_marshmallow_on_the_first_request_that_needs_them(tmp_path):
    output = run_python(
        tmp_path,
        "import json, sys, urllib.request\n"
        "from service.testing import ThreadedServer\n"
        "def loaded():\n"
        "    return sorted(name for name in ('graphql', 'ariadne', 'marshmallow') if name in sys.modules)\n"
        "def post(server, path, body):\n"
        "    request = urllib.request.Request(server.url + path, data=json.dumps(body).encode(), headers={\n"
        "        'Content-Type': 'application/json', **server.headers})\n"
        "    with urllib.request.urlopen(request, timeout=30) as response:\n"
        "        return response.status, json.loads(response.read())\n"
        "with ThreadedServer() as server:\n"
        "    print(json.dumps(loaded()))\n"
        "    print(json.dumps(post(server, '/graph/v2', {'query': '{ __typename stations(first: 5) { id } }'})))\n"
        "    print(json.dumps(loaded()))\n"
        "    status, _ = post(server, '/uploads', {'destinationId': 'stepImage', 'fileName': 'a.png', 'fileSize': 1,\n"
        "                                         'sha': 64 * '0'})\n"
        "    print(json.dumps([status, loaded()]))\n")
    assert [json.loads(line) for line in output.splitlines()] == [
        [],
        [200, {"data": {"__typename": "Query", "stations": []}}],
        ["ariadne", "graphql"],
        [201, ["ariadne", "graphql", "marshmallow"]],
    ]


def test_an_app_that_does_not_load_on_first_request_loads_graphql_and_marshmallow_at_once(tmp_path):
    # What gunicorn's workers run: no first request waits for them.
    output = run_python(
        tmp_path,
        "import sys\n"
        "from service import create_app\n"
        f"app = create_app({{'DATA_DIR': {str(tmp_path / 'data')!r}, 'API_TOKENS': {TOKENS!r}, 'TEST_MODE': True}})\n"
        "print(sorted(name for name in ('graphql', 'ariadne', 'marshmallow') if name in sys.modules))\n"
        "print('graphql' in app.extensions)\n")
    assert output.splitlines() == ["['ariadne', 'graphql', 'marshmallow']", "True"]


def test_concurrent_first_graphql_requests_wait_for_one_endpoint_and_all_get_their_answers(monkeypatch):
    from service.web.graphql import endpoint as endpoint_module

    built = []

    class SlowToBuild(endpoint_module.GraphQLEndpoint):
        def __init__(self, schema):
            built.append(self)
            time.sleep(0.2)  # keeps the build going while the other requests arrive
            super().__init__(schema)

    monkeypatch.setattr(endpoint_module, "GraphQLEndpoint", SlowToBuild)
    count = 8
    with ThreadedServer() as server:
        assert "graphql" not in server.app.extensions
        barrier = threading.Barrier(count)

        def ask(number):
            barrier.wait()
            return requests.post(server.url + "/graph/v2", headers=server.headers, timeout=30,
                                 json={"query": f"{{ n{number}: __typename }}"})

        with ThreadPoolExecutor(count) as pool:
            answers = list(pool.map(ask, range(count)))
    assert [(answer.status_code, answer.json()) for answer in answers] == [
        (200, {"data": {f"n{number}": "Query"}}) for number in range(count)]
    assert built == [server.app.extensions["graphql"]]
