"""The embeddable threaded server (service.testing) and the test-mode state endpoints."""
import hashlib
import os
import subprocess
import sys

import pytest
import requests

from service import create_app
from service.testing import ServiceSession, ThreadedServer
from service.interface import TOKEN_HEADER
from support.media import SMALL_PNG
from support.over_http import upload_png
from support.tokens import TOKENS

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


def test_threaded_server_keeps_a_data_dir_it_was_given(tmp_path):
    with ThreadedServer(token="given-token-123", data_dir=tmp_path / "data", org="acme") as server:
        assert server.url.startswith("http://127.0.0.1:")
        with server.session() as session:
            path = upload_png(session)
        response = requests.get(server.url + path, headers={TOKEN_HEADER: "given-token-123"}, timeout=5)
        assert response.content == SMALL_PNG
    assert (tmp_path / "data" / "orgs" / "acme").is_dir()


@pytest.mark.parametrize("method, path", [("POST", "/_test/reset"), ("GET", "/_test/objects"),
                                          ("POST", "/_test/faults"), ("DELETE", "/_test/faults")])
def test_test_endpoints_are_absent_unless_test_mode_is_on(client, auth, method, path):
    assert client.open(path, method=method, headers=auth, json={"status": 503}).status_code == 404


@pytest.mark.parametrize("method, path", [("POST", "/_test/reset"), ("GET", "/_test/objects"),
                                          ("POST", "/_test/faults"), ("DELETE", "/_test/faults")])
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


def test_threaded_server_works_from_a_plain_script_without_pytest(tmp_path):
    script = tmp_path / "embed.py"
    script.write_text(
        "import sys, requests\n"
        "from service.testing import ThreadedServer\n"
        "with ThreadedServer() as server:\n"
        "    print(requests.get(server.url + '/healthz', timeout=5).json()['status'])\n"
        "print('pytest' in sys.modules)\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", "False"]
