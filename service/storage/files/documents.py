"""JSON documents, one file per object: `<data>/orgs/<org>/<kind>/<id>.json`, and the history of each object, one
file per revision: `<data>/orgs/<org>/<kind>/.history/<id>/<revision>.json` (listings skip the dot folder).

A write runs under the document's lock: it writes the new revision's history entry, then commits the change with its
event (service.storage.files.events: the write-ahead log's record of the change synced, the commit point, then the
document replaced atomically), then prunes the oldest entries. A delete writes its DELETED entry, then commits the
document's unlink the same way. A writer killed at any instant leaves at most one entry past the committed state, which
readers ignore and the next write overwrites: an entry newer than the current document's revision or, when there is no
current document, newer than the last DELETED entry. So each acknowledged change adds exactly 1 to `revision`.

Documents are compact UTF-8 JSON with the metadata written last; the history entries' format and folder are
service.storage.files.history_entries'.
"""
import bisect
import contextlib
import os

import orjson

from service.errors import ObjectNotFound, disk_errors
from service.storage.contract import (
    CREATED, DEFAULT_HISTORY_REVISIONS, DELETED, NOBODY, RESTORED, UPDATED, Revision, Saved,
    check_revision, oldest_kept, utc_timestamp, without_meta)
from service.storage.contract.events import NewEvent
from service.storage.contract.read_budget import spend
from service.storage.common.disk import (
    PendingReplace, lock, remove_stale_temporaries, write_unsynced)
from service.storage.common.encoding import NAME_HEAD_SIZE, encode, name_in_head
from service.storage.files.stored_bytes import META_TAIL, StoredDocument, revision_at_end, with_meta
from service.storage.files.history_entries import (
    ENTRY_HEAD, SUFFIX, entry_head, entry_numbers, history_entry, last_committed, prune)
from service.storage.files.names import SAFE_NAME, id_to_name, name_to_id

HISTORY = ".history"
# Taken by a guarded write (service.storage.contract.Guard), one per org, before the document's own lock.
REFERENCES_LOCK = ".references"

# Folders of an org that the other stores own.
NOT_DOCUMENTS = {"media", "streams", "events", "wal"}


class FileDocumentStore:
    """Every org's documents as files (service.storage.contract.DocumentStore)."""

    def __init__(self, orgs_root, history_revisions=DEFAULT_HISTORY_REVISIONS, media=None, events=None):
        self.orgs_root = orgs_root
        self.history_revisions = history_revisions
        # The media store (service.storage.files.media.FileMediaStore) a guard asks which media exist.
        self.media = media
        # The event log (service.storage.files.events.FileEventLog) each change commits with; None: no events (a
        # state being built for test mode's restore, whose log starts empty).
        self.events = events

    def _directory(self, org, kind):
        return self.orgs_root / id_to_name(org) / kind

    def _path(self, org, kind, identifier):
        return self._directory(org, kind) / (id_to_name(identifier) + SUFFIX)

    def _history(self, org, kind, identifier):
        return self._directory(org, kind) / HISTORY / id_to_name(identifier)

    def get(self, org, kind, identifier):
        self._ready(org)
        return _read_json(self._path(org, kind, identifier))  # the stored document, or None

    def existing(self, org, kind, identifiers):
        """The ids among `identifiers` that the org has stored of `kind`."""
        self._ready(org)
        return {identifier for identifier in identifiers if self._path(org, kind, identifier).is_file()}

    def each(self, org, kind):
        """Every stored document of a kind, in id order."""
        return self._each_stored(org, kind, self.ids(org, kind))

    def existing_media(self, org, paths):
        """The media paths among `paths` that the org has published."""
        return self.media.existing(org, paths)

    def _references_lock(self, org):
        return lock(self.orgs_root / id_to_name(org) / REFERENCES_LOCK)

    @contextlib.contextmanager
    def _locked(self, org, kind, identifier, guard):
        """The document's lock, after the org's references lock when the write is guarded (always in this order); an
        ExitStack, for what must be released before the locks."""
        with contextlib.ExitStack() as held:
            if guard is not None:
                held.enter_context(self._references_lock(org))
            held.enter_context(lock(self._path(org, kind, identifier)))
            yield held

    def with_references_locked(self, org, action):
        """Run `action(self)` under the org's references lock; answer what it answers."""
        with self._references_lock(org):
            return action(self)

    def save(self, org, kind, identifier, body, *, restored=False, if_revision=None, dry_run=False, guard=None,
             by=NOBODY):
        """Store `body` as a new revision unless it equals the stored body (service.storage.contract.DocumentStore)."""
        path, history = self._path(org, kind, identifier), self._history(org, kind, identifier)
        body = without_meta(body)
        self._ready(org)
        with self._locked(org, kind, identifier, guard) as held:
            stored = _read_held(path, held)
            if guard is not None:
                guard(self)
            check_revision(kind, identifier, if_revision, stored.revision if stored else 0)
            encoded_body = encode(body)
            if stored is not None and stored.same_body(encoded_body, body):
                return Saved({**body, **stored.meta()}, False, False)
            newest = stored.revision if stored else last_committed(history)
            now = utc_timestamp()
            created_at = stored.created_at if stored else now
            document = {**body, "createdAt": created_at, "updatedAt": now, "revision": newest + 1}  # as with_meta
            if not dry_run:
                encoded = with_meta(encoded_body, created_at, now, newest + 1)
                change = RESTORED if restored else UPDATED if stored else CREATED
                self._keep_earlier_version(history, stored)
                entry = history_entry(change, now, encoded, by)
                written = PendingReplace(history / f"{newest + 1}{SUFFIX}", entry)
                replacement = PendingReplace(path, encoded)
                try:
                    # Neither synced: the write-ahead log's record of the change carries both through a power cut.
                    written.put_in_place()
                    self._commit(org, NewEvent(now, kind, identifier, newest + 1, change, body.get("name"), *by),
                                 entry, path, replacement)
                finally:
                    written.discard()
                    replacement.discard()
                self._prune(history, newest + 1)
        return Saved(document, stored is None, True)

    def delete(self, org, kind, identifier, *, if_revision=None, dry_run=False, guard=None, by=NOBODY):
        """Remove the current document after writing its DELETED entry; return that entry's revision."""
        path, history = self._path(org, kind, identifier), self._history(org, kind, identifier)
        self._ready(org)
        with self._locked(org, kind, identifier, guard) as held:
            stored = _read_held(path, held)
            if stored is None:
                raise ObjectNotFound(kind, identifier)
            check_revision(kind, identifier, if_revision, stored.revision)
            if guard is not None:
                guard(self)
            deleted = stored.revision + 1
            if not dry_run:
                now = utc_timestamp()
                self._keep_earlier_version(history, stored)
                entry = history_entry(DELETED, now, b"null", by)
                PendingReplace(history / f"{deleted}{SUFFIX}", entry).put_in_place()  # (not synced, as in save)
                self._commit(org, NewEvent(now, kind, identifier, deleted, DELETED, None, *by), entry, path)
                self._prune(history, deleted)
        return deleted

    def _ready(self, org):
        """Before a read, and before a write reads what it changes: the org's changes a power cut lost put in place
        (service.storage.files.reboot_check), lest a reader see a document the power cut left behind, or a write take
        a lost change's revision for its own. (One lookup once this process found the org checked.)"""
        if self.events is not None:
            self.events.ready(org)

    def put_forward(self, org, kind, identifier, revision, entry=None):
        """Put in place the object's change of `revision` from its history entry: `entry` (a write-ahead log's record,
        replayed after a power cut: the entry is written again too), or the entry stored (a log from before the
        write-ahead log). Under the org's events lock, not synced (the caller syncs once all are in place)."""
        path, history = self._path(org, kind, identifier), self._history(org, kind, identifier)
        with disk_errors():
            if entry is None:
                try:
                    entry = (history / f"{revision}{SUFFIX}").read_bytes()
                except FileNotFoundError:
                    return
            else:
                history.mkdir(parents=True, exist_ok=True)
                write_unsynced(history / f"{revision}{SUFFIX}", entry)
            head = ENTRY_HEAD.match(entry)
            if head is None:
                return
            if head[1].decode() == DELETED:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            else:
                write_unsynced(path, entry[head.end():-1])

    def _commit(self, org, event, entry, path, replacement=None):
        """Commit a change whose history entry `entry` is in place: `replacement` (a PendingReplace) put in place over
        `path`, or with none `path` unlinked, with its event, in the org's next batch (service.storage.files.events),
        durable once that batch's write-ahead log record is. Without an event log (a tree test mode builds, which no
        crash need keep) it is only put in place."""
        if self.events is not None:
            self.events.commit(org, event, entry, replacement and replacement.source, path)
            if replacement is not None:
                replacement.placed()
            return
        with disk_errors():
            if replacement is None:
                os.unlink(path)
            else:
                replacement.put_in_place()

    def committed_revision(self, org, kind, identifier):
        """The object's committed revision (its current document's, else its last deletion's; 0 when none), read from
        the document's end, where its revision is written last."""
        path = self._path(org, kind, identifier)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return last_committed(self._history(org, kind, identifier))
        try:  # (os calls: a batch's leader asks this of each change another process's batch may have committed)
            revision = revision_at_end(os.pread(fd, META_TAIL, max(0, os.fstat(fd).st_size - META_TAIL)))
        finally:
            os.close(fd)
        return revision if revision is not None else (_read_json(path) or {}).get("revision", 0)

    def _keep_earlier_version(self, history, stored):
        """Give a document stored before history was kept its revision's entry, before it is replaced."""
        if stored is not None and not (history / f"{stored.revision}{SUFFIX}").exists():
            change = CREATED if stored.revision == 1 else UPDATED
            self._write_entry(history, stored.revision, change, stored.updated_at, encode(stored.document()))

    @staticmethod
    def _write_entry(history, revision, change, saved_at, encoded_document):
        """A history entry made durable in place (the entry of a document stored before history was kept)."""
        PendingReplace(history / f"{revision}{SUFFIX}", history_entry(change, saved_at, encoded_document)).commit()

    def load(self, org, kind, identifier, body, saved_at):
        """Write `body` as revision 1 of a new object, CREATED at `saved_at`, into a tree that no request reads yet
        (service.storage.files.FileRepository.replace_state builds one): without locks, and without fsync, since that
        tree is test mode's state, not data to keep through a crash."""
        path, history = self._path(org, kind, identifier), self._history(org, kind, identifier)
        encoded = encode({**without_meta(body), "createdAt": saved_at, "updatedAt": saved_at, "revision": 1})
        with disk_errors():
            history.mkdir(parents=True, exist_ok=True)
            (history / f"1{SUFFIX}").write_bytes(history_entry(CREATED, saved_at, encoded))
            path.write_bytes(encoded)

    def _prune(self, history, newest):
        """Remove the entries older than those kept, once `newest` is committed."""
        if self.history_revisions:
            prune(history, oldest_kept(newest, self.history_revisions))

    def history(self, org, kind, identifier, first, after=None):
        """Up to `first` revisions, newest first, older than `after` when given."""
        self._ready(org)
        history = self._history(org, kind, identifier)
        current = _read_json(self._path(org, kind, identifier))
        newest = current["revision"] if current else last_committed(history)
        numbers = [number for number in entry_numbers(history) if number <= newest]
        if current is not None and newest not in numbers:
            numbers.append(newest)  # a document stored before history was kept: its own revision
        found = []
        for number in reversed(numbers):
            if len(found) >= first:
                break
            if after is not None and number >= after:
                continue
            head = entry_head(history / f"{number}{SUFFIX}")
            if head is None and current is not None and number == newest:
                head = Revision(newest, current["updatedAt"], CREATED if newest == 1 else UPDATED)
            if head is not None:  # None: pruned since the listing
                found.append(head._replace(revision=number))
        return found

    def revision(self, org, kind, identifier, revision):
        """The document as revision `revision` stored it, or None."""
        self._ready(org)
        current = self.get(org, kind, identifier)
        if current is not None and revision == current["revision"]:
            return current
        history = self._history(org, kind, identifier)
        if revision > (current["revision"] if current else last_committed(history)):
            return None  # a leftover of a killed writer, or never written
        entry = _read_json(history / f"{revision}{SUFFIX}")
        return None if entry is None else entry["document"]

    def kinds(self, org):
        """The kinds of document an org has stored (processes, products, stations), sorted."""
        self._ready(org)
        try:
            with os.scandir(self.orgs_root / id_to_name(org)) as entries:
                return sorted(entry.name for entry in entries
                              if entry.is_dir() and not entry.name.startswith(".") and entry.name not in NOT_DOCUMENTS)
        except FileNotFoundError:
            return []

    def ids(self, org, kind):
        """All stored ids of a kind, sorted; reads directory entries only, no document."""
        self._ready(org)
        try:
            entries = os.scandir(self._directory(org, kind))
        except FileNotFoundError:
            return []
        with entries:
            names = [e.name[: -len(SUFFIX)] for e in entries if e.name.endswith(SUFFIX) and not e.name.startswith(".")]
        # Most names are their ids; name_to_id (a substitution per name) only for the rest, or to refuse a stray file.
        return sorted(name if "^" not in name and SAFE_NAME.fullmatch(name) else name_to_id(name) for name in names)

    def names(self, org, kind):
        """(id, name) of every object of a kind, in id order, from the first NAME_HEAD_SIZE bytes of each document (a
        document read whole only when its head does not hold its name: service.storage.common.encoding.name_in_head)."""
        found, directory = [], os.fspath(self._directory(org, kind))
        for identifier in self.ids(org, kind):
            try:  # unbuffered, and a path made as a string: pathlib's joins cost more than the read
                with open(f"{directory}/{id_to_name(identifier)}{SUFFIX}", "rb", buffering=0) as handle:
                    name = name_in_head(identifier, handle.read(NAME_HEAD_SIZE))
            except FileNotFoundError:
                continue  # removed since the listing
            if name is None:
                name = (self.get(org, kind, identifier) or {}).get("name")
            if name is not None:
                found.append((identifier, name))
        return found

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
        """Remove temporaries of document and history writes last touched before `cutoff` (their writer was killed)."""
        directories = [*self.orgs_root.glob("*/*"), *self.orgs_root.glob(f"*/*/{HISTORY}/*")]
        return sum(remove_stale_temporaries(directory, cutoff) for directory in directories if directory.is_dir())


def _read_json(path):
    """The document (or history entry) stored at `path`, charged to the request's read budget; None when there is
    none."""
    try:
        with open(path, "rb") as handle:
            stored = handle.read()
    except FileNotFoundError:
        return None
    spend(len(stored))
    return orjson.loads(stored)


def _read_held(path, held):
    """The document stored at `path` (a StoredDocument), or None, its file kept open until `held` (an ExitStack) exits.
    So the change that replaces or unlinks it under the org's events lock does not free its blocks there: the file
    system frees them at the last close, once that lock is released (replacing a 60 KB file costs a rename 0.08 ms of
    freeing, more under load, while every writer of the org waits for the lock)."""
    try:
        handle = held.enter_context(open(path, "rb", buffering=0))
    except FileNotFoundError:
        return None
    return StoredDocument(handle.readall())
