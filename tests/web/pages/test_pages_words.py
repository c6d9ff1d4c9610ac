"""What the pages compute before rendering, tested directly: how values read (service.web.pages.present) and what changed
between two revisions, in words (service.domain.changes). The drawing of a product: test_pages_graph.py."""
import copy

import pytest

from service.domain.changes import changes, process_changes, product_changes, station_changes
from service.domain.quantities import number
from service.web.pages.present import code_spans, colors_of, limits, when

# -- present ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, shown", [(10.0, "10"), (0.5, "0.5"), (4, "4"), (0.1, "0.1"), (1e-07, "1e-07"),
                                          (1e20, "1e+20"), (-2.0, "-2")])
def test_numbers_read_as_engineers_write_them(value, shown):
    assert number(value) == shown


@pytest.mark.parametrize("measurement, shown", [
    ({"min": 18, "max": 22, "units": "torque-Nm"}, "18 to 22 Nm"),
    ({"min": 0.1, "units": "length-mm"}, "at least 0.1 mm"),
    ({"max": 70.0, "units": "level-dB"}, "at most 70 dB"),
    ({"max": 3}, "at most 3"),
    ({"units": "torque-Nm"}, ""),
])
def test_measurement_limits_read_with_their_unit(measurement, shown):
    assert limits(measurement) == shown


def test_timestamps_read_to_the_minute():
    assert when("2024-05-01T12:34:56.789Z") == "2024-05-01 12:34 UTC"


def test_the_ids_a_change_names_are_shown_as_code_and_everything_else_escaped():
    assert code_spans("step 1 `s_<b>`: text \u201c<i>\u201d added") == (
        "step 1 <code>s_&lt;b&gt;</code>: text \u201c&lt;i&gt;\u201d added")


def test_each_colour_of_a_process_is_defined_once_and_only_well_formed_ones():
    process = {"steps": [{"instructionText": {"text": "a", "color": "#AABBCC"}},
                         {"instructionText": {"text": "b", "color": "#aabbcc"},
                          "actions": [{"id": "x", "description": {"text": "c", "color": "red; } body { x: y"}}]}]}
    assert colors_of(process) == [("color-aabbcc", "#aabbcc")]


# -- what changed between revisions ----------------------------------------------------------------------------------------

BASE = {
    "id": "p_1", "name": "Fasten", "startBehavior": "CONFIRM", "endBehavior": "SUMMARY",
    "steps": [
        {"id": "s_prep", "name": "Prepare", "actions": [{"id": "a_pick", "inputParts": [
            {"part": {"id": "bolt"}, "quantity": 4}]}]},
        {"id": "s_check", "name": "Check"},
        {"id": "s_fasten", "name": "Fasten", "instructionText": {"text": "Tighten all"}, "actions": [
            {"id": "a_tighten", "description": {"text": "Tighten"}, "toolUsed": {"id": "wrench", "name": "Wrench"},
             "measurement": {"measured": "Torque", "units": "torque-Nm", "min": 10, "max": 12}},
            {"id": "a_old", "confirmation": {"confirmed": "Done"}}],
         "alerts": [{"severity": "WARNING", "text": "Hot"}]},
    ],
}


def changed(edit):
    new = copy.deepcopy(BASE)
    edit(new)
    return process_changes(BASE, new)


def test_the_words_of_the_brief():
    def edit(process):
        fasten = process["steps"][2]
        fasten["actions"][0]["measurement"]["max"] = 14
        del fasten["actions"][1]
        process["steps"].append({"id": "s_new", "name": "New"})

    assert changed(edit) == [
        "step 3 `s_fasten`: action `a_tighten`: measurement max 12 -> 14 Nm",
        "step 3 `s_fasten`: action `a_old` removed",
        "step `s_new` added as step 4",
    ]


def test_an_unchanged_revision_has_no_changes():
    assert process_changes(BASE, copy.deepcopy(BASE)) == []


def test_fields_of_the_process_and_its_steps():
    def edit(process):
        process["name"] = "Fasten the cover"
        process["autoSignoutMinutes"] = 30
        process["endBehavior"] = "RESTART"
        process["steps"][0]["name"] = "Get ready"
        process["steps"][2]["instructionText"] = {"text": "Tighten all bolts", "bold": True}
        process["steps"][2]["video"] = {"path": "/api/v1/videos/x-a.mp4", "title": "How"}
        process["steps"][2]["alerts"][0]["severity"] = "DANGER"
        process["steps"][2]["alerts"].append({"severity": "INFO", "text": "Gloves"})

    assert changed(edit) == [
        "name \u201cFasten\u201d -> \u201cFasten the cover\u201d",
        "end \u201cSUMMARY\u201d -> \u201cRESTART\u201d",
        "automatic sign-out minutes set to 30",
        "step 1 `s_prep`: name \u201cPrepare\u201d -> \u201cGet ready\u201d",
        "step 3 `s_fasten`: instruction text \u201cTighten all\u201d -> \u201cTighten all bolts\u201d",
        "step 3 `s_fasten`: instruction text bold set to on",
        "step 3 `s_fasten`: video set to \u201c/api/v1/videos/x-a.mp4\u201d",
        "step 3 `s_fasten`: video title set to \u201cHow\u201d",
        "step 3 `s_fasten`: alert 1: severity \u201cWARNING\u201d -> \u201cDANGER\u201d",
        "step 3 `s_fasten`: alert 2 added: \u201cGloves\u201d",
    ]


def test_fields_of_actions_parts_tools_and_measurements():
    def edit(process):
        pick = process["steps"][0]["actions"][0]
        pick["inputParts"][0]["quantity"] = 6
        pick["inputParts"].append({"part": {"id": "washer", "description": "Washer"}, "quantity": 0.5})
        pick["outputPart"] = {"id": "kit"}
        tighten = process["steps"][2]["actions"][0]
        tighten["toolUsed"] = {"id": "wrench", "name": "Torque wrench"}
        tighten["measurement"].update(units="torque-lbft", min=None)
        process["steps"][2]["actions"][1]["confirmation"]["confirmed"] = "Done and checked"

    assert changed(edit) == [
        "step 1 `s_prep`: action `a_pick`: input part `bolt`: quantity 4 -> 6",
        "step 1 `s_prep`: action `a_pick`: input part `washer` added (0.5)",
        "step 1 `s_prep`: action `a_pick`: output part `kit` added",
        "step 3 `s_fasten`: action `a_tighten`: tool `wrench`: name \u201cWrench\u201d -> \u201cTorque wrench\u201d",
        "step 3 `s_fasten`: action `a_tighten`: measurement units \u201ctorque-Nm\u201d -> \u201ctorque-lbft\u201d",
        "step 3 `s_fasten`: action `a_tighten`: measurement min removed (was 10 lbft)",
        "step 3 `s_fasten`: action `a_old`: confirmation \u201cDone\u201d -> \u201cDone and checked\u201d",
    ]


def test_moves_are_moves_not_removals_and_additions():
    def edit(process):
        steps = process["steps"]
        steps[0], steps[1] = steps[1], steps[0]  # s_check now comes first
        pick = steps[1]["actions"].pop()
        steps[2]["actions"].insert(0, pick)  # a_pick goes to s_fasten

    assert changed(edit) == [
        "step 1 `s_check`: moved from step 2",
        "step 3 `s_fasten`: action `a_pick` moved here from step `s_prep`",
    ]


def test_an_inserted_step_moves_nothing():
    def edit(process):
        process["steps"].insert(0, {"id": "s_first"})

    assert changed(edit) == ["step `s_first` added as step 1"]


def test_a_removed_step_names_its_actions_that_went_and_those_that_stayed_elsewhere():
    def edit(process):
        fasten = process["steps"].pop(2)
        process["steps"][1]["actions"] = [fasten["actions"][0]]

    assert changed(edit) == [
        "step 2 `s_check`: action `a_tighten` moved here from step `s_fasten`",
        "step `s_fasten` removed",
        "step `s_fasten`: action `a_old` removed",
    ]


def test_a_long_changed_text_is_shown_by_its_beginning_and_end():
    def edit(process):
        process["steps"][1]["name"] = "b" + "x" * 500 + "e"

    [change] = changed(edit)
    assert len(change) < 220
    assert change.startswith("step 2 `s_check`: name \u201cCheck\u201d -> \u201cbxxx")
    assert change.endswith("x\u2026" + "x" * 52 + "e\u201d")


def edge(down, up, quantity=1):
    return {"processId": down, "upstreamProcessId": up, "quantity": quantity}


def test_products_and_stations():
    old = {"id": "p", "name": "Gearbox", "finalProcessId": "test", "dependencies": [
        edge("test", "assembly", 1), edge("assembly", "frame")]}
    new = {"id": "p", "name": "Gearbox", "finalProcessId": "test", "dependencies": [
        edge("test", "assembly", 2), edge("test", "paint")]}
    assert product_changes(old, new) == [
        "dependency `test` needs `assembly`: quantity 1 -> 2",
        "dependency `test` needs `paint` added (1 time)",
        "dependency `assembly` needs `frame` removed",
    ]
    assert changes("stations", {"id": "s", "name": "A"}, {"id": "s", "name": "B"}) == [
        "name \u201cA\u201d -> \u201cB\u201d"]
    assert station_changes({"id": "s", "name": "A"}, {"id": "s", "name": "A"}) == []


def test_a_large_process_is_compared_in_one_pass():
    steps = [{"id": f"s_{i}", "actions": [{"id": f"a_{i}", "description": {"text": f"do {i}"}}]} for i in range(5000)]
    old = {"id": "big", "name": "Big", "steps": steps}
    new = copy.deepcopy(old)
    new["steps"].reverse()
    found = process_changes(old, new)
    # Reversed: one step keeps its place among the others, every other step moved.
    assert len(found) == 4999 and all(": moved from step" in change for change in found)
