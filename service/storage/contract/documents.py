"""The storage contract of documents: what a store does with the processes, products and stations (their current
revision and their history), and the values it answers."""
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from typing import NamedTuple, Protocol, TypeVar, runtime_checkable

from service.errors import RevisionConflict

# The fields the store writes into every document, last and in this order: a client's values for them are dropped.
DOCUMENT_META_FIELDS = ("createdAt", "updatedAt", "revision")


def utc_timestamp():
    """Now, as createdAt and updatedAt hold it: UTC to the millisecond, `2024-05-01T12:00:00.123Z` (the shared
    backend's database makes the same format)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# The changes a revision records (GraphQL's enum Change).
CREATED, UPDATED, DELETED, RESTORED = "CREATED", "UPDATED", "DELETED", "RESTORED"
# Past revisions kept per object when WIS_HISTORY_REVISIONS is unset; 0 keeps all.
DEFAULT_HISTORY_REVISIONS = 100


class Saved(NamedTuple):
    """What a save did (or, in a dry run, would do)."""
    document: dict  # as stored: the body, then createdAt, updatedAt, revision
    created: bool  # no current document was there (never was, or deleted)
    changed: bool  # False: the body equals the stored one, nothing was stored


class Attribution(NamedTuple):
    """Who made a change and why (CONTRACT 16), kept with its history entry and its event: the name of the token that
    sent it, and the comment its mutation gave. None where nobody said (a change made before tokens had names, a
    test-mode restore, a mutation without a comment)."""
    author: str | None = None
    comment: str | None = None


NOBODY = Attribution()


class Revision(NamedTuple):
    """One entry of an object's history."""
    revision: int
    saved_at: str
    change: str  # CREATED, UPDATED, DELETED or RESTORED
    author: str | None = None
    comment: str | None = None


def without_meta(document):
    """The body of a stored document: every field but the metadata the store writes."""
    return {key: value for key, value in document.items() if key not in DOCUMENT_META_FIELDS}


def check_revision(kind, identifier, if_revision, current):
    """RevisionConflict unless `if_revision` is None or the stored revision `current` (0: absent)."""
    if if_revision is not None and if_revision != current:
        raise RevisionConflict(kind, identifier, if_revision, current)


def oldest_kept(newest, keep):
    """The oldest revision number a history keeps once `newest` is stored (revision numbers have no gaps)."""
    return max(1, newest - keep + 1) if keep else 1


class StagedDocument(NamedTuple):
    """A document of a new state, received into a staging directory."""
    org: str
    kind: str
    identifier: str
    body: bytes  # the document's body as JSON (its input: no metadata)


class DocumentView(Protocol):
    """What a guard of a write reads, under the write's locks (service.storage.contract.DocumentStore.save)."""

    def existing(self, org: str, kind: str, identifiers: Iterable[str]) -> set[str]:
        """The ids among `identifiers` that the org has stored of `kind`."""

    def each(self, org: str, kind: str) -> Iterator[dict]:
        """Every stored document of a kind."""

    def existing_media(self, org: str, paths: Iterable[str]) -> set[str]:
        """The media paths among `paths` that the org has published (as MediaStore.existing), read under the write's
        locks: a process write naming media checks them here, so `wis gc --delete` cannot remove one in between."""


# A check run under the org's references lock before a write (a product naming processes, a process deleted while
# products name it): it raises a ServiceError to refuse the write. Two guarded writes of one org never overlap, on any
# worker or node, so what a guard saw still holds when its write commits.
Guard = Callable[[DocumentView], None]
# What an action run under the references lock answers (DocumentStore.with_references_locked).
T = TypeVar("T")


@runtime_checkable
class DocumentStore(DocumentView, Protocol):
    """JSON documents of every org, one per (kind, id), with the metadata fields the store writes (createdAt,
    updatedAt, revision: each change adds 1), and the history of each: every change kept as a revision, the oldest
    pruned past `history_revisions` (0 keeps all) by the write that adds one."""
    history_revisions: int

    def get(self, org: str, kind: str, identifier: str) -> dict | None: ...

    def save(self, org: str, kind: str, identifier: str, body: dict, *, restored: bool = False,
             if_revision: int | None = None, dry_run: bool = False, guard: Guard | None = None,
             by: Attribution = NOBODY) -> Saved:
        """Store `body` as the whole document, as a new revision (RESTORED when `restored`, else CREATED or UPDATED)
        that `by` made, unless it equals the stored body (then nothing is stored). In order: `guard`, then
        `if_revision` (the stored revision must be it, 0 for none: RevisionConflict), then the comparison. A dry run
        stores nothing and answers what the write would."""

    def delete(self, org: str, kind: str, identifier: str, *, if_revision: int | None = None, dry_run: bool = False,
               guard: Guard | None = None, by: Attribution = NOBODY) -> int:
        """Remove the current document, adding a DELETED revision that `by` made (its number is answered); the history
        stays and a later save continues its numbers. ObjectNotFound when there is none; then `if_revision`, then
        `guard`."""

    def history(self, org: str, kind: str, identifier: str, first: int, after: int | None = None) -> list[Revision]:
        """Up to `first` revisions, newest first, older than `after` when given; [] for an unknown id."""

    def revision(self, org: str, kind: str, identifier: str, revision: int) -> dict | None:
        """The document as revision `revision` stored it; None when it is unknown, pruned, or a deletion."""

    def kinds(self, org: str) -> list[str]: ...

    def ids(self, org: str, kind: str) -> list[str]:
        """Every id of a kind, in byte order."""

    def names(self, org: str, kind: str) -> list[tuple[str, str]]:
        """(id, name) of every object of a kind, in id order, without reading whole documents (a search by name)."""

    def page(self, org: str, kind: str, first: int, after: str | None = None) -> Iterator[dict]:
        """Up to `first` documents with ids after `after`, in id order, read as the caller takes them."""

    def with_references_locked(self, org: str, action: Callable[[DocumentView], T]) -> T:
        """Run `action` under the org's references lock, the lock guarded writes take, and answer what it answers: no
        guarded write of the org runs meanwhile, on any worker or node (`wis gc --delete` deletes media there)."""
