"""GraphQL subscriptions with the graphql-sse npm package's own client (distinct connections mode) under Node, against
real gunicorn with the shipped worker, both backends: each event a result with the fields asked for (the object as of
its revision included), and a document that fails validation answered as one result with its errors, then the end."""
import json
import subprocess

import pytest
import requests

from support.events import commit
from support.servers import JS_DIR, SHIPPED_WORKER_CLASS
from support.tokens import HEADERS, TOKEN

SUBSCRIBE = 'subscription { events(types: ["station.*"]) { seq type id revision name station { name } } }'


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend, start_module_gunicorn):
    return start_module_gunicorn(tmp_path_factory.mktemp("subscriptions") / "data", workers=2, backend=backend,
                                 extra_args=("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4"))


def subscribe(node, server, count, query):
    """The client's subscription, running: its first line says it is connected (or it ended at once)."""
    return subprocess.Popen([node, str(JS_DIR / "graphql_sse_subscribe.mjs"), f"{server.url}/graph/v2", TOKEN,
                             str(count), query], cwd=JS_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def outcome(process):
    out, err = process.communicate(timeout=90)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_each_event_is_a_result_with_the_fields_asked_for(node, server):
    process = subscribe(node, server, 3, SUBSCRIBE)
    assert json.loads(process.stdout.readline()) == {"connected": True}
    start = requests.post(f"{server.url}/graph/v2", headers=HEADERS, timeout=30,
                          json={"query": "{ latestEventSeq }"}).json()["data"]["latestEventSeq"]
    commit(server.url, "sse_press", "Press")
    commit(server.url, "sse_press", "Press 2")
    requests.post(f"{server.url}/graph/v2", headers=HEADERS, timeout=30,
                  json={"query": 'mutation { stationDelete(id: "sse_press") }'})
    found = outcome(process)
    assert found["error"] is None
    assert [result["data"]["events"] for result in found["results"]] == [
        {"seq": start + 1, "type": "station.created", "id": "sse_press", "revision": 1, "name": "Press",
         "station": {"name": "Press"}},
        {"seq": start + 2, "type": "station.updated", "id": "sse_press", "revision": 2, "name": "Press 2",
         "station": {"name": "Press 2"}},
        {"seq": start + 3, "type": "station.deleted", "id": "sse_press", "revision": 3, "name": None,
         "station": None}]


def test_a_document_that_fails_validation_is_one_result_with_its_errors_then_the_end(node, server):
    found = outcome(subscribe(node, server, 5, "subscription { events { seq colour } }"))
    assert found["completed"] and found["error"] is None
    [result] = found["results"]
    assert "data" not in result
    [error] = result["errors"]
    assert error["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED" and "colour" in error["message"]
