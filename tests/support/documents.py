"""Processes over the Flask test client, and the benchmark's realistic process and mutation."""
import importlib.util

from support.paths import REPOSITORY


def line_process(name, steps=3):
    """Process "line_1" named `name` with `steps` steps."""
    return {"id": "line_1", "name": name, "steps": [{"id": f"step_{i}", "name": f"{name} {i}"} for i in range(steps)]}


def upsert_process(client, headers, body):
    """processCreate through the Flask test client; return the GraphQL answer."""
    response = client.post("/graph/v2", headers=headers, json={
        "query": "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }",
        "variables": {"input": {"process": body}}})
    assert response.status_code == 200
    return response.get_json()


def read_process(client, headers, identifier="line_1"):
    """id, name, revision and steps (id, name) of a stored process, through the Flask test client."""
    response = client.post("/graph/v2", headers=headers, json={
        "query": "query($id: String!) { process(id: $id) { id name revision steps { id name } } }",
        "variables": {"id": identifier}})
    assert response.status_code == 200
    return response.get_json()["data"]["process"]


def _bench_module(name):
    """A module of bench/, loaded from its file (sys.path stays as it is)."""
    path = REPOSITORY / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The benchmark's realistic process and its mutation.
_payload = _bench_module("payload")
BENCH_MUTATION, bench_process = _payload.MUTATION, _payload.process
