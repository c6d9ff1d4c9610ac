"""An object's history folder on the file backend, `<data>/orgs/<org>/<kind>/.history/<id>/`: one entry a revision,
`<revision>.json`, written by service.storage.files.documents. An entry is `{"change":..,"savedAt":..,"author":..,
"comment":..,"document":..}` (author and comment only when known: CONTRACT 16), what a listing shows first, so a
listing reads the first HEAD_SIZE bytes of each entry only.
"""
import os
import re

import orjson

from service.storage.contract import DELETED, NOBODY, Revision
from service.storage.common.disk import numbered_files

# The suffix of a document's file and of a history entry's.
SUFFIX = ".json"
# A JSON string as orjson writes it: no raw quote, backslash or line break inside.
JSON_STRING = rb'"(?:[^"\\]|\\.)*"'
ENTRY_HEAD = re.compile(rb'\{"change":"([A-Z]+)","savedAt":"([0-9T:.Z-]+)"(?:,"author":(%s))?(?:,"comment":(%s))?,'
                        rb'"document":' % (JSON_STRING, JSON_STRING))
# The longest head: a change and a time, an author (a token's name: 64 characters) and a comment of 500 characters
# of at most 6 bytes each as orjson writes them (a control character is `\u001f`).
HEAD_SIZE = 4096


def history_entry(change, saved_at, encoded_document, by=NOBODY):
    """A history entry, its change, time, author and comment first (ENTRY_HEAD)."""
    head = b'{"change":"%s","savedAt":"%s"' % (change.encode(), saved_at.encode())
    for field, value in zip((b"author", b"comment"), by):
        if value is not None:
            head += b',"%s":%s' % (field, orjson.dumps(value))
    return head + b',"document":%s}' % encoded_document


def entry_numbers(history):
    """The revision numbers of the entries in a history folder, ascending."""
    return numbered_files(history, SUFFIX)


def entry_head(path):
    """The Revision a history entry records (its number 0: the caller knows it), from its first bytes; None when it is
    gone."""
    try:
        with open(path, "rb") as handle:
            match = ENTRY_HEAD.match(handle.read(HEAD_SIZE))
    except FileNotFoundError:
        return None
    author, comment = (None if text is None else orjson.loads(text) for text in match.group(3, 4))
    return Revision(0, match[2].decode(), match[1].decode(), author, comment)


def last_committed(history):
    """The newest committed revision of an object without a current document: its last DELETED entry (entries after
    it are leftovers of a killed writer), 0 when none."""
    for number in reversed(entry_numbers(history)):
        head = entry_head(history / f"{number}{SUFFIX}")
        if head is not None and head.change == DELETED:
            return number
    return 0


def prune(history, oldest):
    """Remove the entries older than `oldest`, the oldest revision kept now that a write committed the newest. Each
    write removes the one entry that left the kept revisions then, so the folder is listed only when the entry before
    that one is there too (the setting was lowered, or a process ended between a commit and its prune), and a write's
    cost does not grow with the revisions kept."""
    if oldest <= 1:
        return
    _remove_entry(history, oldest - 1)
    if oldest == 2 or not _remove_entry(history, oldest - 2):
        return
    for number in entry_numbers(history):
        if number >= oldest:
            break
        _remove_entry(history, number)


def _remove_entry(history, number):
    """Remove a history entry; whether it was there."""
    try:
        os.unlink(history / f"{number}{SUFFIX}")
    except FileNotFoundError:
        return False
    return True
