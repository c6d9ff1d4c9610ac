"""What changed between two revisions of an object, in the words of a process engineer: "step 3 `s_fasten`: action
`a_tighten`: measurement max 12 -> 14 Nm", "step `s_new` added", "action `a_old` removed". The history page, the
`processChanges` query (and its product and station twins) and `wis diff` all say it with these lines.

A diff of its own over the input form (what the create mutation takes), keyed by what the engineer knows things by:
steps and actions by id (an action is matched across steps, so a move is a move, not a removal and an addition),
input parts by part id, dependencies by their two processes, alerts and notes by position. A generic structural diff
(deepdiff) would report list positions (`root['steps'][2]['actions'][0]['measurement']['max']`) that still had to be
turned into these words, and would see every step after an inserted one as changed. A changed text longer than a line
shows the words that changed, with a few words around them (service.domain.text_changes).

Cost: linear in the size of the two inputs, plus n log n for the order of n steps or actions (the longest increasing
subsequence finds the ones that kept their order; the others moved).
"""
import bisect

from service.domain.input_form import input_of
from service.interface.ids import is_valid_id
from service.domain.quantities import number, unit
from service.domain.text_changes import matching_budget, quoted, text_change
from service.errors import RevisionNotFound

STYLE_FIELDS = (("bold", "bold"), ("italic", "italic"), ("underline", "underline"), ("color", "colour"))


def changes(kind, old, new):
    """The changes from `old` to `new` (the input forms of two revisions of one object of `kind`), in order."""
    with matching_budget():
        return {"processes": process_changes, "products": product_changes, "stations": station_changes}[kind](old, new)


def revision_input(repo, org, kind, identifier, revision):
    """The input form of revision `revision` of the object, or None when its history holds no content for it (never
    made, pruned, or a deletion)."""
    if not is_valid_id(identifier) or revision < 1:
        return None
    document = repo.documents.revision(org, kind, identifier, revision)
    return None if document is None else input_of(kind, document)


def changes_between(repo, org, kind, identifier, from_revision, to_revision):
    """The changes from revision `from_revision` to `to_revision` of the object; RevisionNotFound naming the first of
    the two its history holds no content for."""
    inputs = {}
    for revision in dict.fromkeys((from_revision, to_revision)):
        inputs[revision] = revision_input(repo, org, kind, identifier, revision)
        if inputs[revision] is None:
            raise RevisionNotFound(kind, identifier, revision, "to compare")
    return changes(kind, inputs[from_revision], inputs[to_revision])


def _shown(value):
    """A value as a change names it: text in quotes (cut when long), numbers as engineers write them."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float)):
        return number(value)
    return quoted(str(value))


def _code(identifier):
    return f"`{identifier}`"


def _value_change(label, old, new, suffix=""):
    """'label 12 -> 14 Nm', 'label set to …', 'label removed (was …)', or None when equal."""
    if old == new:
        return None
    if old is None:
        return f"{label} set to {_shown(new)}{suffix}"
    if new is None:
        return f"{label} removed (was {_shown(old)}{suffix})"
    if isinstance(old, str) and isinstance(new, str):
        return f"{label} {text_change(old, new)}"
    return f"{label} {_shown(old)} -> {_shown(new)}{suffix}"


def _fields(pairs, old, new):
    """The changes of the plain fields `pairs` [(key, label)] between two dicts (either may be None)."""
    old, new = old or {}, new or {}
    found = (_value_change(label, old.get(key), new.get(key)) for key, label in pairs)
    return [change for change in found if change]


def _styled_text(label, old, new):
    """Changes of a styled text: its text, then each style flag and its colour."""
    if old == new:
        return []
    found = []
    text = _value_change(label, (old or {}).get("text"), (new or {}).get("text"))
    if text:
        found.append(text)
    found += [f"{label} {change}" for change in _fields(STYLE_FIELDS, old, new)]
    return found


def _within(prefix, found):
    return [f"{prefix}: {change}" for change in found]


def _kept_in_order(old_positions):
    """Indexes (into `old_positions`, the old positions of common items in their new order) of a longest increasing
    subsequence: the items that kept their relative order. O(n log n)."""
    tails, tail_index, previous = [], [], [None] * len(old_positions)
    for i, position in enumerate(old_positions):
        k = bisect.bisect_left(tails, position)
        if k == len(tails):
            tails.append(position)
            tail_index.append(i)
        else:
            tails[k] = position
            tail_index[k] = i
        previous[i] = tail_index[k - 1] if k else None
    kept, i = set(), tail_index[-1] if tail_index else None
    while i is not None:
        kept.add(i)
        i = previous[i]
    return kept


def _moved(old_ids, new_ids):
    """The ids in both lists whose place among the others changed."""
    position = {identifier: i for i, identifier in enumerate(old_ids)}
    common = [identifier for identifier in new_ids if identifier in position]
    kept = _kept_in_order([position[identifier] for identifier in common])
    return {identifier for i, identifier in enumerate(common) if i not in kept}


# -- processes ---------------------------------------------------------------------------------------------------------

PROCESS_FIELDS = (("name", "name"), ("description", "description"), ("partNumber", "part number"),
                  ("startBehavior", "start"), ("endBehavior", "end"), ("autoSignoutMinutes", "automatic sign-out minutes"))
VIDEO_FIELDS = (("path", "video"), ("title", "video title"), ("autoplay", "video autoplay"), ("loop", "video loop"))
PART_FIELDS = (("description", "description"),)
SERIAL_FIELDS = (("id", "serial"), ("name", "serial name"), ("pattern", "serial pattern"))
TOOL_FIELDS = (("name", "name"), ("description", "description"))
ALERT_FIELDS = (("severity", "severity"), ("title", "title"), ("text", "text"))
NOTE_FIELDS = (("title", "title"), ("text", "text"))


def process_changes(old, new):
    """Changes of a process: its own fields, then step by step in the new order, then the steps removed."""
    found = _fields(PROCESS_FIELDS, old, new)
    found += _media("image", old.get("image"), new.get("image"))
    old_steps, new_steps = old.get("steps") or [], new.get("steps") or []
    old_by_id = {step["id"]: (i, step) for i, step in enumerate(old_steps)}
    # Actions are matched across the whole process (their ids are unique in it): in which step each was, and is.
    old_actions = {action["id"]: (step["id"], action) for step in old_steps for action in step.get("actions") or []}
    new_places = {action["id"]: step["id"] for step in new_steps for action in step.get("actions") or []}
    moved = _moved([step["id"] for step in old_steps], [step["id"] for step in new_steps])
    for i, step in enumerate(new_steps, start=1):
        if step["id"] not in old_by_id:
            found.append(f"step {_code(step['id'])} added as step {i}")
            continue
        prefix = f"step {i} {_code(step['id'])}"
        old_index, old_step = old_by_id[step["id"]]
        if step["id"] in moved:
            found.append(f"{prefix}: moved from step {old_index + 1}")
        found += _within(prefix, _step_changes(old_step, step, old_actions, new_places))
    new_step_ids = {step["id"] for step in new_steps}
    for step in old_steps:
        if step["id"] not in new_step_ids:
            found.append(f"step {_code(step['id'])} removed")
            found += _within(f"step {_code(step['id'])}", _removed_actions(step, new_places))
    return found


def _media(label, old, new):
    change = _value_change(label, (old or {}).get("path"), (new or {}).get("path"))
    return [change] if change else []


def _removed_actions(old_step, new_places):
    """'action `x` removed' for each action of an old step that is in no step now (one that went to another step is
    reported there)."""
    return [f"action {_code(action['id'])} removed" for action in old_step.get("actions") or []
            if action["id"] not in new_places]


def _step_changes(old, new, old_actions, new_places):
    found = _fields((("name", "name"),), old, new)
    found += _styled_text("instruction text", old.get("instructionText"), new.get("instructionText"))
    found += _media("image", old.get("primaryImage"), new.get("primaryImage"))
    found += _fields(VIDEO_FIELDS, old.get("video"), new.get("video"))
    old_list, new_list = old.get("actions") or [], new.get("actions") or []
    moved = _moved([action["id"] for action in old_list], [action["id"] for action in new_list])
    for action in new_list:
        prefix = f"action {_code(action['id'])}"
        if action["id"] not in old_actions:
            found.append(f"{prefix} added")
            continue
        old_step, old_action = old_actions[action["id"]]
        if old_step != new["id"]:
            found.append(f"{prefix} moved here from step {_code(old_step)}")
        elif action["id"] in moved:
            found.append(f"{prefix} moved within the step")
        found += _within(prefix, _action_changes(old_action, action))
    found += _removed_actions(old, new_places)
    found += _boxes("alert", ALERT_FIELDS, old.get("alerts"), new.get("alerts"))
    found += _boxes("note", NOTE_FIELDS, old.get("notes"), new.get("notes"))
    return found


def _boxes(what, pairs, old, new):
    """Alerts or notes, matched by position: 'alert 2: text … -> …', 'alert 3 added: …', 'alert 3 removed'."""
    old, new = old or [], new or []
    found = []
    for i in range(max(len(old), len(new))):
        if i >= len(old):
            found.append(f"{what} {i + 1} added: {_shown(new[i].get('text'))}")
        elif i >= len(new):
            found.append(f"{what} {i + 1} removed (was {_shown(old[i].get('text'))})")
        else:
            found += _within(f"{what} {i + 1}", _fields(pairs, old[i], new[i]))
    return found


def _action_changes(old, new):
    found = _styled_text("description", old.get("description"), new.get("description"))
    found += _input_parts(old.get("inputParts"), new.get("inputParts"))
    found += _identified("output part", old.get("outputPart"), new.get("outputPart"), _part_fields)
    found += _identified("tool", old.get("toolUsed"), new.get("toolUsed"), _tool_fields)
    found += _measurement(old.get("measurement"), new.get("measurement"))
    found += _fields((("confirmed", "confirmation"),), old.get("confirmation"), new.get("confirmation"))
    return found


def _input_parts(old, new):
    """Input parts by part id: 'input part `bolt`: quantity 4 -> 6', '… added (2)', '… removed'."""
    old_by_key, new_by_key = _by_part(old), _by_part(new)
    found = []
    for key, entry in new_by_key.items():
        label = _part_entry_label(key)
        if key not in old_by_key:
            found.append(f"{label} added ({number(entry.get('quantity', 1))})")
            continue
        before = old_by_key[key]
        quantity = _value_change("quantity", before.get("quantity", 1), entry.get("quantity", 1))
        found += _within(label, ([quantity] if quantity else []) + _part_fields(before["part"], entry["part"]))
    found += [f"{_part_entry_label(key)} removed" for key in old_by_key if key not in new_by_key]
    return found


def _by_part(entries):
    """{(part id, which occurrence of it in the action): entry}: an action may list one part twice."""
    keyed, seen = {}, {}
    for entry in entries or []:
        part_id = entry["part"]["id"]
        seen[part_id] = seen.get(part_id, 0) + 1
        keyed[part_id, seen[part_id]] = entry
    return keyed


def _part_entry_label(key):
    part_id, occurrence = key
    return f"input part {_code(part_id)}" + (f" #{occurrence}" if occurrence > 1 else "")


def _part_fields(old, new):
    return _fields(PART_FIELDS, old, new) + _fields(SERIAL_FIELDS, old.get("serial"), new.get("serial"))


def _identified(label, old, new, field_changes):
    """A part or a tool: set, removed, another one (another id), or the same one with `field_changes(old, new)`."""
    if old == new:
        return []
    if old is None:
        return [f"{label} {_code(new['id'])} added"]
    if new is None:
        return [f"{label} {_code(old['id'])} removed"]
    if old["id"] != new["id"]:
        return [f"{label} {_code(old['id'])} -> {_code(new['id'])}"]
    return _within(f"{label} {_code(new['id'])}", field_changes(old, new))


def _tool_fields(old, new):
    return _fields(TOOL_FIELDS, old, new)


def _measurement(old, new):
    """'measurement max 12 -> 14 Nm': limits carry the unit of the new revision's units."""
    if old == new:
        return []
    if old is None:
        return ["measurement added"]
    if new is None:
        return ["measurement removed"]
    found = _fields((("measured", "measured"), ("units", "units")), old, new)
    shown_unit = unit(new.get("units") or old.get("units"))
    suffix = f" {shown_unit}" if shown_unit else ""
    for key in ("min", "max"):
        change = _value_change(key, old.get(key), new.get(key), suffix)
        if change:
            found.append(change)
    return [f"measurement {change}" for change in found]


# -- products and stations ---------------------------------------------------------------------------------------------

def product_changes(old, new):
    """Changes of a product: name, final process, dependencies by their two processes."""
    found = _fields((("name", "name"),), old, new)
    if old.get("finalProcessId") != new.get("finalProcessId"):
        found.append(f"final process {_code(old.get('finalProcessId'))} -> {_code(new.get('finalProcessId'))}")
    old_edges = {_edge_key(edge): edge for edge in old.get("dependencies") or []}
    new_edges = {_edge_key(edge): edge for edge in new.get("dependencies") or []}
    for (down, up), edge in new_edges.items():
        label = f"dependency {_code(down)} needs {_code(up)}"
        if (down, up) not in old_edges:
            quantity = edge.get("quantity", 1)
            found.append(f"{label} added ({quantity} time{'' if quantity == 1 else 's'})")
        else:
            change = _value_change("quantity", old_edges[down, up].get("quantity", 1), edge.get("quantity", 1))
            if change:
                found.append(f"{label}: {change}")
    found += [f"dependency {_code(down)} needs {_code(up)} removed" for down, up in old_edges
              if (down, up) not in new_edges]
    return found


def _edge_key(edge):
    return edge["processId"], edge["upstreamProcessId"]


def station_changes(old, new):
    return _fields((("name", "name"),), old, new)
