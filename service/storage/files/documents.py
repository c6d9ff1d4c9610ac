"""JSON documents, one file per object: `<data>/orgs/<org>/<kind>/<id>.json`.

Every write is an atomic replace under a per-document lock, so concurrent upserts of one id from
several gunicorn workers serialize, and each acknowledged write bumps `revision` exactly once.
Documents are compact UTF-8 JSON with the metadata written last, so an update learns `createdAt` and
`revision` of the version it replaces from the file's last bytes instead of parsing the whole of it.
"""
import bisect
import os
import re

import orjson

from service.storage.contract import DOCUMENT_META_FIELDS, utc_timestamp
from service.storage.disk import atomic_write_bytes, lock, remove_stale_temporaries
from service.storage.encoding import encode
from service.storage.files.names import SAFE_NAME, id_to_name, name_to_id

SUFFIX = ".json"
# The end of every stored document. Inside JSON strings `"` is escaped, and the timestamps hold no `}`,
# so a match can only be the top-level members written last by `upsert`.
META_TAIL = re.compile(rb',"createdAt":"([0-9T:.Z-]+)","updatedAt":"[0-9T:.Z-]+","revision":(\d+)\}\Z')
TAIL_SIZE = 128

# Folders of an org that the other stores own.
NOT_DOCUMENTS = {"media", "streams"}


class FileDocumentStore:
    """Every org's documents as files (service.storage.contract.DocumentStore)."""

    def __init__(self, orgs_root):
        self.orgs_root = orgs_root

    def _directory(self, org, kind):
        return self.orgs_root / id_to_name(org) / kind

    def _path(self, org, kind, identifier):
        return self._directory(org, kind) / (id_to_name(identifier) + SUFFIX)

    def get(self, org, kind, identifier):
        """Return the stored document, or None."""
        try:
            with open(self._path(org, kind, identifier), "rb") as handle:
                return orjson.loads(handle.read())
        except FileNotFoundError:
            return None

    @staticmethod
    def _stored_meta(path):
        """(createdAt, revision) of the document stored at `path`, or None when there is none."""
        try:
            with open(path, "rb") as handle:
                handle.seek(max(0, handle.seek(0, os.SEEK_END) - TAIL_SIZE))
                match = META_TAIL.search(handle.read())
                if match is not None:
                    return match[1].decode(), int(match[2])
                # Not written by `upsert` (edited by hand, say): parse it whole.
                handle.seek(0)
                document = orjson.loads(handle.read())
                return document["createdAt"], document["revision"]
        except FileNotFoundError:
            return None

    def existing(self, org, kind, identifiers):
        """The ids among `identifiers` that the org has stored of `kind`."""
        return {identifier for identifier in identifiers if self._path(org, kind, identifier).is_file()}

    def upsert(self, org, kind, identifier, body):
        """Store `body` as the whole object; return (document, created)."""
        path = self._path(org, kind, identifier)
        with lock(path):
            previous = self._stored_meta(path)
            now = utc_timestamp()
            # Metadata last, in this order: META_TAIL finds it there on the next update.
            document = {key: value for key, value in body.items() if key not in DOCUMENT_META_FIELDS}
            document["createdAt"] = previous[0] if previous else now
            document["updatedAt"] = now
            document["revision"] = previous[1] + 1 if previous else 1
            atomic_write_bytes(path, encode(document))
        return document, previous is None

    def kinds(self, org):
        """The kinds of document an org has stored (processes, products, stations), sorted."""
        try:
            with os.scandir(self.orgs_root / id_to_name(org)) as entries:
                return sorted(entry.name for entry in entries
                              if entry.is_dir() and not entry.name.startswith(".") and entry.name not in NOT_DOCUMENTS)
        except FileNotFoundError:
            return []

    def ids(self, org, kind):
        """All stored ids of a kind, sorted; reads directory entries only, no document."""
        try:
            entries = os.scandir(self._directory(org, kind))
        except FileNotFoundError:
            return []
        with entries:
            names = [e.name[: -len(SUFFIX)] for e in entries if e.name.endswith(SUFFIX) and not e.name.startswith(".")]
        # Most names are their ids; name_to_id (a substitution per name) only for the rest, or to refuse a stray file.
        return sorted(name if "^" not in name and SAFE_NAME.fullmatch(name) else name_to_id(name) for name in names)

    def page(self, org, kind, first, after=None):
        """Up to `first` documents with ids after `after`, in id order, each opened when the caller gets to it: a page
        of large documents is never held whole (the answer's budget may stop the caller half way)."""
        ids = self.ids(org, kind)
        start = bisect.bisect_right(ids, after) if after is not None else 0
        return self._each_stored(org, kind, ids[start : start + first])

    def _each_stored(self, org, kind, identifiers):
        for identifier in identifiers:
            document = self.get(org, kind, identifier)
            if document is not None:  # removed since the listing
                yield document

    def sweep_temporaries(self, cutoff):
        """Remove temporaries of document writes last touched before `cutoff` (their writer was killed)."""
        return sum(remove_stale_temporaries(directory, cutoff)
                   for directory in self.orgs_root.glob("*/*") if directory.is_dir())
