"""Processes: the checks of CONTRACT.md 3, defaults, derivations, and the create-or-update."""
import math
import re

from service.domain.derivations import quantity_of
from service.interface.kinds import PROCESSES
from service.domain.validation import Problems, quoted
from service.interface import media_path, parse_media_path
from service.storage.contract import NOBODY

DEFAULT_START_BEHAVIOR = "CONFIRM"
DEFAULT_END_BEHAVIOR = "SUMMARY"
DEFAULT_ALERT_SEVERITY = "WARNING"
# <quantity>-<unit>: non-empty on both sides of the first dash, no whitespace anywhere.
UNITS_PATTERN = re.compile(r"[^\s-]+-\S+")
COLOR_PATTERN = re.compile(r"#[0-9A-Fa-f]{6}")


def upsert_process(repo, org, data, *, if_revision=None, dry_run=False, restored=False, by=NOBODY):
    """Check a ProcessInput dict and store it whole, its defaults applied (derived data is derived when read), as a
    change `by` made (an Attribution); return what the store did (service.storage.contract.Saved)."""
    stored = check_process(repo.media.existing, org, data)
    # A process naming media looks them up again under the org's references lock, which `wis gc --delete` takes to
    # delete media: the write sees each media file and commits before gc looks, or it sees one gone and is refused.
    # Only that lookup is repeated: the rest of the checks judge the input alone, which cannot have changed.
    guard = (lambda view: check_media_uploaded(view.existing_media, org, data)) if _media_paths(data) else None
    return repo.documents.save(org, PROCESSES, data["id"], with_defaults(stored), restored=restored,
                               if_revision=if_revision, dry_run=dry_run, guard=guard, by=by)


def check_process(existing_media, org, process):
    """Raise InvalidInput listing every rule the process breaks; `existing_media(org, paths)` answers which of the
    media paths it names the org has uploaded. Return its stored form without defaults (Problems.check_values)."""
    problems = Problems()
    stored = problems.check_values("process", process)
    problems.check_id("process.id", process.get("id"))
    problems.check_name("process.name", process.get("name"))
    minutes = process.get("autoSignoutMinutes")
    if minutes is not None and minutes < 0:
        problems.add("process.autoSignoutMinutes", f"must be 0 or more (leave it unset for no automatic sign-out); got {minutes}")
    _check_media_uploaded(problems, existing_media, org, process)
    step_ids, action_ids, quantities = {}, {}, {}
    for i, step in enumerate(process.get("steps") or []):
        field = f"process.steps[{i}]"
        _check_unique(problems, f"{field}.id", step.get("id"), step_ids, "step")
        _check_styled_text(problems, f"{field}.instructionText", step.get("instructionText"))
        for j, action in enumerate(step.get("actions") or []):
            _check_action(problems, f"{field}.actions[{j}]", action, action_ids, quantities)
    problems.raise_if_any()
    return stored


def check_media_uploaded(existing_media, org, process):
    """Raise InvalidInput naming each media field of the process whose path the org has not uploaded (or that is no
    media path of its kind)."""
    problems = Problems()
    _check_media_uploaded(problems, existing_media, org, process)
    problems.raise_if_any()


def _check_media_uploaded(problems, existing_media, org, process):
    # Every media path named, looked up at once: one query on the shared backend, not one per step.
    paths = _media_paths(process)
    uploaded = existing_media(org, paths) if paths else set()
    for field, media, kind in _media_fields(process):
        _check_media(problems, uploaded, field, media, kind)


def with_defaults(process):
    """A copy of a stored form (Problems.check_values: no null member) with the enum defaults and the default quantity
    applied where unset; it adds no null member either, so it is a stored form too."""
    return {
        **process,
        "startBehavior": process.get("startBehavior") or DEFAULT_START_BEHAVIOR,
        "endBehavior": process.get("endBehavior") or DEFAULT_END_BEHAVIOR,
        **_each(process, "steps", _step_with_defaults),
    }


def _step_with_defaults(step):
    return {
        **step,
        **_each(step, "actions", _action_with_defaults),
        **_each(step, "alerts", lambda alert: {**alert, "severity": alert.get("severity") or DEFAULT_ALERT_SEVERITY}),
    }


def _action_with_defaults(action):
    return {**action, **_each(action, "inputParts", lambda entry: {**entry, "quantity": quantity_of(entry)})}


def _each(parent, field, function):
    """{field: [function(item) for each item]} when the parent has the field (a stored form has no null), else {}."""
    items = parent.get(field)
    return {} if items is None else {field: [function(item) for item in items]}


def _check_unique(problems, field, identifier, seen, what):
    if problems.check_id(field, identifier):
        if identifier in seen:
            problems.add(field, f"duplicate {what} id {identifier!r}: already used by {seen[identifier]}")
        else:
            seen[identifier] = field


def _check_action(problems, field, action, action_ids, quantities):
    """`quantities` sums the quantities of each part id so far, as the bill of materials may."""
    _check_unique(problems, f"{field}.id", action.get("id"), action_ids, "action")
    _check_styled_text(problems, f"{field}.description", action.get("description"))
    for k, entry in enumerate(action.get("inputParts") or []):
        _check_part(problems, f"{field}.inputParts[{k}].part", entry.get("part"))
        quantity = entry.get("quantity")
        # `not > 0` also refuses NaN.
        if quantity is not None and not quantity > 0:
            problems.add(f"{field}.inputParts[{k}].quantity", f"must be greater than 0 (it may be fractional, e.g. 0.5); got {quantity}")
        elif math.isfinite(quantity_of(entry)) and isinstance(entry.get("part"), dict):
            # The bill of materials adds up the quantities of a part id: their sum must be a number JSON can store.
            part_id = entry["part"].get("id")
            total = quantities[part_id] = quantities.get(part_id, 0) + quantity_of(entry)
            if not math.isfinite(total):
                problems.add(f"{field}.inputParts[{k}].quantity", f"the quantities of part {quoted(part_id)} add up to "
                                                                  "more than the largest number stored (about 1.8e308)")
    if action.get("outputPart") is not None:
        _check_part(problems, f"{field}.outputPart", action["outputPart"])
    if action.get("toolUsed") is not None:
        problems.check_id(f"{field}.toolUsed.id", action["toolUsed"].get("id"))
    measurement = action.get("measurement")
    if measurement is not None:
        units, low, high = measurement.get("units"), measurement.get("min"), measurement.get("max")
        if units is not None and not UNITS_PATTERN.fullmatch(units):
            problems.add(f"{field}.measurement.units", f"must have the form <quantity>-<unit> (e.g. torque-Nm), without spaces; got {quoted(units)}")
        if low is not None and high is not None and low > high:
            problems.add(f"{field}.measurement.min", f"must not be greater than max ({high}); got {low}")


def _check_part(problems, field, part):
    if part is None:
        problems.add(field, "is required")
        return
    problems.check_id(f"{field}.id", part.get("id"))
    if part.get("serial") is not None:
        problems.check_id(f"{field}.serial.id", part["serial"].get("id"))


def _check_styled_text(problems, field, styled):
    color = (styled or {}).get("color")
    if color is not None and not COLOR_PATTERN.fullmatch(color):
        problems.add(f"{field}.color", f"must be a hex colour #RRGGBB; got {quoted(color)}")


def _media_paths(process):
    """The well-formed media paths a process input names."""
    return {media.get("path") for _, media, _ in _media_fields(process) if parse_media_path(media.get("path"))}


def _media_fields(process):
    """(field, media input, kind) of each media input of a process that is set: its image, each step's primary image
    and video, in the order of the input."""
    found = [("process.image", process.get("image"), "image")]
    for i, step in enumerate(process.get("steps") or []):
        found += [(f"process.steps[{i}].primaryImage", step.get("primaryImage"), "image"),
                  (f"process.steps[{i}].video", step.get("video"), "video")]
    return [(field, media, kind) for field, media, kind in found if media is not None]


def _check_media(problems, uploaded, field, media, kind):
    """`uploaded` holds the media paths among those of the process that the org has uploaded."""
    field, path = f"{field}.path", media.get("path")
    parsed = parse_media_path(path)
    if parsed is None:
        problems.add(field, f"must be a path returned by the upload interface, like {media_path(kind, '<name>')}; got {quoted(path)}")
    elif parsed[0] != kind:
        problems.add(field, f"must name an uploaded {kind} ({media_path(kind, '<name>')}); {path!r} is a path for {parsed[0]}s")
    elif path not in uploaded:
        problems.add(field, f"no {kind} has been uploaded at {path!r} by your org; upload it first and use the returned path")
