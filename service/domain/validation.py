"""Collecting every input problem of a request before refusing it as a whole."""
import math

from service.interface.ids import ID_RULE, is_valid_id
from service.errors import ServiceError
from service.interface import (
    LONE_SURROGATE, MAX_INPUT_OBJECTS, MAX_INPUT_SIZE, MAX_NAME_LENGTH, MAX_TEXT_LENGTH, is_unicode)

# Input fields holding a display name; every other string is a text (ids have a rule of their own).
NAME_FIELDS = frozenset({"name", "title", "partNumber", "measured", "units"})
ID_FIELDS = frozenset({"id", "finalProcessId", "processId", "upstreamProcessId"})
# How much of a refused value a message quotes: enough to recognise it, never the whole of a huge one.
QUOTED_LENGTH = 60


def text_limit(key):
    """(the most characters a string under the input field `key` may hold, what the field is called in a refusal), or
    None for an id field (an id has a pattern of its own, 50 characters at most). A list's strings are under its key."""
    if key in ID_FIELDS:
        return None
    return (MAX_NAME_LENGTH, "a name or title") if key in NAME_FIELDS else (MAX_TEXT_LENGTH, "a text")


class CheckedInput(dict):
    """An input object whose every member the caller has already held to check_values' rules, with its null members
    dropped at every depth: its stored form, which check_values then answers without walking it again.

    Only the GraphQL layer's coercion makes these (service.web.graphql.coercion): it checks each value as it coerces
    it, and marks an object only when nothing in it breaks a rule; one it cannot vouch for is checked here whole."""


class InvalidInput(ServiceError):
    """The input breaks one or more rules; `errors` is a list of (field_path, message) pairs."""
    code = "invalid_input"

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__("; ".join(f"{field}: {message}" for field, message in self.errors))


class Problems:
    """An error collector: add (field_path, message) pairs, then `raise_if_any()`."""

    def __init__(self):
        self.errors = []

    def add(self, field, message):
        self.errors.append((field, message))

    def check_id(self, field, value):
        """Record a problem unless `value` is a valid id; return whether it is valid."""
        if is_valid_id(value):
            return True
        self.add(field, f"{ID_RULE}; got {quoted(value)}")
        return False

    def check_name(self, field, value):
        """Record a problem when a required display name is missing or blank."""
        if not isinstance(value, str) or not value.strip():
            self.add(field, "is required and must not be blank")

    def check_values(self, field, value):
        """Record each string longer than its field allows or holding half of a UTF-16 surrogate pair (JSON's
        "\\ud800" alone is no character: no file or database could store it), and each number that is not finite
        (1e400 in the query text is infinite, and JSON would store it as null). Raise at once when the input holds more than
        MAX_INPUT_SIZE or MAX_INPUT_OBJECTS, so that no check walks a variable repeated thousands of times.

        Return the input's stored form, made in the same walk: a copy without the members whose value is null, at any
        depth (an omitted optional field and an explicit null are one input, and the stored input sent back is the
        same push: service.domain.input_form.normalised). A CheckedInput is that form already: a plain copy of its top.
        """
        if value.__class__ is CheckedInput:
            return dict(value)
        walk = _Walk(self)
        try:
            return walk.visit(value.items(), (field,), None)
        except _TooLarge:
            if walk.objects > MAX_INPUT_OBJECTS:
                message = (f"holds more than {MAX_INPUT_OBJECTS:,} objects (steps, actions, parts, texts: each {{...}}); "
                           "split it into several")
            else:
                message = (f"holds more than {MAX_INPUT_SIZE:,} characters of values once each variable is expanded "
                           "where it is used; send each value once (a variable used in many places would be stored as "
                           "many times)")
            raise InvalidInput([(field, message)]) from None

    def raise_if_any(self):
        if self.errors:
            raise InvalidInput(self.errors)


def quoted(value):
    """repr(value), cut to QUOTED_LENGTH characters with the length of the rest said."""
    text = repr(value)
    if len(text) <= QUOTED_LENGTH:
        return text
    return f"{text[:QUOTED_LENGTH]}... ({len(text) - QUOTED_LENGTH:,} more characters)"


class _TooLarge(Exception):
    pass


class _Walk:
    """One pass over an input: its size (a character per value plus those of its strings), its objects, and its
    leaves' checks; it copies the input as it goes, without its null members (the stored form).

    Paths are kept as nested tuples (parent path, key) and spelled out only for a problem: most inputs have none.
    """

    def __init__(self, problems):
        self.problems, self.size, self.objects = problems, 0, 1

    def visit(self, items, path, list_key):
        """Check the (key or index, value) pairs of a dict (`list_key` None) or a list (`list_key` names the field
        holding it); return the dict, or the list, that they make without their null members (a list keeps its
        items, null or not)."""
        in_dict = list_key is None
        copy = {} if in_dict else []
        for key, value in items:
            self.size += 1
            kind = value.__class__
            if kind is str:
                self.size += len(value)
                if len(value) > MAX_NAME_LENGTH:
                    self._check_length((path, key), key if list_key is None else list_key, value)
                if not is_unicode(value):
                    self.problems.add(_path_text((path, key)), LONE_SURROGATE)
            elif kind is dict or kind is CheckedInput:  # one the coercion checked, here counted where it is used
                self.objects += 1
                value = self.visit(value.items(), (path, key), None)
            elif kind is list:
                value = self.visit(enumerate(value), (path, key), key)
            elif value is None:
                if in_dict:
                    continue
            elif kind is float and not math.isfinite(value):
                self.problems.add(_path_text((path, key)), f"must be a finite number; got {value}")
            if in_dict:
                copy[key] = value
            else:
                copy.append(value)
        if self.size > MAX_INPUT_SIZE or self.objects > MAX_INPUT_OBJECTS:
            raise _TooLarge
        return copy

    def _check_length(self, path, key, value):
        rule = text_limit(key)
        if rule is None:
            return
        limit, what = rule
        if len(value) > limit:
            self.problems.add(_path_text(path), f"is {len(value):,} characters long; at most {limit:,} are accepted "
                                                f"for {what}")


def _path_text(path):
    """(((('process',), 'steps'), 2), 'id') -> 'process.steps[2].id', as fields are named in errors."""
    parts = []
    while len(path) == 2:
        path, part = path
        parts.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    return path[0] + "".join(reversed(parts))

