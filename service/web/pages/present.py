"""How values of a stored object read on a page: numbers, units, limits, styled text, media. Pure functions, used as
the templates' filters (service.web.pages.blueprint registers them); no Flask here."""
import re

from markupsafe import Markup, escape

from service.domain.processes import COLOR_PATTERN
from service.domain.quantities import number, quantity_kind, unit

# A GIF uploaded as a step video (destination stepVideoGif) is shown as an image: <video> does not play GIFs.
ANIMATION_SUFFIX = ".gif"
STYLE_CLASSES = (("bold", "text-bold"), ("italic", "text-italic"), ("underline", "text-underline"))


def when(timestamp):
    """'2024-05-01 12:00 UTC' for a stored timestamp ('2024-05-01T12:00:00.123Z'): minutes are what a reader needs."""
    if isinstance(timestamp, str) and len(timestamp) >= 16 and timestamp[10] == "T":
        return f"{timestamp[:10]} {timestamp[11:16]} UTC"
    return timestamp or ""


def with_unit(value, units):
    """'14 Nm' for 14.0 and 'torque-Nm'; '14' without units."""
    shown = number(value)
    return f"{shown} {unit(units)}" if unit(units) else shown


def limits(measurement):
    """The accepted range of a measurement in words: '18 to 22 Nm', 'at least 0.1 mm', 'at most 70 dB', or ''."""
    low, high, units = measurement.get("min"), measurement.get("max"), measurement.get("units")
    if low is not None and high is not None:
        return f"{number(low)} to {with_unit(high, units)}"
    if low is not None:
        return f"at least {with_unit(low, units)}"
    if high is not None:
        return f"at most {with_unit(high, units)}"
    return ""


def text_classes(styled):
    """The CSS classes of a styled text: its bold, italic and underline flags and its colour."""
    styled = styled or {}
    classes = [name for field, name in STYLE_CLASSES if styled.get(field)]
    if color_class(styled):
        classes.append(color_class(styled))
    return " ".join(classes)


def color_class(styled):
    """'color-1a2b3c' for a text coloured #1A2B3C, else ''; the page's stylesheet of colours defines it."""
    color = (styled or {}).get("color")
    return f"color-{color[1:].lower()}" if isinstance(color, str) and COLOR_PATTERN.fullmatch(color) else ""


def colors_of(process):
    """Every colour the styled texts of a process use, as (class, #rrggbb), sorted: the page defines each once."""
    texts = []
    for step in process.get("steps") or []:
        texts.append(step.get("instructionText"))
        texts += [action.get("description") for action in step.get("actions") or []]
    return sorted({(color_class(text), text["color"].lower()) for text in texts if color_class(text)})


def is_animation(path):
    """True for a GIF shown as a step's video."""
    return isinstance(path, str) and path.lower().endswith(ANIMATION_SUFFIX)


def step_label(step, number_in_order):
    """'Step 3: Mount the housing', or 'Step 3' for a step without a name: its heading and its image's alt text."""
    name = step.get("name")
    return f"Step {number_in_order}: {name}" if name else f"Step {number_in_order}"


def part_label(part):
    """'bolt_m8 (M8x20 bolt)', or the id alone."""
    return f"{part['id']} ({part['description']})" if part.get("description") else part["id"]


def tool_label(tool):
    """'Torque wrench 20 Nm (wrench_20nm)', or the id alone."""
    return f"{tool['name']} ({tool['id']})" if tool.get("name") else tool["id"]


# What the operator sees at the start and the end of a process, by startBehavior and endBehavior.
BEHAVIOURS = {
    "CONFIRM": "the operator confirms the start", "IMMEDIATE": "starts at once",
    "SUMMARY": "shows a summary", "EXIT": "exits", "RESTART": "starts again", "NEXT_PROCESS": "goes on to the next process",
}


def behaviour(value):
    return BEHAVIOURS.get(value, value or "")


def torque_groups(step):
    """[(group number from 1, tool or None, action ids)] of a step's stored torque groups."""
    return [(number, group.get("tool"), group.get("actionIds") or [])
            for number, group in enumerate(step.get("torqueGroups") or [], start=1)]


def torque_group_of(step):
    """{action id: its torque group's number} of a step."""
    return {action_id: number for number, _, action_ids in torque_groups(step) for action_id in action_ids}


# An id as a change's words name it: in backticks (service.web.pages.changes).
_CODE_SPAN = re.compile(r"`([^`]+)`")


def code_spans(line):
    """A change's words as HTML: escaped, with each `id` in backticks shown as code."""
    return Markup(_CODE_SPAN.sub(lambda found: f"<code>{found.group(1)}</code>", str(escape(line))))


def id_breaks(identifier):
    """An id as HTML that a narrow column may wrap after its underscores (`<wbr>`), never inside a word: ids are
    ASCII letters, digits and underscores, so `press_line_4` breaks as `press_` `line_` `4`."""
    return Markup("_<wbr>".join(str(escape(part)) for part in str(identifier).split("_")))


FILTERS = {
    "code_spans": code_spans, "id_breaks": id_breaks,
    "behaviour": behaviour, "torque_groups": torque_groups, "torque_group_of": torque_group_of,
    "number": number, "when": when, "unit": unit, "quantity_kind": quantity_kind, "limits": limits, "text_classes": text_classes,
    "is_animation": is_animation, "part_label": part_label, "tool_label": tool_label,
}
