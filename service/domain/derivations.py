"""Automatic derivations of SPEC.md 4.2 with the exact semantics of CONTRACT.md 4.

Pure functions of a process dict shaped like ProcessInput. Process order: steps in list order,
actions in list order, within an action its inputParts in list order, then its outputPart.
"""
import re

from service.interface.ids import ID_PATTERN

TORQUE_KEYWORDS = ("tighten", "screw", "wrench", "torque")
TORQUE_PATTERN = re.compile("|".join(TORQUE_KEYWORDS))
STANDARD = "STANDARD"
SCAN = "SCAN"
DEFAULT_QUANTITY = 1
SCAN_PREFIX = "scan_"
MAX_ID_LENGTH = 50


def quantity_of(entry):
    """The quantity of an input-part entry, 1 when unset."""
    quantity = entry.get("quantity")
    return DEFAULT_QUANTITY if quantity is None else quantity


def actions_in_order(process):
    """Every action of the process in process order."""
    for step in process.get("steps") or []:
        yield from step.get("actions") or []


def parts_of(action):
    """The parts an action names, in process order: its input parts, then its output part."""
    for entry in action.get("inputParts") or []:
        yield entry["part"]
    if action.get("outputPart") is not None:
        yield action["outputPart"]


def is_torque_action(action):
    """True when the description text or the tool's id, name or description mentions a torque keyword."""
    tool = action.get("toolUsed") or {}
    texts = ((action.get("description") or {}).get("text"), tool.get("id"), tool.get("name"), tool.get("description"))
    # One search over the lower-cased texts; no keyword holds a newline, so none matches across two texts.
    return TORQUE_PATTERN.search("\n".join(text for text in texts if text).lower()) is not None


def torque_groups(actions):
    """Derived actions flagged `torque`, grouped by tool id in order of first appearance (tool-less: `tool: None`)."""
    groups = {}
    for action in actions:
        if not action.get("torque"):
            continue
        tool = action.get("toolUsed")
        group = groups.setdefault(tool["id"] if tool else None, {"tool": tool, "actionIds": []})
        group["actionIds"].append(action["id"])
    return list(groups.values())


def serialized_parts(process):
    """{part id: the first occurrence of that part carrying a serial}, for every serialized part id."""
    found = {}
    for action in actions_in_order(process):
        for part in parts_of(action):
            if part.get("serial") is not None and part["id"] not in found:
                found[part["id"]] = part
    return found


class ScanActionIds:
    """Names scan actions: `scan_<part id>` cut to 50 characters, else the first free of `_2`, `_3`... (the stem
    shortened only as far as each suffix needs), never one of `taken`, to which every name given is added.

    The names are those of trying n = 1, 2, 3... in turn, but found in time linear in the parts and the taken ids:
    the candidates with a d-digit suffix are `scan_<the first 44 - d characters of the part id>_<k>`, shared by
    every part id with those first characters (a "family"). Each family remembers the first k not yet known to be
    taken; `taken` only grows, so a search resumes there, and each taken id is passed over once in all (it belongs
    to one family at most: its digits after the last `_`).
    """

    def __init__(self, taken):
        self.taken = taken
        self._next_number = {}  # (stem, digits) -> the first k of that family not known to be taken

    def assign(self, part_id):
        """The scan action id of `part_id`, now taken."""
        found = self._first_free(part_id)
        self.taken.add(found)
        return found

    def _first_free(self, part_id):
        candidate = SCAN_PREFIX + part_id[:MAX_ID_LENGTH - len(SCAN_PREFIX)]
        if candidate not in self.taken and ID_PATTERN.fullmatch(candidate):
            return candidate
        digits = 1
        while True:  # ends: a family of d digits holds 9 * 10**(d - 1) names, more than there are taken ids
            # The suffix `_<k>` takes 1 + digits characters, which come off the stem.
            stem = SCAN_PREFIX + part_id[:MAX_ID_LENGTH - len(SCAN_PREFIX) - 1 - digits]
            lowest, highest = (2 if digits == 1 else 10 ** (digits - 1)), 10 ** digits - 1
            if ID_PATTERN.fullmatch(stem + "_" + str(lowest)):  # the suffix is valid, so this is the stem's verdict
                family = (stem, digits)
                number = self._next_number.get(family, lowest)
                while number <= highest and f"{stem}_{number}" in self.taken:
                    number += 1
                self._next_number[family] = number
                if number <= highest:
                    return f"{stem}_{number}"
            digits += 1


def scan_action(action_id, part):
    """The derived action asking the operator to scan the serial number of `part`."""
    serial = part["serial"]
    what = serial.get("name") or f"the serial number ({serial.get('id')})"
    label = part["id"] + (f" ({part['description']})" if part.get("description") else "")
    return {"id": action_id, "kind": SCAN, "description": {"text": f"Scan {what} of part {label}"},
            "scanPart": part, "torque": False}


def bill_of_materials(process):
    """Input parts not produced by an earlier action and not on a confirmed-and-measured action, summed by part id."""
    earlier_outputs, lines = set(), {}
    for action in actions_in_order(process):
        checked = action.get("confirmation") is not None and action.get("measurement") is not None
        for entry in action.get("inputParts") or []:
            part = entry["part"]
            if checked or part["id"] in earlier_outputs:
                continue
            if part["id"] in lines:
                lines[part["id"]]["quantity"] += quantity_of(entry)
            else:
                lines[part["id"]] = {"part": part, "quantity": quantity_of(entry)}
        if action.get("outputPart") is not None:
            earlier_outputs.add(action["outputPart"]["id"])
    return list(lines.values())


def derive(process):
    """A copy of the process with scan actions, `kind`/`torque` on actions, step torque groups and the BOM."""
    serialized = serialized_parts(process)
    scan_ids = ScanActionIds({action["id"] for action in actions_in_order(process)})
    scanned = set()
    steps = None
    if process.get("steps") is not None:
        steps = []
        for step in process["steps"]:
            actions = None
            if step.get("actions") is not None:
                actions = []
                for action in step["actions"]:
                    for part in parts_of(action):
                        if part["id"] in serialized and part["id"] not in scanned:
                            scanned.add(part["id"])
                            actions.append(scan_action(scan_ids.assign(part["id"]), serialized[part["id"]]))
                    actions.append({**action, "kind": STANDARD, "torque": is_torque_action(action)})
            steps.append({**step, "actions": actions, "torqueGroups": torque_groups(actions or [])})
    return {**process, "steps": steps, "billOfMaterials": bill_of_materials(process)}
