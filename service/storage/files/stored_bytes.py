"""What a stored document's bytes tell without parsing them: its metadata, and whether its body is the body a write
brings. A write of a large object compares its new body with the stored one (an unchanged push stores nothing:
CONTRACT 10); parsing the stored document for that cost as much as a third of the write's own work, so the encoded
bodies are compared instead, and the stored document is parsed only when its bytes cannot tell.

Documents are encoded as service.storage.common.encoding.encode writes them: the body's fields, then createdAt,
updatedAt and revision. orjson's encoding is a function of the value and its key order, so equal bytes are an equal
body. Different bytes are a different body when they differ within one string (two strings of different text are
different values: a key, and the key set differs; or a value) or within one token of the same length (a number, true
or false: a number equal to one of another type, 1 and 1.0, or 1 and true, is spelled with another length). Anything
else (keys in another order, a document of an earlier version) is left to the parse. The stores make a body's key
order from the schema's field order, so the parse is rare.
"""
import re
from typing import NamedTuple

import orjson

from service.storage.contract import without_meta

# A document's end: its metadata, as the stores write it last.
META_AT_END = re.compile(rb'[{,]"createdAt":"([0-9T:.Z-]+)","updatedAt":"([0-9T:.Z-]+)","revision":(\d+)\}\s*$')
META_TAIL = 120
# The bytes that start, end or separate JSON tokens outside strings.
_STRUCTURE = re.compile(rb'["{}\[\]:,]')


class StoredMeta(NamedTuple):
    """The metadata read from a stored document's end, and its body's bytes (encoded as a body alone; None when the
    metadata came from a parse)."""
    created_at: str
    updated_at: str
    revision: int
    body: bytes


class StoredDocument:
    """A stored document's bytes, parsed only when they cannot tell what a write asks: its metadata (`created_at`,
    `updated_at`, `revision`) read from its end, or from its parse when its end is not as written now."""

    def __init__(self, encoded):
        self._encoded, self._parsed = encoded, None
        meta = split_meta(encoded)
        if meta is None:
            document = self.document()
            meta = StoredMeta(document["createdAt"], document["updatedAt"], document["revision"], None)
        self.created_at, self.updated_at, self.revision, self._body = meta

    def document(self):
        """The stored document, parsed (once)."""
        if self._parsed is None:
            self._parsed = orjson.loads(self._encoded)
        return self._parsed

    def meta(self):
        return {"createdAt": self.created_at, "updatedAt": self.updated_at, "revision": self.revision}

    def same_body(self, encoded_body, body):
        """Whether the stored body is `body` (encoded as `encoded_body`): from the bytes when they tell, else parsed."""
        same = None if self._body is None else same_body(self._body, encoded_body)
        return without_meta(self.document()) == body if same is None else same


def split_meta(stored):
    """The StoredMeta of a stored document's bytes, or None when its end is not the metadata as written now."""
    start = max(0, len(stored) - META_TAIL)
    found = META_AT_END.search(stored, start)
    if found is None:
        return None
    body = b"{}" if stored[found.start()] == ord("{") else stored[:found.start()] + b"}"
    return StoredMeta(found[1].decode(), found[2].decode(), int(found[3]), body)


def revision_at_end(tail):
    """The revision in a stored document's last META_TAIL bytes (or the whole of a shorter one), or None when its end
    is not the metadata as written now."""
    found = META_AT_END.search(tail)
    return None if found is None else int(found[3])


def with_meta(encoded_body, created_at, updated_at, revision):
    """The document `encode({**body, "createdAt": .., "updatedAt": .., "revision": ..})` writes, from the body's
    encoding (the timestamps are utc_timestamp's: nothing to escape)."""
    meta = b'"createdAt":"%s","updatedAt":"%s","revision":%d}' % (created_at.encode(), updated_at.encode(), revision)
    return b"{" + meta if encoded_body == b"{}" else encoded_body[:-1] + b"," + meta


def same_body(stored_body, encoded_body):
    """True when the two encoded bodies are the same body, False when they are different ones, None when their bytes
    cannot tell (the caller parses)."""
    if stored_body == encoded_body:
        return True
    prefix = _common_prefix(stored_body, encoded_body)
    suffix = _common_suffix(stored_body, encoded_body, prefix)
    stored_part = stored_body[prefix:len(stored_body) - suffix]
    new_part = encoded_body[prefix:len(encoded_body) - suffix]
    if any(byte in part for part in (stored_part, new_part) for byte in (b'"', b"\\")):
        return None  # a string ends or an escape starts within the difference
    inside = _inside_string(stored_body, prefix)
    if inside:
        return False  # one string, another text (up to the same closing quote)
    if inside is None or _STRUCTURE.search(stored_part) or _STRUCTURE.search(new_part):
        return None  # the difference spans tokens
    # One number, true or false in both: values of the same type, another text; an equal one of another type would
    # be spelled with another length.
    return False if len(stored_part) == len(new_part) else None


def _inside_string(encoded, position):
    """Whether `position` of a JSON text lies inside a string (an odd number of unescaped quotes before it); None when
    that cannot be counted quickly (an escaped backslash before it: its quote may close a string)."""
    if encoded.find(b"\\\\", 0, position) != -1:
        return None
    return (encoded.count(b'"', 0, position) - encoded.count(b'\\"', 0, position)) % 2 == 1


def _common_prefix(one, other):
    """The length of the longest common start of two byte strings (halving: each step compares a new segment)."""
    low, high = 0, min(len(one), len(other))
    while low < high:
        middle = (low + high + 1) // 2
        if one[low:middle] == other[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(one, other, prefix):
    """The length of the longest common end of two byte strings that does not overlap their common start."""
    low, high = 0, min(len(one), len(other)) - prefix
    one_end, other_end = len(one), len(other)
    while low < high:
        middle = (low + high + 1) // 2
        if one[one_end - middle:one_end - low] == other[other_end - middle:other_end - low]:
            low = middle
        else:
            high = middle - 1
    return low
