"""Half of a UTF-16 surrogate pair: JSON may escape one alone ("\\ud800"), the json module decodes it to a string that
no file, database or answer can hold (UTF-8 has no such character). Every entry point that takes a JSON string
refuses it naming the field, a 4xx or BAD_USER_INPUT, and stores nothing; before, each of these was a 500.

The bodies are written by hand: a JSON encoder would refuse to write them, as a careful client's does.
"""
import pytest

from support.tokens import HEADERS

LONE = "x\\ud800y"  # as the JSON text spells it
JSON = {**HEADERS, "Content-Type": "application/json"}
GRAPHQL_INPUTS = {
    "station.name": ('"mutation($i: StationCreateInput!) { stationCreate(input: $i) }"',
                     '{"i": {"station": {"id": "st_lone", "name": "%s"}}}'),
    "process.steps[0].instructionText.text": (
        '"mutation($i: ProcessCreateInput!) { processCreate(input: $i) }"',
        '{"i": {"process": {"id": "pr_lone", "name": "Weld", "steps": [{"id": "s_1", "name": "One", '
        '"instructionText": {"text": "%s"}}]}}}'),
    "product.name": ('"mutation($i: ProductCreateInput!) { productCreate(input: $i) }"',
                     '{"i": {"product": {"id": "pd_lone", "name": "%s", "finalProcessId": "pr_lone", "dependencies": []}}}'),
    "comment": ('"mutation($c: String) { stationCreate(input: {station: {id: \\"st_lone\\", name: \\"A\\"}}, '
                'comment: $c) }"', '{"c": "%s"}'),
}


@pytest.fixture
def client(make_app):
    return make_app(TEST_MODE=True).test_client()


def stored(client):
    """What the org holds (documents, media, streams), its latest event and the faults set: on either backend."""
    seq = client.post("/graph/v2", headers=HEADERS, json={"query": "{ latestEventSeq }"}).get_json()
    return (client.get("/_test/objects", headers=HEADERS).get_json(), seq,
            client.get("/_test/faults", headers=HEADERS).get_json())


@pytest.mark.parametrize("field", sorted(GRAPHQL_INPUTS))
def test_a_lone_surrogate_in_a_graphql_variable_is_bad_user_input_naming_its_field(client, field):
    query, variables = GRAPHQL_INPUTS[field]
    before = stored(client)
    response = client.post("/graph/v2", headers=JSON,
                           data='{"query": %s, "variables": %s}' % (query, variables % LONE))
    assert response.status_code == 200
    errors = response.get_json()["errors"]  # all of an input's problems at once: the surrogate's among them
    assert {error["extensions"]["code"] for error in errors} == {"BAD_USER_INPUT"}, errors
    assert [error for error in errors if error["message"].startswith(f"{field}: holds half of a UTF-16 surrogate")]
    assert stored(client) == before


@pytest.mark.parametrize("path, body, field", [
    ("/uploads", '{"destinationId": "stepImage", "fileName": "%s.png", "fileSize": 10, "sha": "' + "a" * 64 + '"}',
     "fileName"),
    ("/_test/faults", '{"path": "^/%s$", "status": 503}', "path"),
    ("/_test/faults", '{"status": 503, "error": "%s"}', "error"),
])
def test_a_lone_surrogate_in_a_json_body_is_400_naming_its_field(client, path, body, field):
    before = stored(client)
    response = client.post(path, headers=JSON, data=body % LONE)
    assert response.status_code == 400
    assert response.get_json()["error"].startswith(f"{field}: holds half of a UTF-16 surrogate pair")
    assert stored(client) == before
