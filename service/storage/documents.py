"""JSON documents, one file per object: `<data>/orgs/<org>/<kind>/<id>.json`.

Every write is an atomic replace under a per-document lock, so concurrent upserts of one id from
several gunicorn workers serialize, and each acknowledged write bumps `revision` exactly once.
"""
import bisect
import json
import os
from datetime import datetime, timezone

from service.storage.files import atomic_write_bytes, lock
from service.storage.names import id_to_name, name_to_id

SUFFIX = ".json"
META_FIELDS = ("createdAt", "updatedAt", "revision")


def utc_now():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class DocumentStore:
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
                return json.load(handle)
        except FileNotFoundError:
            return None

    def exists(self, org, kind, identifier):
        return self._path(org, kind, identifier).is_file()

    def upsert(self, org, kind, identifier, body):
        """Store `body` as the whole object; return (document, created)."""
        path = self._path(org, kind, identifier)
        with lock(path):
            previous = self.get(org, kind, identifier)
            now = utc_now()
            document = dict(body)
            document["createdAt"] = previous["createdAt"] if previous else now
            document["updatedAt"] = now
            document["revision"] = previous["revision"] + 1 if previous else 1
            atomic_write_bytes(path, json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode())
        return document, previous is None

    def ids(self, org, kind):
        """All stored ids of a kind, sorted; reads directory entries only, no document."""
        try:
            entries = os.scandir(self._directory(org, kind))
        except FileNotFoundError:
            return []
        with entries:
            names = [e.name[: -len(SUFFIX)] for e in entries if e.name.endswith(SUFFIX) and not e.name.startswith(".")]
        return sorted(name_to_id(name) for name in names)

    def page(self, org, kind, first, after=None):
        """Up to `first` documents with ids after `after`, in id order; opens only those documents."""
        ids = self.ids(org, kind)
        start = bisect.bisect_right(ids, after) if after is not None else 0
        documents = []
        for identifier in ids[start : start + first]:
            document = self.get(org, kind, identifier)
            if document is not None:
                documents.append(document)
        return documents
