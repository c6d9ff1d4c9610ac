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
NAME_HEAD = re.compile(rb'\{"id":"([A-Za-z0-9_-]+)","name":("(?:[^"\\]|\\.)*")')
NAME_HEAD_SIZE = 256 + 6 * MAX_NAME_LENGTH
# Enough for the id and the name of nearly every document: a store that pays for each byte it reads of a document
# (PostgreSQL decompresses the start of a body) reads this much first, and NAME_HEAD_SIZE only when it is not enough.
SHORT_NAME_HEAD_SIZE = 512


def encode(document):
    """The document as compact UTF-8 JSON, the form both backends store. orjson would write an infinite or NaN number
    as null, which then reads back as a missing value (a Float! field of a page answering null for the whole page):
    UnstorableDocument instead, naming the field. The domain refuses such numbers at input; this is the last guard,
    for any path that skips its checks.

    The guard costs a search of the encoded bytes, not a walk of the document: a non-finite number can only have
    become `null`, and a stored form holds no null member (Problems.check_values), so bytes without `null` anywhere,
    which is nearly every document, hold none. The document is walked only when they have one (a null in a list, or
    a text holding the word)."""
    encoded = orjson.dumps(document)
    if b"null" not in encoded:
        return encoded
    path = _non_finite(document.items())
    if path is not None:
        field = "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in reversed(path)).lstrip(".")
        raise UnstorableDocument(f"internal error: {field} holds a number JSON cannot represent; nothing was stored")
    return encoded


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
    """The name of the document with this id from the start of its encoded form, or None when `head` does not start
    with its id and whole name (a longer name than `head` holds, or a document of an earlier version, whose fields are
    in another order: the caller reads more). A search by name then reads a bounded start of each document, whatever
    its size."""
    match = NAME_HEAD.match(head)
    return orjson.loads(match[2]) if match and match[1] == identifier.encode() else None
