"""Every input rule of CONTRACT.md 3, checked on the domain functions directly."""
import pytest

from service.domain.ids import is_valid_id
from service.domain.processes import upsert_process
from service.domain.products import upsert_product
from service.domain.reads import PROCESSES, PRODUCTS, STATIONS
from service.domain.stations import upsert_station
from service.domain.validation import InvalidInput
from service.storage import get_repository
from support.datadir import store_media

ORG = "default"


@pytest.fixture
def repo(app):
    return get_repository(app)


def fields_of(excinfo):
    return [field for field, _ in excinfo.value.errors]


def process(**overrides):
    return {"id": "proc_1", "name": "Assemble", **overrides}


def action(identifier, **fields):
    return {"id": identifier, **fields}


def one_action_process(**action_fields):
    return process(steps=[{"id": "step_1", "actions": [action("act_1", **action_fields)]}])


def stored(repo, identifier="proc_1", kind=PROCESSES):
    """The document as it was written, read back from the repository."""
    return repo.documents.get(ORG, kind, identifier)


def refused(repo, data):
    with pytest.raises(InvalidInput) as excinfo:
        upsert_process(repo, ORG, data)
    assert repo.documents.ids(ORG, PROCESSES) == []
    return excinfo


@pytest.mark.parametrize("value", ["abc", "a" * 50, "ABC", "Mixed_Case_09", "___"])
def test_valid_ids(value):
    assert is_valid_id(value)


@pytest.mark.parametrize("value", ["ab", "a" * 51, "with-hyphen", "abc\n", "abc ", "", "caf\u00e9", "\uff41bc", None, 123])
def test_invalid_ids(value):
    assert not is_valid_id(value)


@pytest.mark.parametrize("field, data", [
    ("process.id", process(id="a-b")),
    ("process.id", process(id="abc\n")),
    ("process.steps[0].id", process(steps=[{"id": "x" * 51}])),
    ("process.steps[0].actions[0].id", process(steps=[{"id": "step_1", "actions": [action("no")]}])),
    ("process.steps[0].actions[0].inputParts[0].part.id",
     one_action_process(inputParts=[{"part": {"id": "bad part"}}])),
    ("process.steps[0].actions[0].inputParts[0].part.serial.id",
     one_action_process(inputParts=[{"part": {"id": "motor", "serial": {"id": "s-1"}}}])),
    ("process.steps[0].actions[0].outputPart.id", one_action_process(outputPart={"id": "x"})),
    ("process.steps[0].actions[0].outputPart.serial.id",
     one_action_process(outputPart={"id": "motor", "serial": {"id": "sn"}})),
    ("process.steps[0].actions[0].toolUsed.id", one_action_process(toolUsed={"id": "wrench!"})),
])
def test_every_id_is_checked_and_named_by_its_path(repo, field, data):
    excinfo = refused(repo, data)
    assert fields_of(excinfo) == [field]
    assert "^[A-Za-z0-9_]{3,50}$" in excinfo.value.errors[0][1]


def test_ids_of_3_and_50_characters_and_uppercase_are_accepted(repo):
    document, created = upsert_process(repo, ORG, process(id="ABC", steps=[{"id": "s" * 50}]))
    assert created and document["id"] == "ABC"
    assert stored(repo, "ABC") == document and document["steps"][0]["id"] == "s" * 50


def test_blank_name_is_refused(repo):
    assert fields_of(refused(repo, process(name="  "))) == ["process.name"]


def test_duplicate_step_ids_are_refused(repo):
    excinfo = refused(repo, process(steps=[{"id": "step_1"}, {"id": "step_2"}, {"id": "step_1"}]))
    assert fields_of(excinfo) == ["process.steps[2].id"]
    assert "process.steps[0].id" in excinfo.value.errors[0][1]


def test_duplicate_action_ids_are_refused_across_steps(repo):
    data = process(steps=[{"id": "step_1", "actions": [action("act_1")]},
                          {"id": "step_2", "actions": [action("act_2"), action("act_1")]}])
    excinfo = refused(repo, data)
    assert fields_of(excinfo) == ["process.steps[1].actions[1].id"]
    assert "duplicate action id 'act_1'" in excinfo.value.errors[0][1]


def test_step_and_action_may_share_an_id(repo):
    upsert_process(repo, ORG, process(steps=[{"id": "same", "actions": [action("same")]}]))
    [step] = stored(repo)["steps"]
    assert (step["id"], [entry["id"] for entry in step["actions"]]) == ("same", ["same"])


def test_quantity_zero_is_refused(repo):
    data = one_action_process(inputParts=[{"part": {"id": "bolt"}, "quantity": 0}])
    assert fields_of(refused(repo, data)) == ["process.steps[0].actions[0].inputParts[0].quantity"]


def test_negative_quantity_is_refused(repo):
    data = one_action_process(inputParts=[{"part": {"id": "bolt"}, "quantity": -2}])
    assert fields_of(refused(repo, data)) == ["process.steps[0].actions[0].inputParts[0].quantity"]


def test_fractional_quantity_is_accepted_and_unset_quantity_defaults_to_1(repo):
    data = one_action_process(inputParts=[{"part": {"id": "cable"}, "quantity": 0.5}, {"part": {"id": "bolt"}},
                                          {"part": {"id": "nut"}, "quantity": None}])
    document, _ = upsert_process(repo, ORG, data)
    parts = document["steps"][0]["actions"][0]["inputParts"]
    assert [entry["quantity"] for entry in parts] == [0.5, 1, 1]
    assert stored(repo) == document


def test_min_greater_than_max_is_refused(repo):
    data = one_action_process(measurement={"measured": "torque", "units": "torque-Nm", "min": 5, "max": 4.5})
    excinfo = refused(repo, data)
    assert fields_of(excinfo) == ["process.steps[0].actions[0].measurement.min"]


@pytest.mark.parametrize("low, high", [(4, 4), (None, 1), (3, None), (-1, 0)])
def test_min_not_above_max_is_accepted(repo, low, high):
    upsert_process(repo, ORG, one_action_process(measurement={"min": low, "max": high}))
    measurement = stored(repo)["steps"][0]["actions"][0]["measurement"]
    assert (measurement.get("min"), measurement.get("max")) == (low, high)


@pytest.mark.parametrize("units", ["torque-Nm", "length-mm", "temperature-degC", "t-N-m"])
def test_units_of_the_form_quantity_dash_unit_are_accepted(repo, units):
    upsert_process(repo, ORG, one_action_process(measurement={"units": units}))
    assert stored(repo)["steps"][0]["actions"][0]["measurement"]["units"] == units


@pytest.mark.parametrize("units", ["mm", "-mm", "torque-", "torque -Nm", "torque-N m", "", "-", "torque-\n"])
def test_malformed_units_are_refused(repo, units):
    data = one_action_process(measurement={"units": units})
    assert fields_of(refused(repo, data)) == ["process.steps[0].actions[0].measurement.units"]


def test_negative_auto_signout_is_refused_zero_and_unset_are_accepted(repo):
    assert fields_of(refused(repo, process(autoSignoutMinutes=-1))) == ["process.autoSignoutMinutes"]
    upsert_process(repo, ORG, process(autoSignoutMinutes=0))
    upsert_process(repo, ORG, process(id="proc_2", autoSignoutMinutes=None))
    assert (stored(repo)["autoSignoutMinutes"], stored(repo, "proc_2").get("autoSignoutMinutes")) == (0, None)


def test_enum_defaults_are_applied(repo):
    document, _ = upsert_process(repo, ORG, process(startBehavior=None, steps=[
        {"id": "step_1", "alerts": [{"text": "Hot surface"}, {"text": "Sharp", "severity": "DANGER"}]}]))
    assert (document["startBehavior"], document["endBehavior"]) == ("CONFIRM", "SUMMARY")
    assert [alert["severity"] for alert in document["steps"][0]["alerts"]] == ["WARNING", "DANGER"]


def test_styled_text_colour_must_be_hex(repo):
    data = process(steps=[{"id": "step_1", "instructionText": {"text": "Hi", "color": "red"}}])
    assert fields_of(refused(repo, data)) == ["process.steps[0].instructionText.color"]
    upsert_process(repo, ORG, process(steps=[{"id": "step_1", "instructionText": {"text": "Hi", "color": "#FF8800", "bold": True}}]))


def test_every_problem_is_reported_at_once(repo):
    data = process(id="x", name="", autoSignoutMinutes=-5, steps=[
        {"id": "step_1", "actions": [action("act_1", measurement={"units": "mm", "min": 2, "max": 1})]},
        {"id": "step_1"}])
    assert fields_of(refused(repo, data)) == [
        "process.id", "process.name", "process.autoSignoutMinutes",
        "process.steps[0].actions[0].measurement.units", "process.steps[0].actions[0].measurement.min",
        "process.steps[1].id"]


# ---------------------------------------------------------------- media paths

def upload(repo, org, path):
    store_media(repo, org, path)


def test_media_uploaded_by_the_org_are_accepted(repo):
    upload(repo, ORG, "/api/v1/images/abc-photo.png")
    upload(repo, ORG, "/api/v1/videos/abc-clip.mp4")
    data = process(image={"path": "/api/v1/images/abc-photo.png"}, steps=[
        {"id": "step_1", "primaryImage": {"path": "/api/v1/images/abc-photo.png"},
         "video": {"path": "/api/v1/videos/abc-clip.mp4", "title": "How to"}}])
    document, _ = upsert_process(repo, ORG, data)
    assert document["steps"][0]["video"]["path"] == "/api/v1/videos/abc-clip.mp4"
    assert stored(repo) == document and document["image"]["path"] == "/api/v1/images/abc-photo.png"


@pytest.mark.parametrize("field, data, expected", [
    ("process.image.path", process(image={"path": "/api/v1/images/nope.png"}), "no image has been uploaded"),
    ("process.steps[0].primaryImage.path",
     process(steps=[{"id": "step_1", "primaryImage": {"path": "/api/v1/videos/abc-clip.mp4"}}]), "is a path for videos"),
    ("process.steps[0].video.path",
     process(steps=[{"id": "step_1", "video": {"path": "/api/v1/images/abc-photo.png"}}]), "is a path for images"),
    ("process.image.path", process(image={"path": "/etc/passwd"}), "must be a path returned by the upload interface"),
    ("process.image.path", process(image={"path": "/api/v1/images/../x"}), "must be a path returned by the upload interface"),
    ("process.image.path", process(image={"path": "/api/v1/images/other-photo.png"}), "no image has been uploaded"),
])
def test_media_paths_must_name_media_of_the_org_of_the_right_kind(repo, field, data, expected):
    upload(repo, ORG, "/api/v1/images/abc-photo.png")
    upload(repo, ORG, "/api/v1/videos/abc-clip.mp4")
    upload(repo, "other", "/api/v1/images/other-photo.png")
    excinfo = refused(repo, data)
    assert fields_of(excinfo) == [field]
    assert expected in excinfo.value.errors[0][1]


# ---------------------------------------------------------------- products

@pytest.fixture
def processes(repo):
    for identifier in ("aaa", "bbb", "ccc", "fin"):
        upsert_process(repo, ORG, process(id=identifier))
    return repo


def product(dependencies, final="fin", **overrides):
    return {"id": "prod_1", "name": "Widget", "finalProcessId": final, "dependencies": dependencies, **overrides}


def edge(down, up, **fields):
    return {"processId": down, "upstreamProcessId": up, **fields}


def refused_product(repo, data):
    with pytest.raises(InvalidInput) as excinfo:
        upsert_product(repo, ORG, data)
    assert repo.documents.ids(ORG, PRODUCTS) == []
    return excinfo


def test_valid_product_is_stored_with_default_quantity(processes):
    document, created = upsert_product(processes, ORG, product([edge("bbb", "aaa", quantity=2), edge("fin", "bbb"),
                                                                edge("fin", "ccc")]))
    assert created
    assert [dependency["quantity"] for dependency in document["dependencies"]] == [2, 1, 1]
    assert processes.documents.get(ORG, PRODUCTS, document["id"]) == document


def test_empty_dependencies_is_a_product_of_the_final_process(processes):
    document, _ = upsert_product(processes, ORG, product([]))
    assert document["dependencies"] == []


def test_unknown_processes_are_refused(processes):
    excinfo = refused_product(processes, product([edge("fin", "zzz")], final="nope"))
    assert fields_of(excinfo)[:2] == ["product.finalProcessId", "product.dependencies[0].upstreamProcessId"]
    assert "no process 'nope' exists in your org" in excinfo.value.errors[0][1]


def test_processes_of_another_org_are_unknown(processes):
    upsert_process(processes, "other", process(id="theirs"))
    excinfo = refused_product(processes, product([edge("fin", "theirs")]))
    assert "no process 'theirs' exists" in dict(excinfo.value.errors)["product.dependencies[0].upstreamProcessId"]


def test_product_ids_are_checked(processes):
    excinfo = refused_product(processes, product([edge("fin", "a-a")], id="p"))
    assert fields_of(excinfo) == ["product.id", "product.dependencies[0].upstreamProcessId"]


def test_self_edge_is_refused(processes):
    excinfo = refused_product(processes, product([edge("aaa", "aaa"), edge("fin", "aaa")]))
    assert excinfo.value.errors == [("product.dependencies[0]", "process 'aaa' cannot depend on itself")]


def test_repeated_pair_is_refused(processes):
    excinfo = refused_product(processes, product([edge("fin", "aaa"), edge("fin", "aaa", quantity=3)]))
    assert fields_of(excinfo) == ["product.dependencies[1]"]
    assert "product.dependencies[0]" in excinfo.value.errors[0][1]


def test_quantity_zero_is_refused_on_a_dependency(processes):
    excinfo = refused_product(processes, product([edge("fin", "aaa", quantity=0)]))
    assert fields_of(excinfo) == ["product.dependencies[0].quantity"]


def test_cycle_is_refused_and_named(processes):
    excinfo = refused_product(processes, product([edge("bbb", "aaa"), edge("aaa", "bbb"), edge("fin", "bbb")]))
    assert ("product.dependencies", "must not contain a cycle; found aaa -> bbb -> aaa") in excinfo.value.errors


def test_longer_cycle_is_named_in_flow_order(processes):
    excinfo = refused_product(processes, product([edge("bbb", "aaa"), edge("ccc", "bbb"), edge("aaa", "ccc"),
                                                  edge("fin", "ccc")]))
    assert ("product.dependencies", "must not contain a cycle; found aaa -> bbb -> ccc -> aaa") in excinfo.value.errors


def test_cycle_reached_from_outside_names_only_the_cycle(processes):
    excinfo = refused_product(processes, product([edge("aaa", "ccc"), edge("bbb", "aaa"), edge("aaa", "bbb"),
                                                  edge("fin", "bbb")]))
    assert ("product.dependencies", "must not contain a cycle; found aaa -> bbb -> aaa") in excinfo.value.errors


def test_final_process_upstream_of_something_is_refused(processes):
    excinfo = refused_product(processes, product([edge("fin", "aaa"), edge("bbb", "fin")]))
    assert ("product.dependencies[1].upstreamProcessId",
            "the final process 'fin' must be upstream of nothing, but 'bbb' depends on it") in excinfo.value.errors


def test_process_not_leading_to_final_is_refused(processes):
    excinfo = refused_product(processes, product([edge("fin", "aaa"), edge("ccc", "bbb")]))
    assert excinfo.value.errors == [
        ("product.dependencies[1].processId", "process 'ccc' does not lead to the final process 'fin'"),
        ("product.dependencies[1].upstreamProcessId", "process 'bbb' does not lead to the final process 'fin'")]


def test_long_chain_is_checked_without_recursion_limits(repo):
    chain = [f"p{i:04d}" for i in range(1500)]
    for identifier in chain:
        repo.documents.upsert(ORG, PROCESSES, identifier, {"id": identifier})
    dependencies = [edge(down, up) for up, down in zip(chain, chain[1:])]
    upsert_product(repo, ORG, product(dependencies, final=chain[-1]))
    with pytest.raises(InvalidInput) as excinfo:
        upsert_product(repo, ORG, product(dependencies + [edge(chain[0], chain[-2])], final=chain[-1]))
    assert "must not contain a cycle" in dict(excinfo.value.errors)["product.dependencies"]


# ---------------------------------------------------------------- stations

def test_station_rules(repo):
    with pytest.raises(InvalidInput) as excinfo:
        upsert_station(repo, ORG, {"id": "st", "name": ""})
    assert fields_of(excinfo) == ["station.id", "station.name"]
    assert repo.documents.ids(ORG, STATIONS) == []
    document, created = upsert_station(repo, ORG, {"id": "st_1", "name": "Bench 1"})
    assert created and document["name"] == "Bench 1"


def test_the_id_pattern_is_written_one_way_in_the_schema_the_messages_and_the_docs():
    from pathlib import Path

    from service.domain.ids import ID_PATTERN, ID_RULE

    written = f"^{ID_PATTERN.pattern}$"
    root = Path(__file__).resolve().parents[1]
    for text in (ID_RULE, (root / "schema.graphql").read_text(), (root / "docs" / "api.md").read_text()):
        assert written in text
        assert "^[a-z0-9_]{3,50}$" not in text
