"""Map ids to file names that stay distinct on case-insensitive filesystems.

Ids and org names match `[A-Za-z0-9_-]`; an upper-case letter is written as `^` plus its lower-case form, so `ABc`
is stored as `^a^bc` and never collides with `abc`. `^` cannot occur in an id, so the mapping is
reversible and sorts in a stable way.
"""
import re

SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")
SAFE_NAME = re.compile(r"(?:\^[a-z]|[a-z0-9_-])+")


def id_to_name(identifier):
    if not SAFE_ID.fullmatch(identifier):
        raise ValueError(f"not a storable id: {identifier!r}")
    return "".join("^" + c.lower() if "A" <= c <= "Z" else c for c in identifier)


def name_to_id(name):
    if not SAFE_NAME.fullmatch(name):
        raise ValueError(f"not a stored id name: {name!r}")
    return re.sub(r"\^([a-z])", lambda m: m.group(1).upper(), name)
