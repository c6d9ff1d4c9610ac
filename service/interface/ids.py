"""The identifier rule of SPEC.md 2.1 / CONTRACT.md 3."""
import re

# Explicit ASCII classes (not \w, which accepts any Unicode letter) and fullmatch (not `$`, which
# would accept a trailing newline).
ID_PATTERN = re.compile(r"[A-Za-z0-9_]{3,50}")
ID_RULE = "must be 3 to 50 characters, each an ASCII letter, digit or underscore (^[A-Za-z0-9_]{3,50}$)"


def is_valid_id(value):
    """True when `value` is a string that matches the id pattern as a whole."""
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None
