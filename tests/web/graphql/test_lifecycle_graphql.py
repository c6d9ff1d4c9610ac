"""CONTRACT 10 through GraphQL on both backends: unchanged pushes, the stored input read back, history and past
revisions, retention, delete, restore, ifRevision and dryRun."""
import json
import random
import re
from pathlib import Path

import pytest

from service.domain import text_changes
from service.domain.derivations import derive
from service.domain.processes import with_defaults
from service.interface.kinds import PROCESSES
from service.storage import get_repository
from support.datadir import store_media
from support.paths import REPOSITORY
from support.word_matching import counted_matching

ORG = "default"
API_DOCS = REPOSITORY / "docs" / "api.md"
IMAGE = "/api/v1/images/3f9a0c1d2e4b5a69-gearbox_housing.png"


def example_process():
    """The process of the complete example of docs/api.md."""
    text = API_DOCS.read_text(encoding="utf-8")
    block = re.search(r"<!-- example request: process-create -->\s*```json\n(.*?)```", text, re.S)[1]
    return json.loads(block)["variables"]["input"]["process"]


def gql(client, auth, query, **variables):
    response = client.post("/graph/v2", headers=auth, json={"query": query, "variables": variables})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def create(client, auth, process, **arguments):
    return gql(client, auth, "mutation($p: ProcessInput!, $r: Int, $d: Boolean) "
                             "{ processCreate(input: {process: $p}, ifRevision: $r, dryRun: $d) }",
               p=process, r=arguments.get("ifRevision"), d=arguments.get("dryRun", False))


def read(client, auth, identifier, revision=None, fields="revision updatedAt name input"):
    answer = gql(client, auth, f"query($id: String!, $r: Int) {{ process(id: $id, revision: $r) {{ {fields} }} }}",
                 id=identifier, r=revision)
    return answer["data"]["process"]


def history(client, auth, identifier, first=100, after=None, kind="process"):
    answer = gql(client, auth, f"query($id: String!, $f: Int, $a: Int) {{ {kind}History(id: $id, first: $f, after: $a) "
                               "{ revision savedAt change } }", id=identifier, f=first, a=after)
    return [(entry["revision"], entry["change"]) for entry in answer["data"][f"{kind}History"]]


def delete(client, auth, identifier, kind="process", **arguments):
    return gql(client, auth, f"mutation($id: String!, $r: Int, $d: Boolean) "
                             f"{{ {kind}Delete(id: $id, ifRevision: $r, dryRun: $d) }}",
               id=identifier, r=arguments.get("ifRevision"), d=arguments.get("dryRun", False))


def restore(client, auth, identifier, revision, kind="process", **arguments):
    return gql(client, auth, f"mutation($id: String!, $n: Int!, $r: Int, $d: Boolean) "
                             f"{{ {kind}Restore(id: $id, revision: $n, ifRevision: $r, dryRun: $d) }}",
               id=identifier, n=revision, r=arguments.get("ifRevision"), d=arguments.get("dryRun", False))


def codes(answer):
    return [error["extensions"]["code"] for error in answer.get("errors", [])]


def simple(name="Line", identifier="line_1"):
    return {"id": identifier, "name": name, "steps": [{"id": "step_1", "actions": [{"id": "act_1"}]}]}


@pytest.fixture
def repo(app):
    return get_repository(app)


@pytest.fixture
def example(repo):
    store_media(repo, ORG, IMAGE)
    return example_process()


def test_the_complete_example_read_back_as_input_is_an_unchanged_push(client, auth, example):
    assert create(client, auth, example)["data"] == {"processCreate": "CREATED"}
    before = read(client, auth, "gearbox_assembly", fields="revision updatedAt input steps { actions { id kind } }")
    assert any(action["kind"] == "SCAN" for step in before["steps"] for action in step["actions"])
    assert all("kind" not in action for step in before["input"]["steps"] for action in step["actions"])
    assert create(client, auth, before["input"])["data"] == {"processCreate": "UPDATED"}
    after = read(client, auth, "gearbox_assembly", fields="revision updatedAt input steps { actions { id kind } }")
    assert after == before and after["revision"] == 1
    assert history(client, auth, "gearbox_assembly") == [(1, "CREATED")]


def test_an_explicit_null_and_an_omitted_field_are_one_input(client, auth):
    create(client, auth, simple())
    with_nulls = {**simple(), "description": None, "partNumber": None, "startBehavior": None,
                  "steps": [{"id": "step_1", "name": None, "actions": [{"id": "act_1", "toolUsed": None}]}]}
    assert create(client, auth, with_nulls)["data"] == {"processCreate": "UPDATED"}
    stored = read(client, auth, "line_1")
    assert stored["revision"] == 1
    assert stored["input"] == {"id": "line_1", "name": "Line", "startBehavior": "CONFIRM", "endBehavior": "SUMMARY",
                               "steps": [{"id": "step_1", "actions": [{"id": "act_1"}]}]}


def test_each_change_is_a_revision_and_past_revisions_read_as_they_were(client, auth):
    create(client, auth, simple("one"))
    create(client, auth, simple("two"))
    create(client, auth, simple("three"))
    assert history(client, auth, "line_1") == [(3, "UPDATED"), (2, "UPDATED"), (1, "CREATED")]
    assert history(client, auth, "line_1", first=1, after=3) == [(2, "UPDATED")]
    assert history(client, auth, "line_1", first=0) == []
    first = read(client, auth, "line_1", revision=1, fields="name revision steps { actions { id kind torque } }")
    assert first == {"name": "one", "revision": 1,
                     "steps": [{"actions": [{"id": "act_1", "kind": "STANDARD", "torque": False}]}]}
    assert read(client, auth, "line_1", revision=4) is None
    assert read(client, auth, "line_1", revision=0) is None
    assert history(client, auth, "never_made") == []
    answer = gql(client, auth, "{ processHistory(id: \"line_1\", first: 1001) { revision } }")
    assert codes(answer) == ["BAD_USER_INPUT"]


def test_retention_prunes_the_oldest_revisions_in_the_write(make_app, auth):
    client = make_app(HISTORY_REVISIONS=2).test_client()
    for name in ("one", "two", "three", "four"):
        create(client, auth, simple(name))
    assert history(client, auth, "line_1") == [(4, "UPDATED"), (3, "UPDATED")]
    assert read(client, auth, "line_1", revision=2) is None
    assert read(client, auth, "line_1", revision=3)["name"] == "three"
    keeping_all = make_app(HISTORY_REVISIONS=0).test_client()
    for name in ("one", "two", "three", "four"):
        create(keeping_all, auth, simple(name))
    assert [revision for revision, _ in history(keeping_all, auth, "line_1")] == [4, 3, 2, 1]


def test_delete_keeps_the_history_and_a_new_create_continues_it(client, auth):
    create(client, auth, simple("one"))
    create(client, auth, simple("two"))
    assert delete(client, auth, "line_1") == {"data": {"processDelete": "DELETED"}}
    assert read(client, auth, "line_1") is None
    assert gql(client, auth, "{ processes { id } }")["data"] == {"processes": []}
    assert history(client, auth, "line_1") == [(3, "DELETED"), (2, "UPDATED"), (1, "CREATED")]
    assert read(client, auth, "line_1", revision=3) is None
    again = delete(client, auth, "line_1")
    assert codes(again) == ["NOT_FOUND"] and again["data"] == {"processDelete": None}
    assert codes(delete(client, auth, "never_made")) == ["NOT_FOUND"]
    assert create(client, auth, simple("three"))["data"] == {"processCreate": "CREATED"}
    assert read(client, auth, "line_1")["revision"] == 4
    assert history(client, auth, "line_1")[0] == (4, "CREATED")


def test_a_process_named_by_a_product_is_not_deleted(client, auth):
    create(client, auth, simple(identifier="line_1"))
    create(client, auth, simple(identifier="line_2"))
    for product in ("prod_a", "prod_b"):
        gql(client, auth, "mutation($p: ProductInput!) { productCreate(input: {product: $p}) }",
            p={"id": product, "name": "P", "finalProcessId": "line_2",
               "dependencies": [{"processId": "line_2", "upstreamProcessId": "line_1"}]})
    refused = delete(client, auth, "line_1")
    assert codes(refused) == ["CONFLICT"] and refused["errors"][0]["extensions"]["products"] == ["prod_a", "prod_b"]
    assert "'prod_a', 'prod_b'" in refused["errors"][0]["message"]
    assert read(client, auth, "line_1")["revision"] == 1 and history(client, auth, "line_1") == [(1, "CREATED")]
    assert delete(client, auth, "prod_a", kind="product")["data"] == {"productDelete": "DELETED"}
    assert delete(client, auth, "prod_b", kind="product")["data"] == {"productDelete": "DELETED"}
    assert delete(client, auth, "line_1")["data"] == {"processDelete": "DELETED"}
    # A product naming the deleted process is refused; restoring the product's revision too.
    assert codes(restore(client, auth, "prod_a", 1, kind="product")) == ["BAD_USER_INPUT"]


def test_restore_stores_a_past_input_as_a_new_revision(client, auth):
    create(client, auth, simple("one"))
    create(client, auth, simple("two"))
    assert restore(client, auth, "line_1", 1) == {"data": {"processRestore": "UPDATED"}}
    assert read(client, auth, "line_1")["name"] == "one"
    assert history(client, auth, "line_1")[0] == (3, "RESTORED")
    # The same input again: an unchanged push.
    assert restore(client, auth, "line_1", 1) == {"data": {"processRestore": "UPDATED"}}
    assert read(client, auth, "line_1")["revision"] == 3
    delete(client, auth, "line_1")
    assert restore(client, auth, "line_1", 2) == {"data": {"processRestore": "CREATED"}}
    assert (read(client, auth, "line_1")["name"], history(client, auth, "line_1")[0]) == ("two", (5, "RESTORED"))
    for revision in (4, 6, 0, -1):  # the deletion, beyond, nonsense
        assert codes(restore(client, auth, "line_1", revision)) == ["NOT_FOUND"]
    assert codes(restore(client, auth, "never_made", 1)) == ["NOT_FOUND"]


def test_restoring_a_revision_whose_media_were_removed_names_the_entry(client, auth, repo, example):
    create(client, auth, example)
    create(client, auth, {**example, "image": None, "steps": example["steps"][1:]})
    repo.media.delete(ORG, IMAGE)
    answer = restore(client, auth, "gearbox_assembly", 1)
    assert codes(answer) == ["BAD_USER_INPUT", "BAD_USER_INPUT"]
    assert [error["extensions"]["field"] for error in answer["errors"]] == [
        "process.image.path", "process.steps[0].primaryImage.path"]
    assert IMAGE in answer["errors"][0]["message"]
    assert read(client, auth, "gearbox_assembly")["revision"] == 2


def test_if_revision_guards_every_write(client, auth):
    assert create(client, auth, simple("one"), ifRevision=0)["data"] == {"processCreate": "CREATED"}
    refused = create(client, auth, simple("two"), ifRevision=0)
    assert codes(refused) == ["CONFLICT"] and refused["errors"][0]["extensions"]["revision"] == 1
    assert create(client, auth, simple("two"), ifRevision=1)["data"] == {"processCreate": "UPDATED"}
    stale = delete(client, auth, "line_1", ifRevision=1)
    assert codes(stale) == ["CONFLICT"] and stale["errors"][0]["extensions"]["revision"] == 2
    assert codes(restore(client, auth, "line_1", 1, ifRevision=1)) == ["CONFLICT"]
    assert read(client, auth, "line_1")["name"] == "two"
    assert delete(client, auth, "line_1", ifRevision=2)["data"] == {"processDelete": "DELETED"}
    gone = create(client, auth, simple("three"), ifRevision=3)
    assert codes(gone) == ["CONFLICT"] and gone["errors"][0]["extensions"]["revision"] == 0
    assert restore(client, auth, "line_1", 1, ifRevision=0)["data"] == {"processRestore": "CREATED"}


def test_dry_runs_answer_as_the_write_would_and_store_nothing(client, auth):
    assert create(client, auth, simple("one"), dryRun=True)["data"] == {"processCreate": "CREATED"}
    assert read(client, auth, "line_1") is None and history(client, auth, "line_1") == []
    create(client, auth, simple("one"))
    before = (read(client, auth, "line_1"), history(client, auth, "line_1"))
    assert create(client, auth, simple("two"), dryRun=True)["data"] == {"processCreate": "UPDATED"}
    assert codes(create(client, auth, {**simple(), "id": "x"}, dryRun=True)) == ["BAD_USER_INPUT"]
    assert codes(create(client, auth, simple("two"), dryRun=True, ifRevision=5)) == ["CONFLICT"]
    assert delete(client, auth, "line_1", dryRun=True)["data"] == {"processDelete": "DELETED"}
    assert restore(client, auth, "line_1", 1, dryRun=True)["data"] == {"processRestore": "UPDATED"}
    assert (read(client, auth, "line_1"), history(client, auth, "line_1")) == before


def test_a_document_stored_with_its_derivations_reads_as_its_input(client, auth, repo, example):
    """Documents written by versions that stored derived data: converted on read, the new form on the next write."""
    given = create(client, auth, example) and read(client, auth, "gearbox_assembly")["input"]
    repo.documents.save(ORG, PROCESSES, "old_form", derive(with_defaults({**example, "id": "old_form"})))
    old = read(client, auth, "old_form", fields="input billOfMaterials { quantity } steps { actions { id kind } }")
    assert old["input"] == {**given, "id": "old_form"}
    current = read(client, auth, "gearbox_assembly", fields="billOfMaterials { quantity } steps { actions { id kind } }")
    assert {key: old[key] for key in current} == current
    assert create(client, auth, old["input"])["data"] == {"processCreate": "UPDATED"}
    assert repo.documents.get(ORG, PROCESSES, "old_form").keys() == repo.documents.get(
        ORG, PROCESSES, "gearbox_assembly").keys()
    revision = read(client, auth, "old_form")["revision"]
    create(client, auth, old["input"])
    assert read(client, auth, "old_form")["revision"] == revision


def test_station_and_product_lifecycle(client, auth):
    station = "mutation($s: StationInput!) { stationCreate(input: {station: $s}) }"
    assert gql(client, auth, station, s={"id": "st_1", "name": "Bench"})["data"] == {"stationCreate": "CREATED"}
    assert gql(client, auth, station, s={"id": "st_1", "name": "Bench"})["data"] == {"stationCreate": "UPDATED"}
    answer = gql(client, auth, '{ station(id: "st_1") { revision input } }')["data"]["station"]
    assert answer == {"revision": 1, "input": {"id": "st_1", "name": "Bench"}}
    assert delete(client, auth, "st_1", kind="station")["data"] == {"stationDelete": "DELETED"}
    assert history(client, auth, "st_1", kind="station") == [(2, "DELETED"), (1, "CREATED")]
    assert restore(client, auth, "st_1", 1, kind="station")["data"] == {"stationRestore": "CREATED"}
    create(client, auth, simple())
    product = {"id": "prod_1", "name": "P", "finalProcessId": "line_1", "dependencies": []}
    gql(client, auth, "mutation($p: ProductInput!) { productCreate(input: {product: $p}) }", p=product)
    read_back = gql(client, auth, '{ product(id: "prod_1") { input } }')["data"]["product"]["input"]
    assert read_back == product
    again = gql(client, auth, "mutation($p: ProductInput!) { productCreate(input: {product: $p}) }", p=read_back)
    assert again["data"] == {"productCreate": "UPDATED"}
    assert history(client, auth, "prod_1", kind="product") == [(1, "CREATED")]


@pytest.mark.file_backend_only("a document as the file backend of earlier versions wrote it, without history entries")
def test_a_document_of_an_earlier_version_starts_its_history_at_its_revision(app, client, auth):
    directory = Path(app.config["DATA_DIR"]) / "orgs" / "default" / "stations"
    directory.mkdir(parents=True)
    (directory / "st_1.json").write_bytes(b'{"id":"st_1","name":"A","createdAt":"2024-01-01T00:00:00.000Z",'
                                          b'"updatedAt":"2024-01-02T00:00:00.000Z","revision":3}')
    assert history(client, auth, "st_1", kind="station") == [(3, "UPDATED")]
    assert gql(client, auth, '{ station(id: "st_1", revision: 3) { name } }')["data"] == {"station": {"name": "A"}}
    station = "mutation($s: StationInput!) { stationCreate(input: {station: $s}) }"
    assert gql(client, auth, station, s={"id": "st_1", "name": "B"})["data"] == {"stationCreate": "UPDATED"}
    assert history(client, auth, "st_1", kind="station") == [(4, "UPDATED"), (3, "UPDATED")]


def test_the_comparisons_of_one_operation_share_one_budget_of_word_matching(client, auth, monkeypatch):
    """`processChanges` under 100 aliases of two revisions whose texts are difflib's worst case: the operation asks
    difflib for at most one budget's word comparisons in all (service.domain.text_changes), not one per alias."""
    spent = counted_matching(monkeypatch)
    rng = random.Random(5)
    for _ in range(2):
        text = " ".join(rng.choice("ab") for _ in range(300))
        create(client, auth, {"id": "diff_1", "name": "D", "steps": [{"id": "st_1", "instructionText": {"text": text}}]})
    query = "{ " + " ".join(f'a{i}: processChanges(id: "diff_1", from: 1, to: 2)' for i in range(100)) + " }"
    answer = gql(client, auth, query)
    assert "errors" not in answer and all(len(lines) == 1 for lines in answer["data"].values())
    assert 0 < sum(spent) <= text_changes.MATCH_BUDGET and len(spent) < 10
