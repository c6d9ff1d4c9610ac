"""How documents are written as JSON, by both backends: compact UTF-8 as orjson writes it, never a number JSON cannot
hold."""
import math
import re

import orjson

from service.errors import UnstorableDocument
from service.interface import MAX_NAME_LENGTH

# How a document written from its input starts: its id, then its name (the first fields of every input type in
# schema.graphql, kept in that order by GraphQL's coercion and by the stores). A name is at most MAX_NAME_LENGTH
# characters of at most 6 bytes each as orjson writes them (a control character is `\u001f`), the id at most 200.
# The pattern is also a PostgreSQL regular expression (the shared backend matches it in the database).
NAME_HEAD_PATTERN = r'^\{"id":"([A-Za-z0-9_-]+)","name":("(?:[^"\\]|\\.)*")'
NAME_HEAD = re.compile(NAME_HEAD_PATTERN.encode())
NAME_HEAD_SIZE = 256 + 6 * MAX_NAME_LENGTH


def encode(document):
    """The document as compact UTF-8 JSON, the form both backends store. orjson would write an infinite or NaN number
    as null, which then reads back as a missing value (a Float! field of a page answering null for the whole page):
    UnstorableDocument instead, naming the field. The domain refuses such numbers at input; this is the last guard,
    for any path that skips its checks."""
    path = _non_finite(document.items())
    if path is not None:
        field = "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in reversed(path)).lstrip(".")
        raise UnstorableDocument(f"internal error: {field} holds a number JSON cannot represent; nothing was stored")
    return orjson.dumps(document)


def _non_finite(items):
    """The keys leading to the first infinite or NaN float among (key, value) pairs, innermost first; None if none."""
    for key, value in items:
        kind = value.__class__
        if kind is str:
            continue
        if kind is dict:
            found = _non_finite(value.items())
        elif kind is list:
            found = _non_finite(enumerate(value))
        elif kind is float and not math.isfinite(value):
            found = []
        else:
            continue
        if found is not None:
            found.append(key)
            return found
    return None


def name_in_head(identifier, head):
    """The name of the document with this id from the first NAME_HEAD_SIZE bytes of its encoded form, or None when
    they do not start with its id and whole name (a document of an earlier version, whose fields are in another order:
    the caller reads it whole). A search by name then reads a bounded prefix of each document, whatever its size."""
    match = NAME_HEAD.match(head)
    return None if match is None else name_of_match(identifier, match[1].decode(), match[2])


def name_of_match(identifier, matched_id, matched_name):
    """The name that NAME_HEAD_PATTERN matched (a JSON string) when it matched the document's own id, else None."""
    return orjson.loads(matched_name) if matched_id == identifier else None
