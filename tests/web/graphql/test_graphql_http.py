"""The GraphQL endpoint through the Flask test client: mutations, read-back, errors, auth, tenancy, limits."""
import json
import re

import pytest

from service import create_app
from service.config import load_config
from service.interface.kinds import PROCESSES, STATIONS
from service.errors import ConfigurationError
from service.web.graphql import load_schema
from service.storage import get_repository
from service.interface import TOKEN_HEADER
from support.datadir import store_media
from support.tokens import TOKENS

PROCESS_CREATE = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"
PRODUCT_CREATE = "mutation($input: ProductCreateInput!) { productCreate(input: $input) }"
STATION_CREATE = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"
PROCESS_FIELDS = """
  id name description partNumber startBehavior endBehavior autoSignoutMinutes revision createdAt updatedAt
  image { path }
  billOfMaterials { part { id description serial { id name pattern } } quantity }
  steps {
    id name
    instructionText { text bold italic underline color }
    primaryImage { path }
    video { path title autoplay loop }
    alerts { severity title text }
    notes { title text }
    actions {
      id kind torque
      description { text }
      inputParts { part { id description serial { id name pattern } } quantity }
      outputPart { id serial { id } }
      toolUsed { id name description }
      measurement { measured units min max }
      confirmation { confirmed }
      scanPart { id serial { id name } }
    }
    torqueGroups { tool { id name } actions { id } }
  }
"""
READ_PROCESS = "query($id: String!) { process(id: $id) {" + PROCESS_FIELDS + "} }"


def gql(client, headers, query, variables=None):
    response = client.post("/graph/v2", json={"query": query, "variables": variables}, headers=headers)
    return response.status_code, response.get_json()


def create_process(client, headers, process):
    return gql(client, headers, PROCESS_CREATE, {"input": {"process": process}})


def read_process(client, headers, identifier):
    status, body = gql(client, headers, READ_PROCESS, {"id": identifier})
    assert status == 200 and "errors" not in body, body
    return body["data"]["process"]


def bad_fields(body):
    assert all(error["extensions"]["code"] == "BAD_USER_INPUT" for error in body["errors"]), body
    assert all(error["message"].startswith(error["extensions"]["field"] + ": ") for error in body["errors"]), body
    return [error["extensions"]["field"] for error in body["errors"]]


def upload(app, org, path, data=b"\x89PNG\r\n\x1a\n"):
    """Publish a media file as the upload side does."""
    store_media(get_repository(app), org, path, data)


FULL_PROCESS = {
    "id": "proc_full", "name": "Assemble motor", "description": "Main line", "partNumber": "PN-100",
    "startBehavior": "IMMEDIATE", "endBehavior": "NEXT_PROCESS", "autoSignoutMinutes": 15,
    "image": {"path": "/api/v1/images/abc-thumb.png"},
    "steps": [
        {"id": "step_1", "name": "Mount", "instructionText": {"text": "Mount the motor", "bold": True, "color": "#112233"},
         "primaryImage": {"path": "/api/v1/images/abc-thumb.png"},
         "video": {"path": "/api/v1/videos/abc-howto.mp4", "title": "How to", "autoplay": True},
         "alerts": [{"severity": "DANGER", "title": "Hot", "text": "Surface is hot"}, {"text": "Mind the edge"}],
         "notes": [{"title": "Tip", "text": "Use gloves"}],
         "actions": [
             {"id": "act_place", "description": {"text": "Place the motor"},
              "inputParts": [{"part": {"id": "motor", "description": "Motor",
                                        "serial": {"id": "motor_sn", "name": "Motor serial", "pattern": "^M[0-9]+$"}}},
                             {"part": {"id": "screw_m4"}, "quantity": 4}],
              "outputPart": {"id": "assembly"}},
             {"id": "act_fix", "description": {"text": "Tighten the screws"},
              "toolUsed": {"id": "driver_1", "name": "Driver", "description": "2 Nm"},
              "inputParts": [{"part": {"id": "assembly"}}, {"part": {"id": "cable"}, "quantity": 0.5}],
              "measurement": {"measured": "torque", "units": "torque-Nm", "min": 1.8, "max": 2.2}},
             {"id": "act_check", "confirmation": {"confirmed": "Motor turns freely"},
              "measurement": {"measured": "gap", "units": "length-mm", "min": 0, "max": 1},
              "inputParts": [{"part": {"id": "shim"}}]},
         ]},
    ],
}


@pytest.fixture
def media(app):
    upload(app, "default", "/api/v1/images/abc-thumb.png")
    upload(app, "default", "/api/v1/videos/abc-howto.mp4", b"\0\0\0\x18ftypmp42")


# ---------------------------------------------------------------- mutations and read-back

def test_process_create_then_update_and_read_back(client, auth, media):
    assert create_process(client, auth, FULL_PROCESS) == (200, {"data": {"processCreate": "CREATED"}})
    stored = read_process(client, auth, "proc_full")
    assert stored["revision"] == 1 and stored["createdAt"] == stored["updatedAt"]
    assert (stored["startBehavior"], stored["endBehavior"], stored["autoSignoutMinutes"]) == ("IMMEDIATE", "NEXT_PROCESS", 15)
    step = stored["steps"][0]
    assert step["instructionText"] == {"text": "Mount the motor", "bold": True, "italic": None, "underline": None, "color": "#112233"}
    assert step["video"] == {"path": "/api/v1/videos/abc-howto.mp4", "title": "How to", "autoplay": True, "loop": None}
    assert step["alerts"] == [{"severity": "DANGER", "title": "Hot", "text": "Surface is hot"},
                              {"severity": "WARNING", "title": None, "text": "Mind the edge"}]
    assert step["notes"] == [{"title": "Tip", "text": "Use gloves"}]
    assert [(a["id"], a["kind"], a["torque"]) for a in step["actions"]] == [
        ("scan_motor", "SCAN", False), ("act_place", "STANDARD", False), ("act_fix", "STANDARD", True),
        ("act_check", "STANDARD", False)]
    scan = step["actions"][0]
    assert scan["scanPart"] == {"id": "motor", "serial": {"id": "motor_sn", "name": "Motor serial"}}
    assert "Motor serial" in scan["description"]["text"] and "motor" in scan["description"]["text"]
    assert step["actions"][1]["inputParts"][1] == {"part": {"id": "screw_m4", "description": None, "serial": None}, "quantity": 4.0}
    assert step["actions"][2]["measurement"] == {"measured": "torque", "units": "torque-Nm", "min": 1.8, "max": 2.2}
    assert step["torqueGroups"] == [{"tool": {"id": "driver_1", "name": "Driver"}, "actions": [{"id": "act_fix"}]}]
    assert [(line["part"]["id"], line["quantity"]) for line in stored["billOfMaterials"]] == [
        ("motor", 1.0), ("screw_m4", 4.0), ("cable", 0.5)]
    assert stored["billOfMaterials"][0]["part"]["serial"]["pattern"] == "^M[0-9]+$"

    smaller = {"id": "proc_full", "name": "Renamed", "steps": [{"id": "step_9"}]}
    assert create_process(client, auth, smaller) == (200, {"data": {"processCreate": "UPDATED"}})
    updated = read_process(client, auth, "proc_full")
    assert updated["revision"] == 2 and updated["createdAt"] == stored["createdAt"]
    assert (updated["name"], updated["description"], updated["image"], updated["partNumber"]) == ("Renamed", None, None, None)
    assert (updated["startBehavior"], updated["endBehavior"], updated["autoSignoutMinutes"]) == ("CONFIRM", "SUMMARY", None)
    assert updated["steps"] == [{"id": "step_9", "name": None, "instructionText": None, "primaryImage": None, "video": None,
                                 "alerts": None, "notes": None, "actions": None, "torqueGroups": []}]
    assert updated["billOfMaterials"] == []


def test_product_create_update_and_read_back(client, auth):
    for identifier in ("prep", "final"):
        create_process(client, auth, {"id": identifier, "name": identifier})
    product = {"id": "prod_1", "name": "Widget", "finalProcessId": "final",
               "dependencies": [{"processId": "final", "upstreamProcessId": "prep", "quantity": 2}]}
    assert gql(client, auth, PRODUCT_CREATE, {"input": {"product": product}}) == (200, {"data": {"productCreate": "CREATED"}})
    assert gql(client, auth, PRODUCT_CREATE, {"input": {"product": {**product, "dependencies": []}}}) == (
        200, {"data": {"productCreate": "UPDATED"}})
    status, body = gql(client, auth, '{ product(id: "prod_1") { id name finalProcessId revision dependencies { processId } }'
                                     ' products { id } }')
    assert body == {"data": {"product": {"id": "prod_1", "name": "Widget", "finalProcessId": "final", "revision": 2,
                                         "dependencies": []},
                             "products": [{"id": "prod_1"}]}}


def test_product_dependency_quantity_defaults_to_1(client, auth):
    for identifier in ("prep", "final"):
        create_process(client, auth, {"id": identifier, "name": identifier})
    product = {"id": "prod_1", "name": "Widget", "finalProcessId": "final",
               "dependencies": [{"processId": "final", "upstreamProcessId": "prep"}]}
    gql(client, auth, PRODUCT_CREATE, {"input": {"product": product}})
    _, body = gql(client, auth, '{ product(id: "prod_1") { dependencies { processId upstreamProcessId quantity } } }')
    assert body["data"]["product"]["dependencies"] == [{"processId": "final", "upstreamProcessId": "prep", "quantity": 1}]


def test_station_create_update_and_read_back(client, auth):
    station = {"id": "bench_1", "name": "Bench 1"}
    assert gql(client, auth, STATION_CREATE, {"input": {"station": station}}) == (200, {"data": {"stationCreate": "CREATED"}})
    assert gql(client, auth, STATION_CREATE, {"input": {"station": {**station, "name": "Bench One"}}}) == (
        200, {"data": {"stationCreate": "UPDATED"}})
    _, body = gql(client, auth, '{ station(id: "bench_1") { id name revision createdAt updatedAt } }')
    stored = body["data"]["station"]
    assert (stored["name"], stored["revision"]) == ("Bench One", 2)
    assert stored["createdAt"].endswith("Z") and stored["updatedAt"] >= stored["createdAt"]


def test_unknown_ids_read_as_null(client, auth):
    _, body = gql(client, auth, '{ process(id: "nope") { id } product(id: "no-such/../id") { id } station(id: "") { id } }')
    assert body == {"data": {"process": None, "product": None, "station": None}}


def test_lists_are_paged_by_id(client, auth):
    for identifier in ["st_c", "st_a", "ST_B", "st_b"]:
        gql(client, auth, STATION_CREATE, {"input": {"station": {"id": identifier, "name": identifier}}})
    page = "query($first: Int, $after: String) { stations(first: $first, after: $after) { id } }"
    _, body = gql(client, auth, "{ stations { id } }")
    assert [s["id"] for s in body["data"]["stations"]] == ["ST_B", "st_a", "st_b", "st_c"]
    _, body = gql(client, auth, page, {"first": 2})
    assert [s["id"] for s in body["data"]["stations"]] == ["ST_B", "st_a"]
    _, body = gql(client, auth, page, {"first": 2, "after": "st_a"})
    assert [s["id"] for s in body["data"]["stations"]] == ["st_b", "st_c"]
    _, body = gql(client, auth, page, {"first": 0})
    assert body["data"]["stations"] == []


def test_first_defaults_to_100_and_is_at_most_1000(app, client, auth):
    documents = get_repository(app).documents
    for number in range(105):
        documents.save("default", STATIONS, f"st_{number:03d}", {"id": f"st_{number:03d}", "name": "x"})
    _, body = gql(client, auth, "{ stations { id } }")
    assert len(body["data"]["stations"]) == 100
    _, body = gql(client, auth, "{ stations(first: 1000) { id } }")
    assert len(body["data"]["stations"]) == 105
    status, body = gql(client, auth, "{ stations(first: 1001) { id } }")
    assert status == 200 and bad_fields(body) == ["first"] and body["data"] is None
    status, body = gql(client, auth, "{ processes(first: -1) { id } }")
    assert bad_fields(body) == ["first"]


@pytest.mark.file_backend_only("spies on the file store's get; the shared store reads a page in one query "
                                 "(tests/engines/test_shared_documents.py checks its plan)")
def test_a_page_opens_only_its_own_documents(app, client, auth, monkeypatch):
    documents = get_repository(app).documents
    for number in range(20):
        documents.save("default", PROCESSES, f"proc_{number:02d}", {"id": f"proc_{number:02d}", "name": "x",
                                                                     "startBehavior": "CONFIRM", "endBehavior": "SUMMARY",
                                                                     "billOfMaterials": []})
    opened = []
    original_get = documents.get
    monkeypatch.setattr(documents, "get", lambda org, kind, identifier: opened.append(identifier) or original_get(org, kind, identifier))
    _, body = gql(client, auth, '{ processes(first: 3, after: "proc_10") { id } }')
    assert [p["id"] for p in body["data"]["processes"]] == ["proc_11", "proc_12", "proc_13"]
    assert opened == ["proc_11", "proc_12", "proc_13"]


# ---------------------------------------------------------------- input errors

def test_domain_errors_name_field_paths_and_store_nothing(app, client, auth):
    process = {"id": "proc_1", "name": "P", "steps": [
        {"id": "step_0"}, {"id": "step_1"},
        {"id": "step_2", "actions": [{"id": "bad-id"}, {"id": "act_ok", "inputParts": [{"part": {"id": "bolt"}, "quantity": 0}]}]}]}
    status, body = create_process(client, auth, process)
    assert status == 200
    assert body["data"] == {"processCreate": None}
    assert bad_fields(body) == ["process.steps[2].actions[0].id", "process.steps[2].actions[1].inputParts[0].quantity"]
    assert body["errors"][0]["path"] == ["processCreate"]
    assert get_repository(app).documents.ids("default", PROCESSES) == []


def test_failed_update_keeps_the_previous_version(client, auth):
    create_process(client, auth, {"id": "proc_1", "name": "First"})
    status, body = create_process(client, auth, {"id": "proc_1", "name": "Second", "autoSignoutMinutes": -1})
    assert bad_fields(body) == ["process.autoSignoutMinutes"]
    stored = read_process(client, auth, "proc_1")
    assert (stored["name"], stored["revision"]) == ("First", 1)


@pytest.mark.parametrize("process, fields", [
    ({"id": "proc_1", "name": "P", "startBehavior": "LATER"}, ["process.startBehavior"]),
    ({"id": "proc_1", "name": "P", "endBehavior": "summary"}, ["process.endBehavior"]),
    ({"id": "proc_1"}, ["process.name"]),
    ({"id": "proc_1", "name": None}, ["process.name"]),
    ({"id": 12345, "name": "P"}, ["process.id"]),
    ({"id": "proc_1", "name": "P", "colour": "red"}, ["process.colour"]),
    ({"id": "proc_1", "name": "P", "autoSignoutMinutes": 1.5}, ["process.autoSignoutMinutes"]),
    ({"id": "proc_1", "name": "P", "steps": [{"id": "step_0"}, {"name": "no id"},
                                            {"id": "step_2", "actions": [{"id": "act_1", "inputParts": [{"quantity": 2}]}]}]},
     ["process.steps[1].id", "process.steps[2].actions[0].inputParts[0].part"]),
    ({"id": "proc_1", "name": "P", "steps": [{"id": "step_0", "alerts": [{"severity": "LOUD"}]}]},
     ["process.steps[0].alerts[0].severity", "process.steps[0].alerts[0].text"]),
    ({"id": "proc_1", "name": "P", "steps": "step_0"}, ["process.steps"]),
])
def test_variable_coercion_errors_are_bad_user_input_named_by_path(app, client, auth, process, fields):
    status, body = create_process(client, auth, process)
    assert status == 200
    assert body["data"] == {"processCreate": None}
    assert bad_fields(body) == fields
    assert get_repository(app).documents.ids("default", PROCESSES) == []


def test_missing_variable_and_missing_process_are_bad_user_input(client, auth):
    status, body = gql(client, auth, PROCESS_CREATE, {})
    assert (status, body["data"], bad_fields(body)) == (200, {"processCreate": None}, ["input"])
    status, body = gql(client, auth, PROCESS_CREATE, {"input": {}})
    assert (status, body["data"], bad_fields(body)) == (200, {"processCreate": None}, ["process"])


def test_variable_nested_in_a_literal_is_named_by_its_full_path(client, auth):
    query = "mutation($p: ProcessInput!) { processCreate(input: {process: $p}) }"
    status, body = gql(client, auth, query, {"p": {"id": "proc_1", "name": "P", "endBehavior": "NEVER"}})
    assert (status, body["data"], bad_fields(body)) == (200, {"processCreate": None}, ["process.endBehavior"])


def test_aliased_mutations_are_null_under_their_aliases(client, auth):
    query = ("mutation($input: StationCreateInput!) { one: stationCreate(input: $input) two: stationCreate(input: $input) }")
    status, body = gql(client, auth, query, {"input": {"station": {"id": "st_1"}}})
    assert (status, body["data"], bad_fields(body)) == (200, {"one": None, "two": None}, ["station.name"])


def test_product_errors(client, auth):
    create_process(client, auth, {"id": "aaa", "name": "A"})
    create_process(client, auth, {"id": "bbb", "name": "B"})
    product = {"id": "prod_1", "name": "W", "finalProcessId": "bbb", "dependencies": [
        {"processId": "bbb", "upstreamProcessId": "aaa"}, {"processId": "aaa", "upstreamProcessId": "bbb"},
        {"processId": "bbb", "upstreamProcessId": "zzz", "quantity": 0}]}
    status, body = gql(client, auth, PRODUCT_CREATE, {"input": {"product": product}})
    assert status == 200 and body["data"] == {"productCreate": None}
    messages = {error["extensions"]["field"]: error["message"] for error in body["errors"]}
    assert messages["product.dependencies"] == "product.dependencies: must not contain a cycle; found aaa -> bbb -> aaa"
    assert "no process 'zzz'" in messages["product.dependencies[2].upstreamProcessId"]
    assert "product.dependencies[2].quantity" in messages


def test_media_of_another_org_cannot_be_referenced(app, client, auth):
    upload(app, "other", "/api/v1/images/xyz-theirs.png")
    status, body = create_process(client, auth, {"id": "proc_1", "name": "P", "image": {"path": "/api/v1/images/xyz-theirs.png"}})
    assert bad_fields(body) == ["process.image.path"]


# ---------------------------------------------------------------- auth and tenancy

@pytest.mark.parametrize("headers", [{}, {TOKEN_HEADER: "wrong-token-123"}, {TOKEN_HEADER: ""},
                                     {"x-pico-api-org": "wrong-token-123"}])
def test_post_needs_a_known_token(client, headers):
    """The house `error` key, and beside it a GraphQL `errors` list that GraphQL tools can show; the message names
    both spellings of the header, so a client of the vendor's documentation knows its header was the right one."""
    response = client.post("/graph/v2", json={"query": "{ stations { id } }"}, headers=headers)
    assert response.status_code == 401 and response.is_json
    message = ("missing or unknown API token: send it in the x-service-api-org header (or x-pico-api-org, the vendor's "
               "spelling)")
    assert response.get_json() == {"error": message,
                                   "errors": [{"message": message, "extensions": {"code": "UNAUTHENTICATED"}}]}


def test_introspection_without_a_token_is_a_graphql_shaped_401(client):
    from graphql import get_introspection_query
    response = client.post("/graph/v2", json={"query": get_introspection_query()})
    assert response.status_code == 401
    assert [error["extensions"]["code"] for error in response.get_json()["errors"]] == ["UNAUTHENTICATED"]


def test_explorer_page_needs_no_token(client):
    response = client.get("/graph/v2")
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    assert "graphiql" in response.get_data(as_text=True).lower()
    assert TOKEN_HEADER in response.get_data(as_text=True)


@pytest.mark.parametrize("environ, persist", [({}, False), ({"WIS_EXPLORER_PERSIST_HEADERS": "1"}, True),
                                              ({"WIS_EXPLORER_PERSIST_HEADERS": "0"}, False)])
def test_explorer_keeps_headers_out_of_the_browser_unless_the_operator_allows_it(tmp_path, environ, persist):
    config = load_config({"DATA_DIR": str(tmp_path), "API_TOKENS": TOKENS}, environ=environ)
    page = create_app(config).test_client().get("/graph/v2").get_data(as_text=True)
    settings = json.loads(re.search(r"const settings = (\{.*\});", page).group(1))
    assert settings["persistHeaders"] is persist and settings["header"] == TOKEN_HEADER


def test_explorer_loads_its_scripts_from_the_service_itself(client):
    """A box on the factory floor has no internet: every script and stylesheet must come from us."""
    import re

    page = client.get("/graph/v2").get_data(as_text=True)
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert assets and all(asset.startswith("/static/") for asset in assets)
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200 and len(response.data) > 1000


def test_other_methods_are_json_405(client, auth):
    response = client.put("/graph/v2", headers=auth)
    assert response.status_code == 405 and "error" in response.get_json()


def test_orgs_never_see_each_other(client, auth, other_auth):
    create_process(client, auth, {"id": "proc_1", "name": "Ours"})
    gql(client, auth, STATION_CREATE, {"input": {"station": {"id": "st_1", "name": "Ours"}}})
    _, body = gql(client, other_auth, '{ process(id: "proc_1") { id } processes { id } station(id: "st_1") { id } stations { id } }')
    assert body == {"data": {"process": None, "processes": [], "station": None, "stations": []}}
    assert create_process(client, other_auth, {"id": "proc_1", "name": "Theirs"}) == (200, {"data": {"processCreate": "CREATED"}})
    assert read_process(client, auth, "proc_1")["name"] == "Ours"
    assert read_process(client, other_auth, "proc_1")["name"] == "Theirs"


def test_product_cannot_reference_another_orgs_process(client, auth, other_auth):
    create_process(client, auth, {"id": "proc_1", "name": "Ours"})
    product = {"id": "prod_1", "name": "W", "finalProcessId": "proc_1", "dependencies": []}
    status, body = gql(client, other_auth, PRODUCT_CREATE, {"input": {"product": product}})
    assert bad_fields(body) == ["product.finalProcessId"]
    _, body = gql(client, other_auth, "{ products { id } }")
    assert body["data"]["products"] == []


def test_ids_differing_in_case_are_two_objects(client, auth):
    assert create_process(client, auth, {"id": "ABC", "name": "upper"})[1]["data"]["processCreate"] == "CREATED"
    assert create_process(client, auth, {"id": "abc", "name": "lower"})[1]["data"]["processCreate"] == "CREATED"
    assert (read_process(client, auth, "ABC")["name"], read_process(client, auth, "abc")["name"]) == ("upper", "lower")


# ---------------------------------------------------------------- malformed requests and limits

def post_raw(client, auth, data, content_type="application/json"):
    response = client.post("/graph/v2", data=data, headers=auth, content_type=content_type)
    body = response.get_json()
    assert isinstance(body["errors"][0]["message"], str)
    return response.status_code, body


@pytest.mark.parametrize("data", [
    b"{not json", b"[1, 2]", b'"query"', b"\xff\xfe\x00", b"", json.dumps({"query": 5}).encode(),
    json.dumps({"variables": {}}).encode(), json.dumps({"query": "{ stations { id } }", "variables": [1]}).encode(),
    json.dumps({"query": "{ stations { id } }", "operationName": 7}).encode(),
    b'{"query": "{ stations { id } }", "variables": {"n": NaN}}', b"[" * 100_000 + b"]" * 100_000,
])
def test_malformed_bodies_are_400(client, auth, data):
    status, body = post_raw(client, auth, data)
    assert status == 400 and "data" not in body


@pytest.mark.parametrize("query, expected", [
    ("{ stations { id }", "Syntax Error"),
    ("{ stations { id colour } }", "Cannot query field 'colour'"),
    ("mutation { processCreate(input: {process: {id: \"abc\", name: \"x\", startBehavior: LATER}}) }", "LATER"),
    ("mutation($input: StationCreateInput!) { processCreate(input: $input) }", "$input"),
    ("{" * 5000 + "}" * 5000, "Syntax Error"),
    ("{ stations " + "{ id " * 30 + "}" * 31, "nested"),
    ("{ " + " ".join(f"a{i}: stations {{ id }}" for i in range(2000)) + " }", "tokens"),
    ("{ " + " ".join(f"a{i}: stations {{ id }}" for i in range(300)) + " }", "more than 500 fields"),
    ("query { ...f9 } fragment f0 on Query { stations { id } }"
     + "".join(f" fragment f{i} on Query {{ ...f{i - 1} ...f{i - 1} }}" for i in range(1, 10)), "more than 500 fields"),
    ("query A { stations { id } } query B { stations { id } }", "operationName"),
    ("subscription { stations { id } }", "Cannot query field 'stations' on type 'Subscription'"),
])
def test_invalid_documents_are_400_with_errors(client, auth, query, expected):
    status, body = post_raw(client, auth, json.dumps({"query": query}))
    assert status == 400 and "data" not in body
    assert expected in json.dumps(body["errors"])


def test_a_huge_query_text_is_413(client, auth):
    status, body = post_raw(client, auth, json.dumps({"query": "{ stations { id } }" + " " * 5_000_000}))
    assert status == 413 and "100000" in body["errors"][0]["message"]


def test_unknown_operation_name_is_400(client, auth):
    status, body = post_raw(client, auth, json.dumps({"query": "query A { stations { id } }", "operationName": "B"}))
    assert status == 400 and "'B'" in body["errors"][0]["message"]


def test_an_empty_operation_name_is_none_as_over_get(client, auth):
    """POSTed as GraphQL over HTTP's GET takes it: the document's one operation runs."""
    response = client.post("/graph/v2", headers=auth, json={"query": "query A { stations { id } }", "operationName": ""})
    assert (response.status_code, response.get_json()) == (200, {"data": {"stations": []}})
    status, body = post_raw(client, auth, json.dumps({"query": "query A { stations { id } } query B { products { id } }",
                                                      "operationName": ""}))
    assert status == 400 and "say which one to run in `operationName`" in body["errors"][0]["message"]


def test_introspection_works_for_the_explorer(client, auth):
    from graphql import get_introspection_query
    status, body = gql(client, auth, get_introspection_query(descriptions=True, input_value_deprecation=True))
    assert status == 200 and "errors" not in body
    names = {t["name"] for t in body["data"]["__schema"]["types"]}
    assert {"ProcessInput", "StepInput", "ActionInput", "VideoInput", "AlertInput", "InstructionNoteInput", "UpsertResult"} <= names


def test_a_1000_step_process_is_accepted(client, auth):
    steps = [{"id": f"step_{i:04d}", "name": f"Step {i}", "instructionText": {"text": "Do the thing " * 20},
              "actions": [{"id": f"act_{i:04d}_{j}", "description": {"text": "Tighten the bolt " * 5},
                           "toolUsed": {"id": "wrench_1"}, "inputParts": [{"part": {"id": f"part_{j}"}, "quantity": 2}]}
                          for j in range(3)]} for i in range(1000)]
    status, body = create_process(client, auth, {"id": "big_one", "name": "Big", "steps": steps})
    assert (status, body) == (200, {"data": {"processCreate": "CREATED"}})
    _, body = gql(client, auth, '{ process(id: "big_one") { steps { id } billOfMaterials { part { id } quantity } } }')
    assert len(body["data"]["process"]["steps"]) == 1000
    assert body["data"]["process"]["billOfMaterials"][0] == {"part": {"id": "part_0"}, "quantity": 2000.0}


def test_each_distinct_query_text_is_parsed_once(app, client, auth):
    prepare = app.extensions["graphql"].prepare
    before = prepare.cache_info()
    for number in range(3):
        gql(client, auth, STATION_CREATE, {"input": {"station": {"id": f"st_{number}", "name": "n"}}})
    after = prepare.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)


def test_schema_load_failure_names_the_file(monkeypatch):
    monkeypatch.setattr("service.web.graphql.SCHEMA_FILE", "missing-schema.graphql")
    with pytest.raises(ConfigurationError) as excinfo:
        load_schema()
    assert "missing-schema.graphql" in str(excinfo.value)


def test_create_app_builds_the_endpoint_at_once_and_a_broken_schema_stops_it(tmp_path, monkeypatch):
    config = {"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS}
    # Built by create_app (what gunicorn's workers run): no request waits for graphql-core and the schema.
    assert "graphql" in create_app(config).extensions
    monkeypatch.setattr("service.web.graphql.SCHEMA_FILE", "missing-schema.graphql")
    with pytest.raises(ConfigurationError, match="missing-schema.graphql"):
        create_app(config)


def test_an_app_loading_on_first_request_builds_the_endpoint_then(tmp_path, monkeypatch, auth, caplog):
    config = {"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "LOAD_ON_FIRST_REQUEST": True}
    app = create_app(config)
    assert "graphql" not in app.extensions
    assert gql(app.test_client(), auth, "{ __typename }") == (200, {"data": {"__typename": "Query"}})
    assert "graphql" in app.extensions
    # A schema that cannot be loaded fails each GraphQL request, the log naming the file; the rest keeps working.
    monkeypatch.setattr("service.web.graphql.SCHEMA_FILE", "missing-schema.graphql")
    client = create_app(config).test_client()
    assert client.get("/healthz").status_code == 200
    for _ in range(2):
        assert client.post("/graph/v2", headers=auth, json={"query": "{ __typename }"}).status_code == 500
    assert "cannot load the GraphQL schema from" in caplog.text and "missing-schema.graphql" in caplog.text


def test_resolver_failure_is_a_graphql_error_without_details(app, client, auth, monkeypatch):
    def broken(*_args):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(get_repository(app).documents, "page", broken)
    status, body = gql(client, auth, "{ stations { id } }")
    assert status == 200 and body["errors"][0]["message"] == "internal server error"
    assert "secret" not in json.dumps(body)
