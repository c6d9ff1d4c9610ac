"""End to end: real gunicorn with 2 workers, driven over HTTP."""
import threading

import pytest
import requests
from service.interface import TOKEN_HEADER

PROCESS_CREATE = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"
PRODUCT_CREATE = "mutation($input: ProductCreateInput!) { productCreate(input: $input) }"
STATION_CREATE = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"


@pytest.fixture
def gql(gunicorn_server, auth):
    """POST one GraphQL request to the server; return the JSON body of its 200 answer."""

    def post(query, variables=None, session=requests):
        response = session.post(gunicorn_server.url + "/graph/v2", json={"query": query, "variables": variables},
                                headers=auth, timeout=60)
        assert response.status_code == 200, response.text
        return response.json()

    return post


def test_three_mutations_and_read_back(gunicorn_server, gql):
    process = {"id": "proc_e2e", "name": "E2E", "steps": [{"id": "step_1", "actions": [
        {"id": "act_1", "description": {"text": "Tighten"}, "inputParts": [{"part": {"id": "bolt"}, "quantity": 3}]}]}]}
    assert gql(PROCESS_CREATE, {"input": {"process": process}}) == {"data": {"processCreate": "CREATED"}}
    assert gql(PROCESS_CREATE, {"input": {"process": {"id": "final_e2e", "name": "Final"}}}) == {
        "data": {"processCreate": "CREATED"}}
    product = {"id": "prod_e2e", "name": "P", "finalProcessId": "final_e2e",
               "dependencies": [{"processId": "final_e2e", "upstreamProcessId": "proc_e2e"}]}
    assert gql(PRODUCT_CREATE, {"input": {"product": product}}) == {"data": {"productCreate": "CREATED"}}
    assert gql(STATION_CREATE, {"input": {"station": {"id": "st_e2e", "name": "S"}}}) == {
        "data": {"stationCreate": "CREATED"}}
    body = gql("""{
        process(id: "proc_e2e") { revision billOfMaterials { part { id } quantity } steps { torqueGroups { actions { id } } } }
        products { id dependencies { upstreamProcessId quantity } }
        stations { id name }
    }""")
    assert body == {"data": {
        "process": {"revision": 1, "billOfMaterials": [{"part": {"id": "bolt"}, "quantity": 3.0}],
                    "steps": [{"torqueGroups": [{"actions": [{"id": "act_1"}]}]}]},
        "products": [{"id": "prod_e2e", "dependencies": [{"upstreamProcessId": "proc_e2e", "quantity": 1}]}],
        "stations": [{"id": "st_e2e", "name": "S"}]}}


def test_a_missing_or_unknown_token_is_a_401_graphql_tools_can_read(gunicorn_server):
    for headers in ({}, {TOKEN_HEADER: "not-a-known-token"}):
        response = requests.post(gunicorn_server.url + "/graph/v2", json={"query": "{ stations { id } }"},
                                 headers=headers, timeout=10)
        assert response.status_code == 401
        assert response.headers["Content-Type"] == "application/json"
        body = response.json()
        assert body["error"].startswith("missing or unknown API token")
        assert body["errors"] == [{"message": body["error"], "extensions": {"code": "UNAUTHENTICATED"}}]
        # Upload and media endpoints keep the house shape alone.
        upload = requests.post(gunicorn_server.url + "/uploads", headers=headers, timeout=10)
        assert upload.status_code == 401 and set(upload.json()) == {"error"}


def test_concurrent_upserts_of_one_id_count_every_acknowledged_write(gql):
    threads, per_thread = 8, 10
    acknowledged, failures = [], []

    def writer(number):
        with requests.Session() as session:
            for attempt in range(per_thread):
                process = {"id": "shared_proc", "name": f"writer {number} attempt {attempt}",
                           "steps": [{"id": f"step_{number}_{attempt}"}]}
                body = gql(PROCESS_CREATE, {"input": {"process": process}}, session)
                if body.get("data", {}).get("processCreate") in ("CREATED", "UPDATED"):
                    acknowledged.append(body["data"]["processCreate"])
                else:
                    failures.append(body)

    workers = [threading.Thread(target=writer, args=(number,)) for number in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert failures == []
    assert len(acknowledged) == threads * per_thread
    assert acknowledged.count("CREATED") == 1
    body = gql('{ process(id: "shared_proc") { revision name steps { id } } }')
    stored = body["data"]["process"]
    assert stored["revision"] == threads * per_thread
    number, attempt = stored["name"].split()[1::2]
    assert stored["steps"] == [{"id": f"step_{number}_{attempt}"}]
