"""What one GraphQL request may cost: an answer is bounded by a budget spent while it is built (aliases repeating
a large field are refused, not answered in hundreds of megabytes), and no number reaches storage as null (1e400
written in the query text is refused like the same value in `variables`).

The end-to-end tests go through real gunicorn on both backends; the budget's accounting is checked in process, with
tracemalloc's peak and counts of the documents read (never wall time).
"""
import json
import tracemalloc

import pytest
import requests

from service.interface.kinds import PROCESSES
from service.web.graphql.budget import BudgetedExecutor
from service.web.graphql.limits import FIELD_BUDGET, RESPONSE_BUDGET
from service.interface import MAX_INPUT_OBJECTS, MAX_NAME_LENGTH, MAX_REQUEST_BODY, MAX_TEXT_LENGTH
from service.storage import get_repository
from service.storage.contract import read_budget as read_budget_module
from support.tokens import HEADERS
from support.paths import REPOSITORY

HANG_GUARD = 60
PROCESS_CREATE = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"
LONGEST_TEXT = "t" * MAX_TEXT_LENGTH


def post(server, query, variables=None):
    response = requests.post(server.url + "/graph/v2", json={"query": query, "variables": variables}, headers=HEADERS,
                             timeout=HANG_GUARD)
    assert response.status_code == 200, response.text[:300]
    return response


def create(server, process):
    body = post(server, PROCESS_CREATE, {"input": {"process": process}}).json()
    assert body in ({"data": {"processCreate": "CREATED"}}, {"data": {"processCreate": "UPDATED"}}), body


def aliased(count, identifier, selection):
    return "{ " + " ".join(f'a{i}: process(id: "{identifier}") {{ {selection} }}' for i in range(count)) + " }"


# ---------------------------------------------------------------- the answer's budget, end to end

def test_a_large_field_under_100_aliases_is_refused_while_the_answer_is_built(server):
    """50 texts of 20,000 characters (1 MB) under 100 aliases would be a 100 MB answer; it stops at the budget with
    an error that says what to do, and one alias of it is answered whole."""
    create(server, {"id": "proc_long", "name": "Long", "steps": [
        {"id": f"step_{i}", "instructionText": {"text": LONGEST_TEXT}} for i in range(50)]})
    response = post(server, aliased(100, "proc_long", "steps { instructionText { text } }"))
    body = response.json()
    assert body["data"] is None and len(response.content) < 2_000
    [error] = body["errors"]
    assert error["extensions"] == {"code": "RESPONSE_TOO_LARGE"}
    assert f"more than {RESPONSE_BUDGET:,} characters" in error["message"]
    assert all(advice in error["message"] for advice in ("`first`", "fewer fields", "aliases"))

    whole = post(server, aliased(1, "proc_long", "steps { instructionText { text } }")).json()
    assert "errors" not in whole
    assert [step["instructionText"]["text"] for step in whole["data"]["a0"]["steps"]] == [LONGEST_TEXT] * 50


# ---------------------------------------------------------------- numbers JSON cannot store, end to end

INFINITE_CASES = {
    "quantity": ('inputParts: [{part: {id: "bolt"}, quantity: 1e400}]', ["inputParts[0].quantity"]),
    "min and max": ("measurement: {min: -1e400, max: 1e400}", ["measurement.min", "measurement.max"]),
    "a sum past 1.8e308": ('inputParts: [{part: {id: "bolt"}, quantity: 1.5e308}, {part: {id: "bolt"}, quantity: '
                           '1.5e308}]', ["inputParts[1].quantity"]),
}


@pytest.mark.parametrize("action_fields, fields", INFINITE_CASES.values(), ids=INFINITE_CASES.keys())
def test_a_number_json_cannot_store_in_the_query_text_is_bad_user_input(server, action_fields, fields):
    """Once stored as null, such a process failed to read back, and a page of processes answered data: null."""
    create(server, {"id": "proc_fine", "name": "Fine", "steps": [{"id": "step_1", "actions": [
        {"id": "act_1", "inputParts": [{"part": {"id": "bolt"}, "quantity": 2.5}]}]}]})
    query = ('mutation { processCreate(input: {process: {id: "proc_inf", name: "Inf", steps: [{id: "step_1", '
             f'actions: [{{id: "act_1", {action_fields}}}]}}]}}}}) }}')
    body = post(server, query).json()
    assert body["data"] == {"processCreate": None}
    assert [error["extensions"] for error in body["errors"]] == [
        {"code": "BAD_USER_INPUT", "field": f"process.steps[0].actions[0].{field}"} for field in fields]
    assert post(server, '{ process(id: "proc_inf") { id } }').json() == {"data": {"process": None}}
    listing = post(server, "{ processes { id billOfMaterials { quantity } } }").json()
    assert "errors" not in listing and "proc_inf" not in [found["id"] for found in listing["data"]["processes"]]
    assert {"id": "proc_fine", "billOfMaterials": [{"quantity": 2.5}]} in listing["data"]["processes"]


def test_the_same_number_in_variables_is_refused_too(server):
    raw = ('{"query": "' + PROCESS_CREATE + '", "variables": {"input": {"process": {"id": "proc_inf", "name": "Inf", '
           '"steps": [{"id": "step_1", "actions": [{"id": "act_1", "measurement": {"max": 1e400}}]}]}}}}')
    response = requests.post(server.url + "/graph/v2", data=raw, timeout=HANG_GUARD,
                             headers={**HEADERS, "Content-Type": "application/json"})
    body = response.json()
    assert response.status_code == 200 and body["data"] == {"processCreate": None}
    assert [error["extensions"] for error in body["errors"]] == [
        {"code": "BAD_USER_INPUT", "field": "process.steps[0].actions[0].measurement.max"}]


# ---------------------------------------------------------------- the budget's accounting, in process

def graphql(client, query):
    response = client.post("/graph/v2", json={"query": query}, headers=HEADERS)
    assert response.status_code == 200
    return response


@pytest.fixture
def reads(app, monkeypatch):
    """How many documents the app has read from storage so far: one per `get`, one per document a page gave."""
    documents = get_repository(app).documents
    counted = {"get": 0, "page": 0}
    get, page = documents.get, documents.page

    def counting_get(*args, **kwargs):
        counted["get"] += 1
        return get(*args, **kwargs)

    def counting_page(*args, **kwargs):
        for document in page(*args, **kwargs):
            counted["page"] += 1
            yield document
    monkeypatch.setattr(documents, "get", counting_get)
    monkeypatch.setattr(documents, "page", counting_page)
    return counted


def store_legacy_process(app, identifier, description):
    """A process stored before texts had a limit: its description may be megabytes long."""
    get_repository(app).documents.save("default", PROCESSES, identifier, {
        "id": identifier, "name": "Legacy", "description": description, "startBehavior": "CONFIRM",
        "endBehavior": "SUMMARY", "steps": None, "billOfMaterials": []})


# A text, and the stored input that holds it (a JSON value, spent as long as it is written).
LARGE_FIELDS = ["description", "input"]


@pytest.mark.parametrize("field", LARGE_FIELDS)
def test_aliases_stop_reading_once_the_budget_is_spent_and_memory_stays_near_it(app, client, reads, monkeypatch,
                                                                                 field):
    budget = 4_000_000
    monkeypatch.setattr(BudgetedExecutor, "budget", budget)
    store_legacy_process(app, "proc_legacy", "d" * 400_000)
    query = aliased(100, "proc_legacy", field)
    graphql(client, "{ stations { id } }")  # the app's first request builds what every request shares
    tracemalloc.start()
    try:
        response = graphql(client, query)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert response.get_json()["errors"][0]["extensions"]["code"] == "RESPONSE_TOO_LARGE"
    # 9 descriptions and the field names fit the budget; the 10th goes over it, and no document is read after it.
    assert reads["get"] == 10
    # The whole answer would be 40 MB (and 80 MB more while serialized): what is held stays near the budget.
    assert peak < 4 * budget


@pytest.mark.parametrize("field", LARGE_FIELDS)
def test_a_page_over_the_budget_is_refused_naming_first(app, client, reads, monkeypatch, field):
    monkeypatch.setattr(BudgetedExecutor, "budget", 1_000_000)
    for number in range(30):
        store_legacy_process(app, f"proc_{number:02d}", "d" * 50_000)
    body = graphql(client, f"{{ processes(first: 30) {{ id {field} }} }}").get_json()
    assert body["data"] is None and "`first`" in body["errors"][0]["message"]
    assert body["errors"][0]["path"] == ["processes", 19, field]  # 19 fit, the 20th goes over
    assert reads["page"] == 20  # and no document after it is read
    answered = graphql(client, f"{{ processes(first: 19) {{ id {field} }} }}").get_json()
    assert "errors" not in answered and len(answered["data"]["processes"]) == 19


# ---------------------------------------------------------------- the budget of what one request reads

@pytest.mark.parametrize("query, path", [
    (lambda count: "{ " + " ".join(f'a{i}: process(id: "proc_00") {{ id }}' for i in range(count)) + " }", ["a9"]),
    (lambda count: f"{{ processes(first: {count}) {{ id }} }}", ["processes"]),
    (lambda count: f"{{ events(first: {count}) {{ seq process {{ id }} }} }}", ["events", 9, "process"]),
], ids=["aliases of one object", "a page", "the objects of events"])
def test_an_operation_reading_more_than_its_budget_stops_at_the_document_that_goes_over(
        app, client, reads, monkeypatch, query, path):
    """`{ id }` of a large document is a small answer, so the answer's budget does not stop aliases or a page of them;
    what the stores read does: the 10th document of a little over 100,000 bytes goes over a budget of 1,000,000, and
    no document is read after it. The same operation with 9 objects is answered."""
    monkeypatch.setattr(read_budget_module, "READ_BUDGET", 1_000_000)
    for number in range(30):
        store_legacy_process(app, f"proc_{number:02d}", "d" * 100_000)
    before = dict(reads)
    body = graphql(client, query(30)).get_json()
    assert body["data"] is None
    [error] = body["errors"]
    assert error["extensions"]["code"] == "RESPONSE_TOO_LARGE" and error["path"] == path
    assert "more than 1,000,000 bytes of stored documents" in error["message"] and "`first`" in error["message"]
    assert all(reads[way] - before[way] <= 10 for way in reads)  # (a page of the file backend reads by `get`)
    assert "errors" not in graphql(client, query(9)).get_json()


def test_a_page_of_large_documents_is_read_one_batch_at_a_time(app, client):
    """`{ processes(first: 40) { id } }` is a tiny answer; the 40 MB of documents behind it are not held at once."""
    for number in range(40):
        store_legacy_process(app, f"proc_{number:02d}", "d" * 1_000_000)
    graphql(client, "{ stations { id } }")
    tracemalloc.start()
    try:
        answer = graphql(client, "{ processes(first: 40) { id } }").get_json()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [found["id"] for found in answer["data"]["processes"]] == [f"proc_{number:02d}" for number in range(40)]
    # The 40 descriptions alone are 40 MB: at most a batch of them (8 MB on the shared backend) is held at a time.
    assert peak < 30_000_000


def test_an_answer_of_more_fields_than_the_budget_is_refused_naming_it(app, client, reads, monkeypatch):
    """Each field completed costs CPU however short it is: 10 fields a process, 30 processes, a budget of 201 fields
    (the list and 20 processes)."""
    monkeypatch.setattr(BudgetedExecutor, "field_budget", 201)
    for number in range(30):
        store_legacy_process(app, f"proc_{number:02d}", "d")
    fields = "id name description partNumber startBehavior endBehavior autoSignoutMinutes revision createdAt updatedAt"
    body = graphql(client, f"{{ processes(first: 30) {{ {fields} }} }}").get_json()
    assert body["data"] is None and "more than 201 fields" in body["errors"][0]["message"]
    assert body["errors"][0]["path"] == ["processes", 20, "id"] and reads["page"] == 21
    assert "errors" not in graphql(client, f"{{ processes(first: 20) {{ {fields} }} }}").get_json()


def test_an_answer_under_the_budget_is_the_answer_there_was_before(app, client, monkeypatch):
    monkeypatch.setattr(BudgetedExecutor, "budget", 2_000)
    store_legacy_process(app, "proc_small", "d" * 100)
    query = "{ process(id: \"proc_small\") { id name description steps { id } billOfMaterials { quantity } } }"
    assert graphql(client, query).get_json() == {"data": {"process": {
        "id": "proc_small", "name": "Legacy", "description": "d" * 100, "steps": None, "billOfMaterials": []}}}


def largest_process():
    """A process at the limits, shaped to read back as large as any: serialized parts in torque actions repeat their
    20,000-character descriptions five times (the action, its torque group, the bill of materials, the scan part, the
    scan's text), and the rest of MAX_INPUT_OBJECTS are torque actions with a tool, the objects that read back
    largest (twice each, with every unset field named)."""
    name = "n" * MAX_NAME_LENGTH
    text_actions = [{"id": f"text_{i:05d}", "description": {"text": "tighten"}, "inputParts": [{"part": {
        "id": f"part_{i:05d}", "description": LONGEST_TEXT, "serial": {"id": "sn_1", "name": name}}}]}
        for i in range(435)]
    objects = 2 + 5 * len(text_actions)
    small_actions = [{"id": f"small_{i:05d}", "toolUsed": {"id": "wrench"}} for i in range((MAX_INPUT_OBJECTS - objects) // 2)]
    return {"id": "proc_largest", "name": name, "steps": [{"id": "step_1", "actions": text_actions + small_actions}]}


def full_selection(schema, type_name, depth=0):
    """Every field of an output type, nested types included."""
    fields = []
    for name, field in schema.type_map[type_name].fields.items():
        inner = field.type
        while hasattr(inner, "of_type"):
            inner = inner.of_type
        fields.append(f"{name} {{ {full_selection(schema, inner.name, depth + 1)} }}" if hasattr(inner, "fields")
                      else name)
    return " ".join(fields)


def most_fields_process():
    """A process of MAX_INPUT_OBJECTS objects shaped to read back with as many fields as any: torque actions each with
    a serialized part of its own, which the full read repeats in the torque group, the bill of materials and a scan
    action (about 14 fields an input object)."""
    actions = [{"id": f"act_{i:05d}", "description": {"text": "screw"}, "inputParts": [{"part": {
        "id": f"part_{i:05d}", "serial": {"id": "sn_1"}}}]} for i in range((MAX_INPUT_OBJECTS - 2) // 5)]
    return {"id": "proc_most_fields", "name": "P", "steps": [{"id": "step_1", "actions": actions}]}


def read_back_whole(app, client, process):
    """Create the process, read it with every field selected; the answer's bytes."""
    body = json.dumps({"query": PROCESS_CREATE, "variables": {"input": {"process": process}}})
    assert len(body) <= MAX_REQUEST_BODY
    created = client.post("/graph/v2", data=body, content_type="application/json", headers=HEADERS).get_json()
    assert created == {"data": {"processCreate": "CREATED"}}, str(created)[:300]
    selection = full_selection(app.extensions["graphql"].schema, "Process")
    response = graphql(client, f'{{ process(id: "{process["id"]}") {{ {selection} }} }}')
    assert b'"errors"' not in response.data[:100] and b'"errors"' not in response.data[-200:]
    return response.data


@pytest.mark.exhaustive  # the largest input the limits allow
@pytest.mark.file_backend_only("the budget is spent by the GraphQL layer, the same over either backend")
def test_the_process_with_the_largest_read_is_answered_whole_within_the_budget(app, client):
    answer = read_back_whole(app, client, largest_process())
    assert len(json.dumps({"query": PROCESS_CREATE, "variables": {"input": {"process": largest_process()}}})) \
        > 0.95 * MAX_REQUEST_BODY
    assert 0.75 * RESPONSE_BUDGET < len(answer) < RESPONSE_BUDGET


@pytest.mark.exhaustive  # the largest input the limits allow
@pytest.mark.file_backend_only("the budget is spent by the GraphQL layer, the same over either backend")
def test_the_process_with_the_most_fields_is_answered_whole_within_the_budget(app, client):
    answer = json.loads(read_back_whole(app, client, most_fields_process()))
    actions = answer["data"]["process"]["steps"][0]["actions"]
    assert len(actions) == 2 * ((MAX_INPUT_OBJECTS - 2) // 5)  # each with its scan action


def test_the_schema_states_the_limits_the_service_applies():

    from service.interface import MAX_INPUT_SIZE

    schema = (REPOSITORY / "schema.graphql").read_text()
    for limit in (MAX_TEXT_LENGTH, MAX_NAME_LENGTH, MAX_INPUT_OBJECTS, MAX_INPUT_SIZE, RESPONSE_BUDGET, FIELD_BUDGET):
        assert f"{limit:,}" in schema


# ---------------------------------------------------------------- lookups of the references of an input

@pytest.fixture
def shared_app(tmp_path, shared_backend):
    from service import create_app
    from support.tokens import TOKENS

    app = create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "TESTING": True,
                      **shared_backend.settings()})
    yield app
    get_repository(app).close()


@pytest.fixture
def transactions(shared_app, monkeypatch):
    """How many database transactions (round trips) the shared app has made so far for its requests: the sweep that
    follows a worker's first response (streams, events) is claimed here, so it does not count."""
    repository, counted = get_repository(shared_app), []
    assert repository.sweep_due()
    database = repository.database
    transaction = database.transaction

    def counting():
        counted.append(1)
        return transaction()
    monkeypatch.setattr(database, "transaction", counting)
    return counted


def test_the_processes_a_product_names_are_looked_up_at_once(shared_app, transactions):
    """2,000 dependencies naming 4,000 processes were 4,000 queries (a 1 MB productCreate took 70 s)."""
    dependencies = [{"processId": f"down_{i:04d}", "upstreamProcessId": f"up_{i:04d}"} for i in range(2_000)]
    query = "mutation($input: ProductCreateInput!) { productCreate(input: $input) }"
    body = shared_app.test_client().post("/graph/v2", headers=HEADERS, json={"query": query, "variables": {"input": {
        "product": {"id": "prod_1", "name": "P", "finalProcessId": "final", "dependencies": dependencies}}}}).get_json()
    assert body["data"] == {"productCreate": None}
    assert body["errors"][0]["extensions"]["field"] == "product.finalProcessId" and len(body["errors"]) == 101
    assert len(transactions) <= 1


def test_the_media_a_process_names_are_looked_up_at_once(shared_app, transactions):
    """2,000 steps with an image each were 2,000 queries."""
    steps = [{"id": f"step_{i:04d}", "primaryImage": {"path": f"/api/v1/images/{i:016x}-photo.png"}} for i in range(2_000)]
    query = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"
    body = shared_app.test_client().post("/graph/v2", headers=HEADERS, json={"query": query, "variables": {"input": {
        "process": {"id": "proc_1", "name": "P", "steps": steps}}}}).get_json()
    assert body["data"] == {"processCreate": None}
    assert body["errors"][0]["extensions"]["field"] == "process.steps[0].primaryImage.path"
    assert len(transactions) <= 1
