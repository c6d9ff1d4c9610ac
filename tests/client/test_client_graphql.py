"""service.client GraphQL calls against real gunicorn: upserts, read-back, errors as ClientError."""
import pytest

from service.client import Client, ClientError
from support.media import write_png


pytestmark = pytest.mark.file_backend_only("the client's own behaviour (requests, retries, progress, resuming); the server's answers are tested on both backends")


def test_upserts_answer_created_then_updated(api):
    assert api.create_station({"id": "station_a", "name": "Line A"}) == "CREATED"
    assert api.create_station({"id": "station_a", "name": "Line A, renamed"}) == "UPDATED"
    station = api.graphql("query($id: String!) { station(id: $id) { name revision } }", {"id": "station_a"})
    assert station == {"station": {"name": "Line A, renamed", "revision": 2}}


def test_process_round_trip_with_media_and_derived_data(api, tmp_path):
    image = api.upload(write_png(tmp_path / "step.png"), "stepImage", state_dir=tmp_path / "state")
    process = {
        "id": "gearbox", "name": "Gearbox",
        "steps": [{
            "id": "mount", "name": "Mount", "primaryImage": {"path": image},
            "actions": [{"id": "bolt", "description": {"text": "Tighten the bolts"},
                         "inputParts": [{"part": {"id": "bolt_m6"}, "quantity": 4}]}],
        }],
    }

    assert api.create_process(process) == "CREATED"
    stored = api.get_process("gearbox")

    assert (stored["name"], stored["revision"], stored["startBehavior"]) == ("Gearbox", 1, "CONFIRM")
    step = stored["steps"][0]
    assert step["primaryImage"] == {"path": image}
    assert step["actions"][0]["torque"] is True
    assert stored["billOfMaterials"] == [{"part": {"id": "bolt_m6", "description": None, "serial": None},
                                          "quantity": 4.0}]


def test_missing_process_is_none(api):
    assert api.get_process("no_such_process") is None


def test_invalid_input_raises_with_field_and_code(api):
    with pytest.raises(ClientError) as caught:
        api.create_process({"id": "ok_id", "name": "P", "steps": [{"id": "bad id!"}]})

    assert caught.value.code == "BAD_USER_INPUT"
    assert caught.value.field == "process.steps[0].id"
    assert "process.steps[0].id" in caught.value.message
    assert api.get_process("ok_id") is None


def test_product_of_unknown_process_is_refused(api):
    with pytest.raises(ClientError) as caught:
        api.create_product({"id": "bike", "name": "Bike", "finalProcessId": "nowhere", "dependencies": []})
    assert caught.value.code == "BAD_USER_INPUT"


def test_wrong_token_is_a_401_client_error(server):
    with pytest.raises(ClientError) as caught:
        Client(server.url, "not-a-token").create_station({"id": "abc", "name": "x"})
    assert caught.value.status == 401
