"""The derivations of CONTRACT.md 4: torque flags and groups, scan actions, bill of materials."""
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.domain.derivations import ScanActionIds, bill_of_materials, derive, is_torque_action
from service.interface.ids import ID_PATTERN, is_valid_id


def process(*steps):
    return {"id": "proc_1", "name": "P", "steps": [{"id": f"step_{i}", "actions": list(actions)}
                                                  for i, actions in enumerate(steps)]}


def part(identifier, serial=None, description=None):
    found = {"id": identifier}
    if serial:
        found["serial"] = {"id": serial, "name": f"{serial} name"}
    if description:
        found["description"] = description
    return found


def uses(*parts, quantity=None):
    return [{"part": p} if quantity is None else {"part": p, "quantity": quantity} for p in parts]


def ids(step):
    return [action["id"] for action in step["actions"]]


# ---------------------------------------------------------------- torque

@pytest.mark.parametrize("action", [
    {"id": "act", "description": {"text": "TIGHTEN the bolts"}},
    {"id": "act", "description": {"text": "Unscrew the lid"}},
    {"id": "act", "description": {"text": "apply Torque of 5 Nm"}},
    {"id": "act", "toolUsed": {"id": "wrench_10mm"}},
    {"id": "act", "toolUsed": {"id": "tool_1", "name": "Socket Wrench"}},
    {"id": "act", "toolUsed": {"id": "tool_1", "description": "electric screwdriver"}},
])
def test_torque_keywords_in_description_or_tool(action):
    assert is_torque_action(action)


@pytest.mark.parametrize("action", [
    {"id": "act"},
    {"id": "act", "description": {"text": "Place the cover"}, "toolUsed": {"id": "hammer", "name": "Hammer"}},
    {"id": "act", "description": {"text": None}},
    {"id": "act", "inputParts": [{"part": {"id": "screw_m4", "description": "screw"}}]},
])
def test_actions_without_keywords_are_not_torque(action):
    assert not is_torque_action(action)


def test_torque_groups_by_tool_in_order_of_first_appearance_per_step():
    wrench, driver = {"id": "wrench_1", "name": "Wrench"}, {"id": "driver_1", "name": "Driver"}
    derived = derive(process(
        [{"id": "act_1", "description": {"text": "tighten"}},
         {"id": "act_2", "toolUsed": wrench},
         {"id": "act_3", "description": {"text": "wipe"}},
         {"id": "act_4", "description": {"text": "tighten"}, "toolUsed": driver},
         {"id": "act_5", "description": {"text": "screw"}},
         {"id": "act_6", "toolUsed": wrench}],
        [{"id": "act_7", "toolUsed": driver, "description": {"text": "torque"}}]))
    first, second = derived["steps"]
    assert [action["torque"] for action in first["actions"]] == [True, True, False, True, True, True]
    assert first["torqueGroups"] == [
        {"tool": None, "actionIds": ["act_1", "act_5"]},
        {"tool": wrench, "actionIds": ["act_2", "act_6"]},
        {"tool": driver, "actionIds": ["act_4"]}]
    assert second["torqueGroups"] == [{"tool": driver, "actionIds": ["act_7"]}]


def test_scan_actions_are_never_torque_actions():
    derived = derive(process([{"id": "act_1", "inputParts": uses(part("screw_m4", serial="sn_screw", description="Torque screw"))}]))
    scan, standard = derived["steps"][0]["actions"]
    assert (scan["kind"], scan["torque"]) == ("SCAN", False)
    assert (standard["kind"], standard["torque"]) == ("STANDARD", False)
    assert derived["steps"][0]["torqueGroups"] == []


# ---------------------------------------------------------------- scans

def test_scan_is_placed_before_the_first_action_using_the_serialized_part():
    derived = derive(process(
        [{"id": "act_1", "inputParts": uses(part("bolt"))}],
        [{"id": "act_2", "inputParts": uses(part("motor", serial="motor_sn"))},
         {"id": "act_3", "inputParts": uses(part("motor", serial="motor_sn"))}]))
    assert ids(derived["steps"][0]) == ["act_1"]
    assert ids(derived["steps"][1]) == ["scan_motor", "act_2", "act_3"]
    scan = derived["steps"][1]["actions"][0]
    assert scan["scanPart"] == part("motor", serial="motor_sn")
    assert scan["description"]["text"] == "Scan motor_sn name of part motor"


def test_serialized_part_first_seen_as_an_output():
    derived = derive(process(
        [{"id": "act_1", "outputPart": part("housing", serial="housing_sn")}],
        [{"id": "act_2", "inputParts": uses(part("housing", serial="housing_sn"))}]))
    assert ids(derived["steps"][0]) == ["scan_housing", "act_1"]
    assert ids(derived["steps"][1]) == ["act_2"]


def test_part_is_serialized_when_any_occurrence_carries_a_serial():
    derived = derive(process(
        [{"id": "act_1", "inputParts": uses(part("pcb"))}],
        [{"id": "act_2", "inputParts": uses(part("pcb", serial="pcb_sn", description="Main board"))}]))
    assert ids(derived["steps"][0]) == ["scan_pcb", "act_1"]
    scan = derived["steps"][0]["actions"][0]
    assert scan["scanPart"]["serial"]["id"] == "pcb_sn"
    assert scan["description"]["text"] == "Scan pcb_sn name of part pcb (Main board)"


def test_several_scans_before_one_action_keep_process_order():
    derived = derive(process([{"id": "act_1", "inputParts": uses(part("bbb", serial="sn_b"), part("aaa", serial="sn_a")),
                               "outputPart": part("ccc", serial="sn_c")}]))
    assert ids(derived["steps"][0]) == ["scan_bbb", "scan_aaa", "scan_ccc", "act_1"]


def test_scan_id_avoids_existing_action_ids():
    derived = derive(process([{"id": "scan_motor"}, {"id": "act_1", "inputParts": uses(part("motor", serial="sn"))}],
                             [{"id": "scan_motor_2"}]))
    assert ids(derived["steps"][0]) == ["scan_motor", "scan_motor_3", "act_1"]


def test_scan_id_of_a_50_character_part_id_is_a_valid_id():
    long_id = "p" * 50
    first, second = ScanActionIds(set()).assign(long_id), ScanActionIds({"scan_" + "p" * 45}).assign(long_id)
    assert (first, second) == ("scan_" + "p" * 45, "scan_" + "p" * 43 + "_2")
    assert is_valid_id(first) and is_valid_id(second)


def named_one_by_one(part_id, taken):
    """The naming rule as first written (and as every stored scan id was named): try n = 1, 2, 3... in turn."""
    candidate, number = "scan_" + part_id[:45], 1
    while candidate in taken or not ID_PATTERN.fullmatch(candidate):
        number += 1
        suffix = f"_{number}"
        candidate = "scan_" + part_id[:45 - len(suffix)] + suffix
    return candidate


class CountingSet(set):
    """A set that counts the membership tests made on it: the work of a search for a free name."""

    lookups = 0

    def __contains__(self, item):
        self.lookups += 1
        return super().__contains__(item)


# Part ids that share long prefixes, so that they share families of candidate names, and taken ids that are those
# candidates: the inputs where a search for a free name has most to pass over.
PREFIX = "p" * 38
tails = st.text("ab_0129", min_size=0, max_size=12)
part_ids = st.builds(lambda tail: (PREFIX + tail)[:50], tails)
taken_ids = st.one_of(
    st.builds(lambda part, number: named_one_by_one(part, set()) if number == 1 else
              "scan_" + part[:45 - len(f"_{number}")] + f"_{number}", part_ids, st.integers(1, 120)),
    st.text(string.ascii_lowercase + "_", min_size=3, max_size=12))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(parts=st.lists(part_ids, max_size=40), taken=st.lists(taken_ids, max_size=200))
def test_scan_ids_are_named_as_trying_each_number_in_turn(parts, taken):
    """Stored processes were named by trying n = 1, 2, 3...: every input keeps the names it had."""
    expected_taken, scan_ids = set(taken), ScanActionIds(set(taken))
    for part_id in parts:
        expected = named_one_by_one(part_id, expected_taken)
        expected_taken.add(expected)
        assert scan_ids.assign(part_id) == expected
    assert scan_ids.taken == expected_taken


def lookups_to_name(parts, taken):
    counting = CountingSet(taken)
    scan_ids = ScanActionIds(counting)
    names = [scan_ids.assign(part_id) for part_id in parts]
    assert len(set(names)) == len(parts) and not set(names) & set(taken)
    return counting.lookups


def test_naming_parts_that_share_their_first_45_characters_is_linear():
    """4,000 part ids equal in their first 45 characters (a 388 KB processCreate) once made 8 million tries."""
    parts = ["q" * 45 + f"{i:05d}" for i in range(4000)]
    assert lookups_to_name(parts, set()) <= 3 * len(parts)


def test_taken_candidates_shared_by_many_parts_are_passed_over_once():
    """Action ids equal to the candidates `scan_<prefix>_2` .. `_999` of a 41-character prefix that 1,000 parts
    share, the parts differing in their 45-character prefixes: each taken id is passed over once, not per part."""
    prefix = "r" * 41
    parts = [prefix + f"{i:04d}" + "x" * 5 for i in range(1000)]
    taken = {"scan_" + part[:45] for part in parts}
    for number in range(2, 1000):
        suffix = f"_{number}"
        taken |= {"scan_" + part[:45 - len(suffix)] + suffix for part in parts[:1]}
    assert lookups_to_name(parts, taken) <= 3 * (len(parts) + len(taken))


def test_no_steps_and_no_actions_stay_unset():
    assert derive({"id": "proc_1", "name": "P"})["steps"] is None
    derived = derive({"id": "proc_1", "name": "P", "steps": [{"id": "step_1"}]})
    assert derived["steps"][0]["actions"] is None
    assert derived["steps"][0]["torqueGroups"] == []
    assert derived["billOfMaterials"] == []


# ---------------------------------------------------------------- bill of materials

def bom(*steps):
    return [(line["part"]["id"], line["quantity"]) for line in bill_of_materials(process(*steps))]


def test_bom_sums_quantities_in_order_of_first_addition_with_default_1():
    assert bom([{"id": "act_1", "inputParts": uses(part("screw"), quantity=4) + uses(part("cable"), quantity=0.5)},
                {"id": "act_2", "inputParts": uses(part("washer"))},
                {"id": "act_3", "inputParts": uses(part("screw"), quantity=2)}]) == [("screw", 6), ("cable", 0.5), ("washer", 1)]


def test_part_produced_earlier_is_not_in_the_bom():
    assert bom([{"id": "act_1", "inputParts": uses(part("plate")), "outputPart": part("subassembly")}],
               [{"id": "act_2", "inputParts": uses(part("subassembly"), part("cover"))}]) == [("plate", 1), ("cover", 1)]


def test_output_of_the_same_action_does_not_exclude_its_input():
    assert bom([{"id": "act_1", "inputParts": uses(part("frame")), "outputPart": part("frame")}],
               [{"id": "act_2", "inputParts": uses(part("frame"))}]) == [("frame", 1)]


def test_part_used_before_it_is_produced_counts_only_before():
    assert bom([{"id": "act_1", "inputParts": uses(part("gear"))},
                {"id": "act_2", "outputPart": part("gear")},
                {"id": "act_3", "inputParts": uses(part("gear"))}]) == [("gear", 1)]


@pytest.mark.parametrize("checks, listed", [
    ({"confirmation": {"confirmed": "ok"}}, True),
    ({"measurement": {"measured": "gap"}}, True),
    ({"confirmation": {"confirmed": "ok"}, "measurement": {"measured": "gap"}}, False),
    ({"confirmation": {}, "measurement": {}}, False),
])
def test_confirmation_and_measurement_together_exclude_the_inputs(checks, listed):
    assert bom([{"id": "act_1", "inputParts": uses(part("shim")), **checks}]) == ([("shim", 1)] if listed else [])


def test_derived_process_carries_the_bom():
    derived = derive(process([{"id": "act_1", "inputParts": uses(part("motor", serial="sn"), quantity=2)}]))
    assert derived["billOfMaterials"] == [{"part": part("motor", serial="sn"), "quantity": 2}]
