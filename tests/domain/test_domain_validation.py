"""Every input rule of CONTRACT.md 3, checked on the domain functions directly."""
import pytest

from service.interface.ids import is_valid_id
from service.domain import processes as process_rules, validation
from service.domain.processes import upsert_process
from service.domain.products import upsert_product
from service.interface.kinds import PROCESSES, PRODUCTS, STATIONS
from service.domain.reads import get_object, present
from service.domain.stations import upsert_station
from service.domain.validation import InvalidInput
from service.errors import UnstorableDocument
from service.interface import MAX_INPUT_OBJECTS, MAX_INPUT_SIZE, MAX_NAME_LENGTH, MAX_TEXT_LENGTH
from service.storage import get_repository
from support.datadir import store_media
from support.paths import REPOSITORY

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
    """The object as it is read back (derived data included)."""
    return get_object(repo, ORG, kind, identifier)


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
    document, created, _ = upsert_process(repo, ORG, process(id="ABC", steps=[{"id": "s" * 50}]))
    assert created and document["id"] == "ABC"
    assert stored(repo, "ABC") == present(PROCESSES, document) and document["steps"][0]["id"] == "s" * 50


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
    document, _, _ = upsert_process(repo, ORG, data)
    parts = document["steps"][0]["actions"][0]["inputParts"]
    assert [entry["quantity"] for entry in parts] == [0.5, 1, 1]
    assert stored(repo) == present(PROCESSES, document)


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
    document, _, _ = upsert_process(repo, ORG, process(startBehavior=None, steps=[
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


# ---------------------------------------------------------------- numbers JSON can store, texts of bounded length

INFINITE = float("1e400")


@pytest.mark.parametrize("where, data", [
    ("inputParts[0].quantity", one_action_process(inputParts=[{"part": {"id": "bolt"}, "quantity": INFINITE}])),
    ("measurement.min", one_action_process(measurement={"min": -INFINITE, "max": 1.0})),
    ("measurement.max", one_action_process(measurement={"min": 1.0, "max": INFINITE})),
    ("measurement.min", one_action_process(measurement={"min": float("nan")})),
])
def test_numbers_that_are_not_finite_are_refused_by_name(repo, where, data):
    """1e400 written in the query text is infinite; JSON would store it as null and every read of it would fail."""
    excinfo = refused(repo, data)
    assert f"process.steps[0].actions[0].{where}" in fields_of(excinfo)
    assert "must be a finite number" in dict(excinfo.value.errors)[f"process.steps[0].actions[0].{where}"]


def test_quantities_whose_sum_is_not_finite_are_refused(repo):
    """Each quantity is finite, but the bill of materials adds them up: 1.5e308 twice is infinite."""
    data = process(steps=[{"id": "step_1", "actions": [
        action("act_1", inputParts=[{"part": {"id": "bolt"}, "quantity": 1.5e308}]),
        action("act_2", inputParts=[{"part": {"id": "nut"}, "quantity": 1.5e308},
                                    {"part": {"id": "bolt"}, "quantity": 1.5e308}])]}])
    excinfo = refused(repo, data)
    assert fields_of(excinfo) == ["process.steps[0].actions[1].inputParts[1].quantity"]
    assert "quantities of part 'bolt' add up to" in excinfo.value.errors[0][1]


def test_the_largest_finite_numbers_are_stored_and_read_back(repo):
    data = one_action_process(inputParts=[{"part": {"id": "bolt"}, "quantity": 1.7e308}],
                              measurement={"min": -1.7e308, "max": 1.7e308})
    document, _, _ = upsert_process(repo, ORG, data)
    assert stored(repo) == present(PROCESSES, document) and stored(repo)["billOfMaterials"][0]["quantity"] == 1.7e308


@pytest.mark.parametrize("field, limit, data", [
    ("process.name", MAX_NAME_LENGTH, lambda text: process(name=text)),
    ("process.partNumber", MAX_NAME_LENGTH, lambda text: process(partNumber=text)),
    ("process.description", MAX_TEXT_LENGTH, lambda text: process(description=text)),
    ("process.steps[0].name", MAX_NAME_LENGTH, lambda text: process(steps=[{"id": "step_1", "name": text}])),
    ("process.steps[0].instructionText.text", MAX_TEXT_LENGTH,
     lambda text: process(steps=[{"id": "step_1", "instructionText": {"text": text}}])),
    ("process.steps[0].alerts[1].title", MAX_NAME_LENGTH,
     lambda text: process(steps=[{"id": "step_1", "alerts": [{"text": "a"}, {"text": "b", "title": text}]}])),
    ("process.steps[0].notes[0].text", MAX_TEXT_LENGTH,
     lambda text: process(steps=[{"id": "step_1", "notes": [{"text": text}]}])),
    ("process.steps[0].actions[0].description.text", MAX_TEXT_LENGTH,
     lambda text: one_action_process(description={"text": text})),
    ("process.steps[0].actions[0].inputParts[0].part.serial.pattern", MAX_TEXT_LENGTH,
     lambda text: one_action_process(inputParts=[{"part": {"id": "pcb", "serial": {"id": "pcb_sn", "pattern": text}}}])),
    ("process.steps[0].actions[0].measurement.measured", MAX_NAME_LENGTH,
     lambda text: one_action_process(measurement={"measured": text})),
    ("process.steps[0].actions[0].toolUsed.description", MAX_TEXT_LENGTH,
     lambda text: one_action_process(toolUsed={"id": "tool_1", "description": text})),
    ("process.steps[0].actions[0].confirmation.confirmed", MAX_TEXT_LENGTH,
     lambda text: one_action_process(confirmation={"confirmed": text})),
])
def test_texts_and_names_are_accepted_up_to_their_limit(repo, field, limit, data):
    upsert_process(repo, ORG, data("\u00e9" * limit))
    excinfo = refused_again(repo, data("x" * (limit + 1)))
    assert fields_of(excinfo) == [field]
    assert f"is {limit + 1:,} characters long; at most {limit:,} are accepted" in excinfo.value.errors[0][1]


def refused_again(repo, data):
    """Refused, and the process stored before is as it was."""
    before = stored(repo)
    with pytest.raises(InvalidInput) as excinfo:
        upsert_process(repo, ORG, data)
    assert stored(repo) == before
    return excinfo


def test_names_of_products_and_stations_have_the_name_limit(repo):
    with pytest.raises(InvalidInput) as excinfo:
        upsert_station(repo, ORG, {"id": "st_1", "name": "n" * (MAX_NAME_LENGTH + 1)})
    assert fields_of(excinfo) == ["station.name"]
    upsert_process(repo, ORG, process())
    with pytest.raises(InvalidInput) as excinfo:
        upsert_product(repo, ORG, {"id": "prod_1", "name": "n" * (MAX_NAME_LENGTH + 1), "finalProcessId": "proc_1",
                                   "dependencies": []})
    assert fields_of(excinfo) == ["product.name"]
    assert repo.documents.ids(ORG, STATIONS) == [] and repo.documents.ids(ORG, PRODUCTS) == []


def test_a_value_repeated_by_reference_is_refused_before_any_other_check(repo):
    """A variable used 5,000 times in the query text arrives as 5,000 references to one value: 5,000 steps naming
    one 10,000-character text would be stored as 50 MB, from a request of 40 KB."""
    text = {"text": "t" * 10_000}
    steps = [{"id": f"step_{i}", "instructionText": text} for i in range(5_000)]
    excinfo = refused(repo, process(steps=steps))
    assert fields_of(excinfo) == ["process"]
    assert f"holds more than {MAX_INPUT_SIZE:,} characters" in excinfo.value.errors[0][1]


def test_an_input_of_more_objects_than_one_answer_can_read_back_is_refused(repo):
    """Each object reads back as a few hundred characters; past MAX_INPUT_OBJECTS a process could not be read whole."""
    actions = [{"id": f"act_{i}"} for i in range(MAX_INPUT_OBJECTS - 2)]
    upsert_process(repo, ORG, process(steps=[{"id": "step_1", "actions": actions}]))
    excinfo = refused_again(repo, process(steps=[{"id": "step_1", "actions": actions + [{"id": "act_last"}]}]))
    assert fields_of(excinfo) == ["process"]
    assert f"holds more than {MAX_INPUT_OBJECTS:,} objects" in excinfo.value.errors[0][1]


def test_an_input_the_size_of_the_largest_body_is_accepted(repo):
    text = "t" * MAX_TEXT_LENGTH
    steps = [{"id": f"step_{i}", "instructionText": {"text": text}} for i in range(MAX_INPUT_SIZE // (MAX_TEXT_LENGTH + 80))]
    upsert_process(repo, ORG, process(steps=steps))
    assert len(stored(repo)["steps"]) == len(steps)


def test_a_refused_value_is_quoted_in_part_only(repo):
    """An answer quotes at most a few dozen characters of each bad value, never the whole of a huge one."""
    data = process(id="!" * 1_000_000, steps=[{"id": "step_1", "instructionText": {"color": "#" * 10_000}}])
    excinfo = refused(repo, data)
    assert fields_of(excinfo) == ["process.id", "process.steps[0].instructionText.color"]
    assert all(len(message) < 300 for _, message in excinfo.value.errors)
    assert "(999,942 more characters)" in excinfo.value.errors[0][1]


@pytest.mark.parametrize("number", [float("inf"), float("-inf"), float("nan")])
def test_storage_refuses_a_number_json_cannot_hold_instead_of_storing_null(repo, number):
    """The last guard, for any path that skips the domain's checks: nothing is stored, the field is named."""
    body = {"id": "proc_1", "steps": [{"id": "step_1", "actions": [{"id": "act_1", "measurement": {"min": number}}]}]}
    with pytest.raises(UnstorableDocument) as excinfo:
        repo.documents.save(ORG, PROCESSES, "proc_1", body)
    assert "steps[0].actions[0].measurement.min holds a number JSON cannot represent" in excinfo.value.message
    assert repo.documents.ids(ORG, PROCESSES) == []


@pytest.mark.parametrize("number", [float("inf"), float("nan")])
@pytest.mark.parametrize("beside", [
    {"tags": ["a", None]},                            # a null the stored form keeps (in a list)
    {"description": {"text": "returns null"}},        # the word in a text
    {},                                               # nothing else to find
], ids=["null-in-a-list", "word-in-a-text", "alone"])
def test_storage_refuses_a_number_json_cannot_hold_beside_a_null_or_the_word(repo, number, beside):
    """The encoder searches its bytes for `null` before walking the document: a non-finite number is refused whether
    or not the document holds a null or the word elsewhere."""
    body = {"id": "proc_1", "steps": [{"id": "step_1", **beside, "actions": [{"id": "act_1", "measurement": {
        "max": number}}]}]}
    with pytest.raises(UnstorableDocument, match=r"steps\[0\]\.actions\[0\]\.measurement\.max holds a number"):
        repo.documents.save(ORG, PROCESSES, "proc_1", body)
    assert repo.documents.ids(ORG, PROCESSES) == []


def test_a_document_with_a_null_in_a_list_and_the_word_in_a_text_is_stored_as_sent(repo):
    body = {"id": "proc_1", "name": "null", "tags": [None, "null"], "steps": [{"id": "step_1", "n": 1.5}]}
    repo.documents.save(ORG, PROCESSES, "proc_1", body)
    document = repo.documents.get(ORG, PROCESSES, "proc_1")
    assert {key: document[key] for key in body} == body


@pytest.mark.parametrize("value", [
    {"a": None, "b": {"c": None, "d": [None, {"e": None, "f": 1}], "g": []}, "h": "x"},
    {"steps": [{"id": "s", "actions": None, "alerts": [{"severity": None}]}], "image": None},
    {"x": [[None, [None]], {"y": {"z": None}}], "n": 0.5, "t": True, "f": False, "zero": 0},
])
def test_the_checked_input_is_its_stored_form_without_a_second_walk(value):
    """check_values answers the input without its null members at any depth (a list keeps its items), as the
    normalisation does that detects unchanged pushes, from the one walk that checks the values."""
    from service.domain.input_form import normalised

    assert validation.Problems().check_values("process", value) == normalised(value)


def test_explicit_nulls_and_omitted_fields_are_one_push(repo):
    """A push sending null for an optional field, at any depth, is the same push as one leaving it out."""
    first = upsert_process(repo, ORG, process(description=None, steps=[{"id": "step_1", "video": None, "actions": [
        action("act_1", inputParts=None, measurement=None)]}]))
    again = upsert_process(repo, ORG, process(steps=[{"id": "step_1", "actions": [action("act_1")]}]))
    assert first.changed and not again.changed
    assert again.document["revision"] == 1


# ---------------------------------------------------------------- media paths

def upload(repo, org, path):
    store_media(repo, org, path)


def test_media_uploaded_by_the_org_are_accepted(repo):
    upload(repo, ORG, "/api/v1/images/abc-photo.png")
    upload(repo, ORG, "/api/v1/videos/abc-clip.mp4")
    data = process(image={"path": "/api/v1/images/abc-photo.png"}, steps=[
        {"id": "step_1", "primaryImage": {"path": "/api/v1/images/abc-photo.png"},
         "video": {"path": "/api/v1/videos/abc-clip.mp4", "title": "How to"}}])
    document, _, _ = upsert_process(repo, ORG, data)
    assert document["steps"][0]["video"]["path"] == "/api/v1/videos/abc-clip.mp4"
    assert stored(repo) == present(PROCESSES, document) and document["image"]["path"] == "/api/v1/images/abc-photo.png"


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
    document, created, _ = upsert_product(processes, ORG, product([edge("bbb", "aaa", quantity=2), edge("fin", "bbb"),
                                                                edge("fin", "ccc")]))
    assert created
    assert [dependency["quantity"] for dependency in document["dependencies"]] == [2, 1, 1]
    assert processes.documents.get(ORG, PRODUCTS, document["id"]) == document


def test_empty_dependencies_is_a_product_of_the_final_process(processes):
    document, _, _ = upsert_product(processes, ORG, product([]))
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


@pytest.mark.exhaustive  # 1,500 stored processes in one chain
def test_long_chain_is_checked_without_recursion_limits(repo):
    chain = [f"p{i:04d}" for i in range(1500)]
    for identifier in chain:
        repo.documents.save(ORG, PROCESSES, identifier, {"id": identifier})
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
    document, created, _ = upsert_station(repo, ORG, {"id": "st_1", "name": "Bench 1"})
    assert created and document["name"] == "Bench 1"


def test_the_id_pattern_is_written_one_way_in_the_schema_the_messages_and_the_docs():

    from service.interface.ids import ID_PATTERN, ID_RULE

    written = f"^{ID_PATTERN.pattern}$"
    root = REPOSITORY
    for text in (ID_RULE, (root / "schema.graphql").read_text(), (root / "docs" / "api.md").read_text()):
        assert written in text
        assert "^[a-z0-9_]{3,50}$" not in text


def test_a_process_naming_media_is_checked_once_and_its_media_looked_up_again_under_the_lock(repo, monkeypatch):
    """The checks that judge the input alone run once (one walk of its values); under the org's references lock
    (service.domain.processes) only the media are looked up again, since only they can have changed (a
    `wis gc --delete`)."""
    image = "/api/v1/images/0123456789abcdef-housing.png"
    store_media(repo, "default", image)
    walks, media_checks = [], []
    real_walk = validation.Problems.check_values
    monkeypatch.setattr(validation.Problems, "check_values",
                        lambda self, field, value: walks.append(field) or real_walk(self, field, value))
    # getattr and raising=False: the code before had no such function (and failed on the walks).
    real_media_check = getattr(process_rules, "check_media_uploaded", None)
    monkeypatch.setattr(process_rules, "check_media_uploaded",
                        lambda *args: media_checks.append(args[1]) or real_media_check(*args), raising=False)
    upsert_process(repo, "default", process(image={"path": image}))
    assert walks == ["process"] and media_checks == ["default"]
    assert stored(repo)["image"] == {"path": image}
