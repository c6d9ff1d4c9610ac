"""Variables coerced by the compiled functions of service.web.graphql.coercion are exactly graphql-core's, held to the
domain's value rules, in their stored form.

Values graphql-core refuses, and values breaking a rule of Problems.check_values, must be refused (the request then
takes graphql-core's own path and the domain's error messages); values it accepts must come out as check_values makes
their stored form (graphql-core's, without null members), keys in the same order, so the same document is stored.
"""
import functools

import orjson
import pytest
from graphql import (
    GraphQLBoolean,
    GraphQLFloat,
    GraphQLInt,
    coerce_input_value,
    is_enum_type,
    is_input_object_type,
    is_list_type,
    is_non_null_type,
    is_required_input_field,
)
from graphql.pyutils import Undefined
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain import validation
from service.domain.validation import CheckedInput, Problems
from service.interface import MAX_INPUT_OBJECTS, MAX_INPUT_SIZE, MAX_NAME_LENGTH, MAX_TEXT_LENGTH
from service.interface.kinds import PROCESSES
from service.web.graphql.coercion import Refused, _marked
from service.storage import get_repository
from support.documents import BENCH_MUTATION, bench_process


# Strings breaking a value rule: longer than a name, or a text, may be; holding a lone surrogate.
RULE_BREAKING_TEXT = st.sampled_from(["n" * (MAX_NAME_LENGTH + 1), "t" * (MAX_TEXT_LENGTH + 1), "\ud800", "a\udfff"])
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False, width=32),
                 st.text(max_size=4), st.just([]), st.just({}), st.just({"unknown": 1}))


def mostly(valid, rare, one_in=8):
    """`valid`, and once in `one_in` examples `rare` (one_of would weigh every flattened branch the same)."""
    return st.integers(1, one_in).flatmap(lambda pick: rare if pick == 1 else valid)


@functools.cache
def values_for(type_):
    """Mostly well-typed values of an input type, with wrong types, nulls, lists and unknown fields mixed in."""
    if is_non_null_type(type_):
        return values_for(type_.of_type)
    if is_list_type(type_):
        item = values_for(type_.of_type)
        return mostly(st.lists(item, max_size=3), st.one_of(item, JUNK), one_in=4)
    if is_input_object_type(type_):
        required = {name: values_for(field.type) for name, field in type_.fields.items() if is_required_input_field(field)}
        optional = {name: values_for(field.type) for name, field in type_.fields.items() if name not in required}
        fields = st.fixed_dictionaries(required, optional=optional)
        some_missing = st.fixed_dictionaries({}, optional={**required, **optional})
        extra = st.dictionaries(st.sampled_from(["bogus", "Id"]), JUNK, max_size=1)
        return mostly(fields, st.one_of(some_missing, st.builds(lambda a, b: {**a, **b}, fields, extra), JUNK))
    if is_enum_type(type_):
        return mostly(st.sampled_from(list(type_.values)), st.one_of(st.just("BOGUS"), JUNK))
    valid = {GraphQLInt: st.one_of(st.integers(-(2**32), 2**32), st.sampled_from([1.0, 2.5])),
             GraphQLFloat: st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=True)),
             GraphQLBoolean: st.booleans()}.get(type_, mostly(st.text(max_size=6), RULE_BREAKING_TEXT, one_in=40))
    return mostly(valid, JUNK, one_in=20)


@pytest.fixture(scope="module")
def endpoint():
    from service import create_app

    return create_app({"DATA_DIR": "/nonexistent-not-used", "API_TOKENS": "default:unused-token"}).extensions["graphql"]


@pytest.mark.exhaustive  # hundreds of generated inputs
@pytest.mark.parametrize("type_name", ["ProcessCreateInput", "ProductCreateInput", "StationCreateInput"])
def test_compiled_coercion_agrees_with_graphql_core(endpoint, type_name):
    type_ = endpoint.schema.get_type(type_name)
    coerce = endpoint.coercer.compile(type_)

    accepted = []

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(values_for(type_))
    def agree(value):
        expected = stored_form(coerce_input_value(value, type_))
        if expected is Undefined:
            with pytest.raises(Refused):
                coerce(value)
        else:
            assert orjson.dumps(coerce(value)) == orjson.dumps(expected)
            accepted.append(value)

    agree()
    # Both sides were exercised, not only refusals.
    assert 40 <= len(accepted) <= 360


def stored_form(coerced):
    """What Problems.check_values makes of a value graphql-core coerced (null included), or Undefined if either refuses
    it."""
    if coerced is Undefined:
        return Undefined
    problems = Problems()
    stored = problems.check_values("input", {"value": coerced}).get("value")
    return Undefined if problems.errors else stored


@pytest.mark.file_backend_only("compares what the coercer hands the domain; it removes the stored file between runs")
def test_a_realistic_process_is_stored_as_graphql_core_would_store_it(app, client, auth, monkeypatch):
    endpoint = app.extensions["graphql"]
    documents = get_repository(app).documents
    variables = {"input": {"process": bench_process("fast_path", 20)}}

    def stored_after_create():
        response = client.post("/graph/v2", headers=auth, json={"query": BENCH_MUTATION, "variables": variables})
        assert response.get_json() == {"data": {"processCreate": "CREATED"}}
        document = documents.get("default", PROCESSES, "fast_path")
        (documents._path("default", PROCESSES, "fast_path")).unlink()
        return orjson.dumps({key: value for key, value in document.items() if key not in ("createdAt", "updatedAt")})

    fast = stored_after_create()
    monkeypatch.setattr(endpoint.coercer, "coerce", lambda operation, variables: None)
    assert stored_after_create() == fast


@pytest.mark.parametrize("operation", ["query($t: [String!]) { events(types: $t) { seq } }",
                                       "query($t: [String!]) { events(first: 5, types: $t) { seq } }"])
def test_a_refused_member_of_a_list_argument_is_named_by_the_argument(client, auth, operation):
    """`types[1]`, not `[1]`: a list argument's name is kept before the index (an input object's is left out before
    its fields, as the domain names them: `process.steps[0]`, above)."""
    response = client.post("/graph/v2", headers=auth, json={"query": operation, "variables": {"t": ["station.*", 7]}})
    body = response.get_json()
    assert [error["extensions"]["field"] for error in body["errors"]] == ["types[1]"]
    assert body["errors"][0]["message"].startswith("types[1]: ")


def test_refused_values_get_graphql_core_errors(client, auth):
    response = client.post("/graph/v2", headers=auth, json={"query": BENCH_MUTATION, "variables": {"input": {
        "process": {"id": "p_1", "name": "P", "steps": [{"id": "s_1", "actions": [{"id": "a_1", "bogus": 1}]}]}}}})
    body = response.get_json()
    assert body["data"] == {"processCreate": None}
    assert [error["extensions"]["field"] for error in body["errors"]] == ["process.steps[0].actions[0].bogus"]


def test_a_second_request_compiles_nothing_and_takes_the_compiled_path(app, client, auth, monkeypatch):
    coercer = app.extensions["graphql"].coercer

    def create(identifier, query=BENCH_MUTATION):
        response = client.post("/graph/v2", headers=auth, json={
            "query": query, "variables": {"input": {"process": bench_process(identifier, 2)}}})
        assert "errors" not in response.get_json()

    create("once")
    compiled = dict(coercer._named)
    compiles, results = [], []
    compile_, coerce = coercer._compile, coercer.coerce
    monkeypatch.setattr(coercer, "_compile", lambda *args: compiles.append(args) or compile_(*args))
    monkeypatch.setattr(coercer, "coerce", lambda *args: results.append(coerce(*args)) or results[-1])
    create("once")
    assert compiles == []
    assert len(results) == 1 and results[0] is not None  # coerced by the compiled functions, not graphql-core
    # Another text declaring the same variable type: its plan reuses the functions of the named types.
    create("other", "mutation Other($input: ProcessCreateInput!) { processCreate(input: $input) }")
    assert coercer._named == compiled
    assert [type(args[0]).__name__ for args in compiles] == ["GraphQLNonNull", "GraphQLInputObjectType"]


# The process as an object literal of the query text, its steps a variable.
LITERAL_MUTATION = ("mutation ProcessCreate($steps: [StepInput!]) { processCreate(input: {process: {"
                    "id: \"in_literal\", name: \"Gearbox housing, final assembly\", steps: $steps}}) }")


def test_a_process_in_a_variable_is_walked_once_the_coercion_checking_its_values(app, client, auth, monkeypatch):
    """The coercion holds every value to the domain's rules as it coerces it: the domain stores the stored form it
    hands over without walking the input again. A value built from the query text (here an object literal around the
    variable) is the ordinary path's, which the domain walks whole."""
    walks = []
    visit = validation._Walk.visit
    monkeypatch.setattr(validation._Walk, "visit", lambda walk, items, path, key: walks.append(path) or visit(
        walk, items, path, key))
    documents = get_repository(app).documents

    def create(identifier, query, variables):
        walks.clear()
        response = client.post("/graph/v2", headers=auth, json={"query": query, "variables": variables})
        assert response.get_json() == {"data": {"processCreate": "CREATED"}}
        document = documents.get("default", PROCESSES, identifier)
        return walks[:], {key: value for key, value in document.items() if key not in ("id", "createdAt", "updatedAt")}

    process = bench_process("in_variable", 3)
    process = {"id": process["id"], "name": process["name"], "steps": process["steps"]}
    walked, in_variable = create("in_variable", BENCH_MUTATION, {"input": {"process": process}})
    assert walked == []
    walked, in_literal = create("in_literal", LITERAL_MUTATION, {"steps": process["steps"]})
    assert walked and walked[0] == ("process",)
    assert in_variable == in_literal


def test_a_checked_variable_repeated_in_the_query_text_is_counted_each_time_it_is_used(app, client, auth):
    """Each use of a variable the coercion checked is counted where it is used: 2,000 steps naming one 10,000-character
    text would be stored as 20 MB from a request of 20 KB."""
    uses = ", ".join(["$step"] * 2_000)
    query = (f"mutation Many($step: StepInput!) {{ processCreate(input: {{process: {{id: \"many\", name: \"Many\", "
             f"steps: [{uses}]}}}}) }}")
    body = client.post("/graph/v2", headers=auth, json={"query": query, "variables": {"step": {
        "id": "step_1", "instructionText": {"text": "t" * 10_000}}}}).get_json()
    assert body["data"] == {"processCreate": None}
    assert body["errors"][0]["extensions"]["field"] == "process"
    assert f"holds more than {MAX_INPUT_SIZE:,} characters" in body["errors"][0]["message"]
    assert get_repository(app).documents.ids("default", PROCESSES) == []


@pytest.mark.parametrize("field, change", [
    ("process.name", lambda process: process.update(name="n" * (MAX_NAME_LENGTH + 1))),
    ("process.steps[1].instructionText.text",
     lambda process: process["steps"][1]["instructionText"].update(text="t" * (MAX_TEXT_LENGTH + 1))),
    ("process.steps[0].actions[2].measurement.measured",
     lambda process: process["steps"][0]["actions"][2]["measurement"].update(measured="m" * (MAX_NAME_LENGTH + 1))),
])
def test_a_value_over_its_limit_in_a_variable_is_refused_naming_it_and_nothing_is_stored(app, client, auth, field,
                                                                                        change):
    process = bench_process("over_limit", 2)
    change(process)
    body = client.post("/graph/v2", headers=auth, json={"query": BENCH_MUTATION, "variables": {"input": {
        "process": process}}}).get_json()
    assert body["data"] == {"processCreate": None}
    assert [(error["extensions"]["code"], error["extensions"]["field"]) for error in body["errors"]] == [
        ("BAD_USER_INPUT", field)]
    assert "characters long; at most" in body["errors"][0]["message"]
    assert get_repository(app).documents.ids("default", PROCESSES) == []


def test_a_variable_of_more_objects_than_allowed_is_counted_and_refused(app, client, auth):
    """Its JSON holds more `{` than MAX_INPUT_OBJECTS: the coercion cannot vouch for it, and the domain counts."""
    steps = [{"id": "step_1", "actions": [{"id": f"act_{i}"} for i in range(MAX_INPUT_OBJECTS - 1)]}]
    body = client.post("/graph/v2", headers=auth, json={"query": BENCH_MUTATION, "variables": {"input": {
        "process": {"id": "many", "name": "Many", "steps": steps}}}}).get_json()
    assert body["errors"][0]["extensions"]["field"] == "process"
    assert f"holds more than {MAX_INPUT_OBJECTS:,} objects" in body["errors"][0]["message"]
    steps[0]["actions"].pop()
    body = client.post("/graph/v2", headers=auth, json={"query": BENCH_MUTATION, "variables": {"input": {
        "process": {"id": "many", "name": "Many", "steps": steps}}}}).get_json()
    assert body == {"data": {"processCreate": "CREATED"}}


def test_a_value_whose_json_cannot_be_measured_is_left_for_the_domain_to_walk():
    """What orjson cannot encode is not vouched for: handed over unmarked, never an error (a 500)."""
    value = {"process": {"id": "proc_1", "when": object()}}
    assert type(_marked(value)) is dict
    assert type(_marked({"process": {"id": "proc_1"}})) is CheckedInput
