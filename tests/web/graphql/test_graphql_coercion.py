"""Variables coerced by the compiled functions of service.web.graphql.coercion are exactly graphql-core's.

Values graphql-core refuses must be refused (the request then takes graphql-core's own path and its error
messages); values it accepts must come out equal, keys in the same order, so the same document is stored.
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

from service.interface.kinds import PROCESSES
from service.web.graphql.coercion import Refused
from service.storage import get_repository
from support.documents import BENCH_MUTATION, bench_process


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
             GraphQLBoolean: st.booleans()}.get(type_, st.text(max_size=6))
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
        expected = coerce_input_value(value, type_)
        if expected is Undefined:
            with pytest.raises(Refused):
                coerce(value)
        else:
            assert orjson.dumps(coerce(value)) == orjson.dumps(expected)
            accepted.append(value)

    agree()
    # Both sides were exercised, not only refusals.
    assert 40 <= len(accepted) <= 360


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
