"""The stored form of an object: its input as the create mutation takes it (defaults applied, nulls left out), and the
input of a document stored before inputs were kept (CONTRACT 10)."""
from service.domain.derivations import SCAN
from service.interface.kinds import PROCESSES
from service.storage.contract import without_meta

# Fields that only derivation writes: a stored process holding one was stored by a version that kept derived data.
DERIVED_ACTION_FIELDS = ("kind", "torque", "scanPart")


def normalised(value):
    """`value` with every member whose value is null left out, at any depth: an omitted optional field and an explicit
    null are one input, and the stored input sent back is the same push."""
    if isinstance(value, dict):
        return {key: normalised(member) for key, member in value.items() if member is not None}
    if isinstance(value, list):
        return [normalised(item) for item in value]
    return value


def input_of(kind, document):
    """The input a stored document holds, as its create mutation takes it."""
    body = without_meta(document)
    if kind == PROCESSES and "billOfMaterials" in body:
        return _input_of_derived_process(body)
    return body


def _input_of_derived_process(process):
    """The input of a process stored with its derivations (by versions before inputs were kept): the derived scan
    actions (kind SCAN) and the derived fields dropped. Exact: a derived scan action has kind SCAN, a sent one
    STANDARD."""
    steps = process.get("steps")
    if steps is not None:
        steps = [_input_of_derived_step(step) for step in steps]
    return normalised({**{key: value for key, value in process.items() if key != "billOfMaterials"}, "steps": steps})


def _input_of_derived_step(step):
    actions = step.get("actions")
    if actions is not None:
        actions = [{key: value for key, value in action.items() if key not in DERIVED_ACTION_FIELDS}
                   for action in actions if action.get("kind") != SCAN]
    return {**{key: value for key, value in step.items() if key != "torqueGroups"}, "actions": actions}
