"""Each scope against every GraphQL root field (CONTRACT 16), on both backends. The table of service.web.graphql.scopes
names every root field of the schema (a new field that it does not name fails here), and an operation of each field,
made from its arguments' types, is sent with a token of each scope: beyond the scope, HTTP 200, the field null, exactly
one error, FORBIDDEN, naming the scope; within it, no FORBIDDEN (the operation then fails or runs on its own merits:
its variables are not sent)."""
import pytest
from graphql import get_named_type, is_leaf_type

from service.domain.tokens import SCOPES, allows
from service.web.graphql import load_schema
from service.web.graphql.scopes import ROOT_FIELD_SCOPES, needed_scope
from support.tokens import READ_HEADERS, SCOPED_HEADERS

SCHEMA = load_schema()
ROOT_TYPES = {"Query": SCHEMA.query_type, "Mutation": SCHEMA.mutation_type, "Subscription": SCHEMA.subscription_type}
ROOT_FIELDS = [(root, field) for root, type_ in ROOT_TYPES.items() for field in type_.fields]


def test_the_table_names_every_root_field_of_the_schema_and_nothing_else():
    assert {(root, field) for root, fields in ROOT_FIELD_SCOPES.items() for field in fields} == set(ROOT_FIELDS)
    assert all(scope in SCOPES for fields in ROOT_FIELD_SCOPES.values() for scope in fields.values())


def operation_of(root, field_name):
    """An operation asking for one root field, each of its arguments a variable of the argument's type (sent
    without values: the scope is checked before variables are)."""
    field = ROOT_TYPES[root].fields[field_name]
    arguments = ", ".join(f"{name}: ${name}" for name in field.args)
    declared = ", ".join(f"${name}: {argument.type}" for name, argument in field.args.items())
    selection = "" if is_leaf_type(get_named_type(field.type)) else " { __typename }"
    return (f"{root.lower()}{f'({declared})' if declared else ''} "
            f"{{ {field_name}{f'({arguments})' if arguments else ''}{selection} }}")


@pytest.mark.parametrize("root, field", ROOT_FIELDS, ids=[f"{root}.{field}" for root, field in ROOT_FIELDS])
def test_each_scope_against_each_root_field(client, root, field):
    needed = needed_scope(root, field)
    for scope in SCOPES:
        response = client.post("/graph/v2", headers=SCOPED_HEADERS[scope], json={"query": operation_of(root, field)})
        body = response.get_json()
        codes = [error.get("extensions", {}).get("code") for error in body.get("errors", [])]
        if allows(scope, needed):
            assert "FORBIDDEN" not in codes, (scope, body)
            continue
        assert response.status_code == 200 and codes == ["FORBIDDEN"], (scope, body)
        assert body["errors"][0]["extensions"]["scope"] == needed and body["data"] in ({field: None}, None)
        assert body["errors"][0]["message"].startswith(f"{field}: needs a token of the {needed} scope")


def test_a_read_tokens_mutation_runs_nothing_and_says_so_once(client, auth):
    """Several root fields beyond the scope, through a fragment too: one error naming them, every field null, nothing
    stored."""
    query = """mutation { a: stationCreate(input: {station: {id: "st_read", name: "A"}}) ...More }
               fragment More on Mutation { stationDelete(id: "st_read") }"""
    body = client.post("/graph/v2", headers=READ_HEADERS, json={"query": query}).get_json()
    assert body["data"] == {"a": None, "stationDelete": None}
    [error] = body["errors"]
    assert error["extensions"] == {"code": "FORBIDDEN", "scope": "write", "fields": ["stationCreate", "stationDelete"]}
    history = client.post("/graph/v2", headers=auth, json={"query": '{ stationHistory(id: "st_read") { revision } '
                                                                     "latestEventSeq }"}).get_json()
    assert history["data"] == {"stationHistory": [], "latestEventSeq": 0}


def test_a_read_token_reads_everything_and_asks_the_schema(client):
    query = "{ __typename __schema { queryType { name } } stations { id } events { seq } latestEventSeq }"
    body = client.post("/graph/v2", headers=READ_HEADERS, json={"query": query}).get_json()
    assert "errors" not in body and body["data"]["latestEventSeq"] == 0
