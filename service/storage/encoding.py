"""How documents are written as JSON, by both backends: compact UTF-8 as orjson writes it, never a number JSON cannot
hold."""
import math

import orjson

from service.errors import UnstorableDocument


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
