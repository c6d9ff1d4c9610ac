"""A write compares the stored document's bytes with the new body's (service.storage.files.stored_bytes): what it
decides from them must be what parsing would decide, and the common edits must be decided without a parse."""
import math

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.storage.common.encoding import encode
from service.storage.files.stored_bytes import (META_TAIL, StoredDocument, revision_at_end, same_body, split_meta,
                                                 with_meta)
from service.storage.contract import without_meta
from service.storage.contract.documents import utc_timestamp
from service.storage.files import FileRepository
from support.documents import bench_process

CREATED_AT, UPDATED_AT = "2026-11-29T06:00:00.000Z", "2026-11-29T07:30:12.345Z"

keys = st.sampled_from(["id", "name", "a", "b", "text", "quantity", "torque", "steps", "é", 'q"uote', "back\\slash"])
leaves = st.one_of(st.booleans(), st.integers(-1000, 1000), st.floats(allow_nan=False, allow_infinity=False),
                   st.text(max_size=12), st.sampled_from([0, 1, 1.0, 0.0, True, False, "1", "true", '"', "\\", ":,"]))
values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(keys, inner, max_size=4)), max_leaves=20)
bodies = st.dictionaries(keys, values, max_size=6)


@pytest.mark.exhaustive  # hundreds of generated bodies
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies, st.integers(1, 10**6))
def test_the_document_made_from_the_body_bytes_is_the_document_encoded_whole(body, revision):
    document = {**body, "createdAt": CREATED_AT, "updatedAt": UPDATED_AT, "revision": revision}
    assert with_meta(encode(body), CREATED_AT, UPDATED_AT, revision) == orjson.dumps(document)
    meta = split_meta(orjson.dumps(document))
    assert (meta.created_at, meta.updated_at, meta.revision, meta.body) == (CREATED_AT, UPDATED_AT, revision,
                                                                             encode(body))


@pytest.mark.exhaustive  # hundreds of generated bodies
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies, bodies)
def test_what_the_bytes_decide_is_what_a_parse_decides(one, other):
    verdict = same_body(orjson.dumps(one), orjson.dumps(other))
    assert verdict is None or verdict == (one == other)


def _edits(body):
    """Bodies one edit away from `body`: each leaf replaced by another value, or by an equal one of another type."""
    def walk(value, rebuild):
        if isinstance(value, dict):
            for key, item in value.items():
                yield from walk(item, lambda new, key=key: rebuild({**value, key: new}))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield from walk(item, lambda new, index=index: rebuild([*value[:index], new, *value[index + 1:]]))
        else:
            for replacement in (value, 1, 1.0, True, 0, False, "x", "", 12345, 2.5):
                yield rebuild(replacement)
    yield from walk(body, lambda new: new)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies)
def test_one_leaf_edited_is_decided_as_a_parse_decides(body):
    for edited in _edits(body):
        verdict = same_body(orjson.dumps(body), orjson.dumps(edited))
        assert verdict is None or verdict == (body == edited), (body, edited)


def test_an_equal_number_of_another_type_is_left_to_the_parse():
    assert same_body(b'{"quantity":1}', b'{"quantity":1.0}') is None
    assert same_body(b'{"torque":true}', b'{"torque":1}') is None
    assert {"quantity": 1} == {"quantity": 1.0}  # what the parse then finds: the same body


def test_keys_in_another_order_are_left_to_the_parse():
    assert same_body(orjson.dumps({"a": 1, "b": 2}), orjson.dumps({"b": 2, "a": 1})) is None


@pytest.mark.parametrize("edit", [
    lambda process: process.update(name=process["name"] + " 101"),           # a text longer
    lambda process: process.update(name=process["name"][:-3]),               # a text shorter
    lambda process: process.update(name=process["name"][:-1] + "X"),         # a text as long
    lambda process: process["steps"][7].update(name="Fit the 2nd cover plate"),
    lambda process: process["steps"][19].update(name="Last step, renamed"),
])
def test_the_usual_edits_of_a_large_process_are_decided_without_a_parse(edit):
    """The benchmark's 60 KB process with one text changed: the bytes tell (False), so the write parses nothing."""
    stored = bench_process("p1")
    edited = orjson.loads(orjson.dumps(stored))
    edit(edited)
    assert same_body(encode(stored), encode(edited)) is False


def test_a_stored_document_parses_only_when_its_bytes_cannot_tell():
    body = bench_process("p1")
    encoded = with_meta(encode(body), CREATED_AT, UPDATED_AT, 7)
    stored = StoredDocument(encoded)
    assert (stored.revision, stored.created_at, stored.updated_at) == (7, CREATED_AT, UPDATED_AT)
    assert stored.same_body(encode(body), body) is True
    renamed = {**body, "name": "Another name"}
    assert stored.same_body(encode(renamed), renamed) is False
    assert stored._parsed is None  # neither question parsed the document

    reordered = dict(reversed(list(body.items())))
    assert stored.same_body(encode(reordered), reordered) is True  # parsed, and found the same
    assert without_meta(stored._parsed) == body


def test_a_document_whose_end_is_not_the_metadata_as_written_now_is_parsed():
    older = orjson.dumps({"revision": 3, "createdAt": CREATED_AT, "updatedAt": UPDATED_AT, "id": "p1", "x": math.pi})
    stored = StoredDocument(older)
    assert (stored.revision, stored.created_at, stored.updated_at) == (3, CREATED_AT, UPDATED_AT)
    assert stored.same_body(encode({"id": "p1", "x": math.pi}), {"id": "p1", "x": math.pi}) is True


def test_a_push_equal_to_a_document_stored_in_another_key_order_stores_nothing(tmp_path):
    """A document an earlier version wrote with its fields in another order (and a Float as an int) is parsed: the
    equal push is unchanged, the next edit a new revision."""
    documents = FileRepository(tmp_path / "data").documents
    body = {"id": "p1", "name": "Housing", "steps": [{"id": "s1", "quantity": 1.0}]}
    first = documents.save("org", "processes", "p1", body)
    path = documents._path("org", "processes", "p1")
    older = {"name": "Housing", "steps": [{"quantity": 1, "id": "s1"}], "id": "p1", **{
        key: first.document[key] for key in ("createdAt", "updatedAt", "revision")}}
    path.write_bytes(orjson.dumps(older))
    again = documents.save("org", "processes", "p1", body)
    assert (again.changed, again.document["revision"]) == (False, 1)
    edited = documents.save("org", "processes", "p1", {**body, "name": "Housing, v2"})
    assert (edited.changed, edited.document["revision"]) == (True, 2)
    assert documents.get("org", "processes", "p1")["createdAt"] == first.document["createdAt"]


@pytest.mark.parametrize("body", [{}, {"id": "p_1", "name": "x" * 500}])
def test_the_revision_is_read_from_the_last_bytes_of_a_document_as_written(body):
    now = utc_timestamp()
    for revision in (1, 10**12):
        document = with_meta(encode(body), now, now, revision)
        assert revision_at_end(document[-META_TAIL:]) == revision
    assert revision_at_end(orjson.dumps({**body, "revision": 3, "createdAt": now, "updatedAt": now})) is None
