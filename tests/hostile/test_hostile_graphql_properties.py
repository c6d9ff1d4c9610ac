"""Property-based tests of the three mutations (hypothesis): generated valid inputs are stored and read back
as sent; each invalid one (a valid input broken in one place) is refused as BAD_USER_INPUT naming the
field, and nothing on disk changes. No input is answered with a 500.
"""
import string

import pytest
from graphql import is_enum_type, is_input_object_type, is_list_type, is_non_null_type, is_required_input_field
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service import create_app
from service.web.graphql import load_schema
from service.storage import get_repository
from support.datadir import snapshot, store_media
from support.tokens import HEADERS, TOKENS

pytestmark = pytest.mark.exhaustive  # hundreds of generated inputs per property

SCHEMA = load_schema()
MUTATIONS = {"process": "processCreate", "product": "productCreate", "station": "stationCreate"}
INPUT_TYPES = {"process": "ProcessInput", "product": "ProductInput", "station": "StationInput"}
# What an unset (or null) optional field reads back as (CONTRACT.md 3); every other one reads back null.
DEFAULTS = {("ProcessInput", "startBehavior"): "CONFIRM", ("ProcessInput", "endBehavior"): "SUMMARY",
            ("AlertInput", "severity"): "WARNING", ("InputPartInput", "quantity"): 1,
            ("DependencyInput", "quantity"): 1}
IMAGE, VIDEO = "/api/v1/images/0123456789abcdef-thumb.png", "/api/v1/videos/0123456789abcdef-clip.mp4"
# 40 generated inputs per property and backend (60 before 2026-11-25): what the suite's 10 minutes on 2 cores leave
# room for (docs/development.md). Derandomized: every run tries the same inputs.
PROPERTY_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---------------------------------------------------------------- valid inputs

ID_ALPHABET = string.ascii_letters + string.digits + "_"
ids = st.text(ID_ALPHABET, min_size=3, max_size=50)
texts = st.text(max_size=30)
names = st.text(min_size=1, max_size=30).filter(str.strip)
numbers = st.integers(-10**6, 10**6) | st.floats(-1e9, 1e9, allow_nan=False)
colors = st.from_regex(r"#[0-9A-Fa-f]{6}", fullmatch=True)
units = st.from_regex(r"[A-Za-z]{1,8}-[A-Za-z0-9]{1,8}", fullmatch=True)


def maybe(strategy):
    """An optional field's value: a value or an explicit null (which means unset)."""
    return st.none() | strategy


def record(required=None, **optional):
    """A dict with the required fields and any subset of the optional ones."""
    return st.fixed_dictionaries(required or {}, optional={name: maybe(value) for name, value in optional.items()})


styled_texts = record(text=texts, bold=st.booleans(), italic=st.booleans(), underline=st.booleans(), color=colors)
alerts = record({"text": texts}, severity=st.sampled_from(["INFO", "CAUTION", "WARNING", "DANGER"]), title=texts)
notes = record({"text": texts}, title=texts)
videos = record({"path": st.just(VIDEO)}, title=texts, autoplay=st.booleans(), loop=st.booleans())


def parts(part_ids):
    serials = record({"id": ids}, name=texts, pattern=texts)
    return record({"id": st.sampled_from(part_ids)}, description=texts, serial=serials)


def actions(action_id, part_ids):
    low_high = st.tuples(numbers, numbers).map(sorted)
    measurements = st.builds(lambda bounds, rest: {**rest, "min": bounds[0], "max": bounds[1]}, low_high,
                             record(measured=texts, units=units)) | record(measured=texts, units=units, min=numbers)
    return record(
        {"id": st.just(action_id)}, description=styled_texts,
        inputParts=st.lists(record({"part": parts(part_ids)}, quantity=st.integers(1, 1000)
                                   | st.floats(1e-6, 1e6)), max_size=3),
        outputPart=parts(part_ids), toolUsed=record({"id": ids}, name=texts, description=texts),
        measurement=measurements, confirmation=record(confirmed=texts))


@st.composite
def processes(draw):
    """A valid ProcessInput: unique step ids, action ids unique across the process, parts from a small pool."""
    shape = draw(st.lists(st.integers(0, 3), max_size=4))
    step_ids = draw(st.lists(ids, min_size=len(shape), max_size=len(shape), unique=True))
    action_ids = iter(draw(st.lists(ids, min_size=sum(shape), max_size=sum(shape), unique=True)))
    part_ids = draw(st.lists(ids, min_size=1, max_size=4, unique=True))
    steps = [draw(record({"id": st.just(step_id),
                          "actions": st.tuples(*[actions(next(action_ids), part_ids) for _ in range(count)]).map(list)},
                         name=texts, instructionText=styled_texts, primaryImage=st.just({"path": IMAGE}), video=videos,
                         alerts=st.lists(alerts, max_size=2), notes=st.lists(notes, max_size=2)))
             for step_id, count in zip(step_ids, shape)]
    process = draw(record({"id": ids, "name": names}, description=texts, partNumber=texts,
                          startBehavior=st.sampled_from(["CONFIRM", "IMMEDIATE"]),
                          endBehavior=st.sampled_from(["SUMMARY", "EXIT", "RESTART", "NEXT_PROCESS"]),
                          autoSignoutMinutes=st.integers(0, 2**31 - 1), image=st.just({"path": IMAGE})))
    if steps or draw(st.booleans()):
        process["steps"] = steps
    return process


@st.composite
def products(draw):
    """(processes to create first, a valid ProductInput): an acyclic graph where every process leads to the final one."""
    chain = draw(st.lists(ids, min_size=1, max_size=6, unique=True))
    edges = []
    for position, upstream in enumerate(chain[:-1]):
        downstream = draw(st.lists(st.sampled_from(chain[position + 1:]), min_size=1, unique=True))
        edges += [(upstream, down) for down in downstream]
    dependencies = [draw(record({"processId": st.just(down), "upstreamProcessId": st.just(up)},
                                quantity=st.integers(1, 1000))) for up, down in draw(st.permutations(edges))]
    return chain, {"id": draw(ids), "name": draw(names), "finalProcessId": chain[-1], "dependencies": dependencies}


stations = st.fixed_dictionaries({"id": ids, "name": names})

# ---------------------------------------------------------------- invalid inputs: a valid one broken in one place

BAD_IDS = st.sampled_from(["", "ab", "a" * 51, "abc\n", " abc", "ab-c", "ab.c", "../abc", "ab/c", "abc\x00",
                           "\u0430bc", "\uff41bc", "caf\u00e9", "ab c"]) | st.text(min_size=3, max_size=10).filter(
                               lambda text: not all(c in ID_ALPHABET for c in text))
BLANK = st.sampled_from(["", " ", "\t\n", "\u3000"])
BAD_UNITS = st.sampled_from(["Nm", "-Nm", "torque-", "torque Nm", "torque - Nm", " torque-Nm", "torque-N m", ""])
WRONG_SCALARS = {
    "String": st.integers() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.just([1, 2]),
    "Int": st.text(max_size=5) | st.booleans() | st.just(1.5) | st.just(2**31) | st.just(-(2**31) - 1),
    "Float": st.text(max_size=5) | st.booleans() | st.just({"value": 1}),
    "Boolean": st.integers() | st.text(max_size=5),
}


def field_path(path):
    """['process', 'steps', 2, 'id'] -> 'process.steps[2].id', as the service names fields."""
    text = path[0]
    for part in path[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def named(type_):
    while is_non_null_type(type_) or is_list_type(type_):
        type_ = type_.of_type
    return type_


def input_objects(value, type_, path):
    """(path, dict, input type) of every input object inside `value`, outermost first."""
    if is_non_null_type(type_):
        type_ = type_.of_type
    if value is None:
        return
    if is_list_type(type_):
        for index, item in enumerate(value):
            yield from input_objects(item, type_.of_type, path + [index])
    elif is_input_object_type(type_):
        yield path, value, type_
        for name, field in type_.fields.items():
            if name in value:
                yield from input_objects(value[name], field.type, path + [name])


def wrong_value(type_):
    """A strategy of values of the wrong type for a field of `type_`, and the path suffix the error names."""
    if is_non_null_type(type_):
        type_ = type_.of_type
    if is_list_type(type_):
        inner, suffix = wrong_value(type_.of_type)
        return inner.map(lambda value: [value]), [0] + suffix
    if is_input_object_type(type_):
        return st.integers() | st.text(max_size=5), []
    if is_enum_type(type_):
        return st.text(max_size=8).filter(lambda text: text not in type_.values) | st.integers(), []
    return WRONG_SCALARS[type_.name], []


def broken_somewhere(draw, kind, data):
    """Break `data` in one generic way; return the field path the refusal must name."""
    root = [kind]
    objects = list(input_objects(data, SCHEMA.type_map[INPUT_TYPES[kind]], root))
    how = draw(st.sampled_from(["bad id", "unknown field", "missing field", "wrong type"]))
    if how == "bad id":
        path, holder, _ = draw(st.sampled_from([found for found in objects if "id" in found[2].fields]))
        holder["id"] = draw(BAD_IDS)
        return field_path(path + ["id"])
    if how == "unknown field":
        path, holder, type_ = draw(st.sampled_from(objects))
        name = draw(st.text(string.ascii_letters, min_size=1, max_size=12).filter(lambda n: n not in type_.fields))
        holder[name] = draw(st.none() | st.integers() | texts)
        return field_path(path + [name])
    if how == "missing field":
        required = [(path, holder, name) for path, holder, type_ in objects for name, field in type_.fields.items()
                    if is_required_input_field(field) and name in holder]
        path, holder, name = draw(st.sampled_from(required))
        del holder[name]
        return field_path(path + [name])
    fields = [(path, holder, name, field) for path, holder, type_ in objects for name, field in type_.fields.items()]
    path, holder, name, field = draw(st.sampled_from(fields))
    values, suffix = wrong_value(field.type)
    holder[name] = draw(values)
    return field_path(path + [name] + suffix)


def new_id(taken):
    return next(f"fresh_{n}" for n in range(len(taken) + 1) if f"fresh_{n}" not in taken)


def some_action(process):
    """(path, action) of an action of the process, adding a step with one action if it has none."""
    located = [(["process", "steps", i, "actions", j], action) for i, step in enumerate(process.get("steps") or [])
               for j, action in enumerate(step.get("actions") or [])]
    if located:
        return located[0]
    taken = {found[1].get("id") for found in input_objects(process, SCHEMA.type_map["ProcessInput"], ["process"])}
    steps = process.get("steps") or []
    steps.append({"id": new_id(taken), "actions": [{"id": new_id(taken | {new_id(taken)})}]})
    process["steps"] = steps
    return ["process", "steps", len(steps) - 1, "actions", 0], steps[-1]["actions"][0]


@st.composite
def invalid_processes(draw):
    """(ProcessInput broken in one place, the field path the refusal must name)."""
    process = draw(processes())
    rule = draw(st.sampled_from(["generic", "duplicate step", "duplicate action", "quantity", "min > max", "units",
                                 "minutes", "blank name", "color", "media"]))
    if rule == "generic":
        return process, broken_somewhere(draw, "process", process)
    if rule == "blank name":
        process["name"] = draw(BLANK)
        return process, "process.name"
    if rule == "minutes":
        process["autoSignoutMinutes"] = draw(st.integers(-(2**31), -1))
        return process, "process.autoSignoutMinutes"
    if rule == "media":
        where = draw(st.sampled_from(["image", "video as image", "image as video"]))
        if where == "image":
            process["image"] = {"path": "/api/v1/images/" + draw(st.sampled_from(["missing.png", "f.png.", "x-y.jpg"]))}
            return process, "process.image.path"
        path, _action = some_action(process)
        step = process["steps"][path[2]]
        if where == "video as image":
            step["primaryImage"] = {"path": VIDEO}
            return process, field_path(path[:3] + ["primaryImage", "path"])
        step["video"] = {"path": IMAGE}
        return process, field_path(path[:3] + ["video", "path"])
    path, action = some_action(process)
    if rule == "duplicate step":
        process["steps"].append({"id": process["steps"][path[2]]["id"]})
        return process, field_path(["process", "steps", len(process["steps"]) - 1, "id"])
    if rule == "duplicate action":
        actions_of_step = process["steps"][-1].setdefault("actions", []) or []
        actions_of_step.append({"id": action["id"]})
        process["steps"][-1]["actions"] = actions_of_step
        return process, field_path(["process", "steps", len(process["steps"]) - 1, "actions", len(actions_of_step) - 1,
                                    "id"])
    if rule == "quantity":
        action["inputParts"] = [{"part": {"id": "some_part"}, "quantity": draw(st.sampled_from([0, -1, -0.5, 0.0]))}]
        return process, field_path(path + ["inputParts", 0, "quantity"])
    if rule == "min > max":
        low = draw(numbers)
        action["measurement"] = {"min": low + draw(st.integers(1, 1000)), "max": low}
        return process, field_path(path + ["measurement", "min"])
    if rule == "units":
        action["measurement"] = {"units": draw(BAD_UNITS)}
        return process, field_path(path + ["measurement", "units"])
    action["description"] = {"text": "x", "color": draw(st.sampled_from(["red", "#12345", "#1234567", "#GGGGGG", ""]))}
    return process, field_path(path + ["description", "color"])


@st.composite
def invalid_products(draw):
    """(processes to create first, ProductInput broken in one place, field path the refusal must name or None)."""
    chain, product = draw(products())
    rule = draw(st.sampled_from(["generic", "unknown process", "self edge", "repeated edge", "cycle", "quantity",
                                 "final is upstream", "blank name"]))
    edges = product["dependencies"]
    if rule == "generic":
        return chain, product, broken_somewhere(draw, "product", product)
    if rule == "blank name":
        product["name"] = draw(BLANK)
        return chain, product, "product.name"
    if rule == "unknown process":
        missing = "no_such_process"  # never created: new_id() makes fresh_<n> ids only
        if edges and draw(st.booleans()):
            edges[0]["upstreamProcessId"] = missing
            return chain, product, "product.dependencies[0].upstreamProcessId"
        product["finalProcessId"] = missing
        return chain, product, "product.finalProcessId"
    if rule == "self edge":
        edges.append({"processId": chain[0], "upstreamProcessId": chain[0]})
        return chain, product, f"product.dependencies[{len(edges) - 1}]"
    if rule == "quantity":
        edges.append({"processId": chain[-1], "upstreamProcessId": new_id(set()), "quantity": draw(st.integers(-5, 0))})
        chain = chain + [new_id(set())]
        return chain, product, f"product.dependencies[{len(edges) - 1}].quantity"
    if rule == "final is upstream":
        extra = new_id(set(chain))
        edges.append({"processId": extra, "upstreamProcessId": chain[-1]})
        return chain + [extra], product, f"product.dependencies[{len(edges) - 1}].upstreamProcessId"
    if len(chain) < 2:
        chain = chain + [new_id(set(chain))]
        edges.append({"processId": chain[-1], "upstreamProcessId": chain[0]})
        product["finalProcessId"] = chain[-1]
    if rule == "repeated edge":
        edges.append(dict(edges[0]))
        return chain, product, f"product.dependencies[{len(edges) - 1}]"
    # An edge turned round makes a cycle, or makes the final process upstream when the edge ended there.
    edges.append({"processId": edges[0]["upstreamProcessId"], "upstreamProcessId": edges[0]["processId"]})
    return chain, product, None


@st.composite
def invalid_stations(draw):
    station = draw(stations)
    if draw(st.booleans()):
        station["name"] = draw(BLANK)
        return station, "station.name"
    return station, broken_somewhere(draw, "station", station)


# ---------------------------------------------------------------- reading back

def selection(type_):
    """The read-back selection set for an input type: output types mirror the input fields (actions: plus kind)."""
    fields = []
    for name, field in type_.fields.items():
        inner = named(field.type)
        fields.append(f"{name} {{ {selection(inner)} }}" if is_input_object_type(inner) else name)
    if type_.name == "ActionInput":
        fields.append("kind")
    return " ".join(fields)


def expected(value, type_):
    """What `value` of input type `type_` reads back as: fields as sent, unset ones null or their default."""
    if is_non_null_type(type_):
        type_ = type_.of_type
    if value is None:
        return None
    if is_list_type(type_):
        return [expected(item, type_.of_type) for item in value]
    if not is_input_object_type(type_):
        return value
    result = {}
    for name, field in type_.fields.items():
        sent = value.get(name)
        result[name] = DEFAULTS.get((type_.name, name)) if sent is None else expected(sent, field.type)
    return result


def without_derived_actions(value):
    """The read-back object without the derived SCAN actions (and the `kind` that tells them apart)."""
    if isinstance(value, list):
        return [without_derived_actions(item) for item in value
                if not (isinstance(item, dict) and item.get("kind") == "SCAN")]
    if isinstance(value, dict):
        return {key: without_derived_actions(item) for key, item in value.items() if key != "kind"}
    return value


# ---------------------------------------------------------------- the properties

@pytest.fixture(scope="module")
def app(tmp_path_factory, backend):
    app = create_app({"DATA_DIR": str(tmp_path_factory.mktemp("properties")), "API_TOKENS": TOKENS, "TESTING": True,
                      **backend.settings()})
    for path in (IMAGE, VIDEO):
        store_media(get_repository(app), "default", path)
    yield app
    get_repository(app).close()


@pytest.fixture(scope="module")
def client(app):
    return app.test_client()


def mutate(client, kind, data):
    query = f"mutation($input: {INPUT_TYPES[kind].replace('Input', 'CreateInput')}!) {{ {MUTATIONS[kind]}(input: $input) }}"
    response = client.post("/graph/v2", json={"query": query, "variables": {"input": {kind: data}}}, headers=HEADERS)
    assert response.status_code != 500 and response.is_json, response.data[:300]
    return response.status_code, response.get_json()


def read(client, kind, identifier):
    query = f"query($id: String!) {{ {kind}(id: $id) {{ {selection(SCHEMA.type_map[INPUT_TYPES[kind]])} }} }}"
    response = client.post("/graph/v2", json={"query": query, "variables": {"id": identifier}}, headers=HEADERS)
    body = response.get_json()
    assert response.status_code == 200 and "errors" not in body, body
    return without_derived_actions(body["data"][kind])


def assert_stored_and_read_back(client, kind, data):
    existed = read(client, kind, data["id"]) is not None
    status, body = mutate(client, kind, data)
    assert (status, body) == (200, {"data": {MUTATIONS[kind]: "UPDATED" if existed else "CREATED"}})
    assert read(client, kind, data["id"]) == expected(data, SCHEMA.type_map[INPUT_TYPES[kind]])


def stored_state(app):
    """The files under the data directory and every stored document's id and revision (on the shared backend the
    documents are in its database)."""
    documents = get_repository(app).documents
    return snapshot(app.config["DATA_DIR"]), {
        kind: [(identifier, documents.get("default", kind, identifier)["revision"])
               for identifier in documents.ids("default", kind)] for kind in documents.kinds("default")}


def assert_refused_and_nothing_stored(app, client, kind, data, field):
    before = stored_state(app)
    status, body = mutate(client, kind, data)
    assert status == 200 and body["data"] == {MUTATIONS[kind]: None}, body
    assert all(error["extensions"]["code"] == "BAD_USER_INPUT" for error in body["errors"]), body
    fields = [error["extensions"]["field"] for error in body["errors"]]
    assert field is None or field in fields, (field, body)
    assert stored_state(app) == before


def create_processes(client, identifiers):
    for identifier in identifiers:
        assert mutate(client, "process", {"id": identifier, "name": "step of a product"})[0] == 200


@PROPERTY_SETTINGS
@given(process=processes())
def test_a_valid_process_is_stored_and_read_back_as_sent(client, process):
    assert_stored_and_read_back(client, "process", process)


@PROPERTY_SETTINGS
@given(case=invalid_processes())
def test_an_invalid_process_is_bad_user_input_and_stores_nothing(app, client, case):
    assert_refused_and_nothing_stored(app, client, "process", *case)


@PROPERTY_SETTINGS
@given(case=products())
def test_a_valid_product_is_stored_and_read_back_as_sent(client, case):
    chain, product = case
    create_processes(client, chain)
    assert_stored_and_read_back(client, "product", product)


@PROPERTY_SETTINGS
@given(case=invalid_products())
def test_an_invalid_product_is_bad_user_input_and_stores_nothing(app, client, case):
    chain, product, field = case
    create_processes(client, chain)
    assert_refused_and_nothing_stored(app, client, "product", product, field)


@PROPERTY_SETTINGS
@given(station=stations)
def test_a_valid_station_is_stored_and_read_back_as_sent(client, station):
    assert_stored_and_read_back(client, "station", station)


@PROPERTY_SETTINGS
@given(case=invalid_stations())
def test_an_invalid_station_is_bad_user_input_and_stores_nothing(app, client, case):
    assert_refused_and_nothing_stored(app, client, "station", *case)


def read_input(client, kind, identifier):
    query = f"query($id: String!) {{ {kind}(id: $id) {{ input revision updatedAt }} }}"
    response = client.post("/graph/v2", json={"query": query, "variables": {"id": identifier}}, headers=HEADERS)
    return response.get_json()["data"][kind]


def assert_input_sent_back_is_an_unchanged_push(client, kind, data):
    """CONTRACT 10: what `input` reads back, sent to the create mutation, stores nothing."""
    assert mutate(client, kind, data)[0] == 200
    before = read_input(client, kind, data["id"])
    assert mutate(client, kind, before["input"]) == (200, {"data": {MUTATIONS[kind]: "UPDATED"}})
    assert read_input(client, kind, data["id"]) == before


@PROPERTY_SETTINGS
@given(process=processes())
def test_a_process_read_back_as_input_is_an_unchanged_push(client, process):
    assert_input_sent_back_is_an_unchanged_push(client, "process", process)


@PROPERTY_SETTINGS
@given(case=products())
def test_a_product_read_back_as_input_is_an_unchanged_push(client, case):
    chain, product = case
    create_processes(client, chain)
    assert_input_sent_back_is_an_unchanged_push(client, "product", product)
