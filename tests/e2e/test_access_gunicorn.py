"""Tokens made and revoked with `wis token` against real gunicorn, both backends (CONTRACT 16): on the shared backend
two nodes on one database and bucket, on the file backend one node's two workers (a data directory is one node). A
`read` token reads on every node, writes nowhere, signs in to the pages and follows the event stream; once revoked,
every node refuses it, and its event streams (by header and by the pages' session) and its page session end, within
5 s. The token is printed once by `wis token create` and appears in no log."""
import threading
import time

import pytest
import requests

from service.interface import TOKEN_HEADER
from support.events import Follower, commit
from support.servers import SHIPPED_WORKER_CLASS, run_wis
from support.tokens import HEADERS

SHIPPED = ("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4")
# CONTRACT 16: a revoked token is refused on every node, and its streams and page sessions end, within 5 s.
REVOCATION_SECONDS = 5.0
QUERY = {"query": "{ latestEventSeq stations { id } }"}
MUTATION = {"query": 'mutation { stationCreate(input: {station: {id: "st_tablet", name: "By a tablet"}}) }'}


@pytest.fixture
def nodes(tmp_path, backend, start_gunicorn):
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    first = start_gunicorn(tmp_path / "first" / "data", workers=2, backend=backend, extra_args=SHIPPED)
    if backend.name == "file":
        return first, first
    second = start_gunicorn(tmp_path / "second" / "data", workers=2, backend=backend, settings=first.settings,
                            extra_args=SHIPPED)
    return first, second


def wis_token(backend, node, *args):
    """`wis token ...` where the node's storage is: its data directory, or its database."""
    done = run_wis("token", *args, env={"WIS_DATA_DIR": str(node.data_dir), **backend.environment(node.settings)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class Ending:
    """Reads a stream on a thread until the server ends it; `ended` is when it did."""

    def __init__(self, response):
        self.ended = None
        self._thread = threading.Thread(target=self._read, args=(response,), daemon=True)
        self._thread.start()

    def _read(self, response):
        for _ in response.iter_lines():
            pass
        self.ended = time.monotonic()

    def wait(self, seconds):
        self._thread.join(seconds)
        return self.ended


def test_a_read_token_reads_everywhere_and_once_revoked_is_refused_everywhere_within_5_s(backend, nodes):
    first, second = nodes
    token = wis_token(backend, first, "create", "--org", "default", "--scope", "read", "--name", "tablet")
    header = {TOKEN_HEADER: token}
    for node in nodes:
        assert requests.post(f"{node.url}/graph/v2", headers=header, json=QUERY, timeout=30).json()["data"] == {
            "latestEventSeq": 0, "stations": []}
        refused = requests.post(f"{node.url}/graph/v2", headers=header, json=MUTATION, timeout=30).json()
        assert [error["extensions"]["code"] for error in refused["errors"]] == ["FORBIDDEN"]
    page = requests.Session()
    assert page.post(f"{first.url}/view/login", data={"token": token}, timeout=30).url.endswith("/view/processes")
    by_header = Follower(second.url, headers=header)
    by_cookie = page.get(f"{first.url}/events", stream=True, timeout=(10, 30))
    assert (by_header.status_code, by_cookie.status_code) == (200, 200)
    commit(second.url, "st_seen", "Seen by the tablet")  # the streams are live
    streams = [Ending(by_header.response), Ending(by_cookie)]

    wis_token(backend, first, "revoke", "--org", "default", "tablet")
    revoked = time.monotonic()
    for stream in streams:
        ended = stream.wait(REVOCATION_SECONDS * 2)
        assert ended is not None and ended - revoked < REVOCATION_SECONDS
    while any(requests.post(f"{node.url}/graph/v2", headers=header, json=QUERY, timeout=30).status_code != 401
              for node in nodes):
        assert time.monotonic() - revoked < REVOCATION_SECONDS, "a node still accepts the revoked token"
    # Every worker of every node, from now on: each request may land on either worker.
    assert {requests.get(f"{node.url}/uploads/none", headers=header, timeout=30).status_code
            for node in nodes for _ in range(8)} == {401}
    assert page.get(f"{first.url}/view/processes", allow_redirects=False, timeout=30).status_code == 302
    listed = wis_token(backend, first, "list", "--org", "default")
    assert "tablet" in listed and token not in listed
    for node in nodes:
        assert token not in node.stderr_text


def test_a_write_tokens_changes_are_signed_with_its_name_on_every_node(backend, nodes):
    first, second = nodes
    token = wis_token(backend, first, "create", "--org", "default", "--scope", "write", "--name", "pipeline")
    answer = requests.post(f"{second.url}/graph/v2", headers={TOKEN_HEADER: token}, json=MUTATION, timeout=30).json()
    assert answer == {"data": {"stationCreate": "CREATED"}}
    history = requests.post(f"{first.url}/graph/v2", headers=HEADERS, timeout=30, json={
        "query": '{ stationHistory(id: "st_tablet") { author } events { author } }'}).json()["data"]
    assert history == {"stationHistory": [{"author": "pipeline"}], "events": [{"author": "pipeline"}]}
