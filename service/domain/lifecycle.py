"""The lifecycle of an object beyond create-or-update (CONTRACT 10): deletion, restoring a past revision, history, and
who made each change (CONTRACT 16)."""
from service.interface import LONE_SURROGATE, MAX_COMMENT_LENGTH, is_unicode
from service.interface.ids import is_valid_id
from service.domain.input_form import input_of
from service.domain.processes import upsert_process
from service.domain.products import refuse_while_named, upsert_product
from service.interface.kinds import PROCESSES, PRODUCTS, STATIONS
from service.domain.reads import check_first
from service.domain.stations import upsert_station
from service.domain.validation import InvalidInput, Problems
from service.errors import ObjectNotFound, RevisionNotFound
from service.storage.contract import NOBODY, Attribution

UPSERTS = {PROCESSES: upsert_process, PRODUCTS: upsert_product, STATIONS: upsert_station}


def attribution(author, comment):
    """Who makes a change (the name of the request's token) and why (the mutation's `comment`): InvalidInput naming
    `comment` when it is longer than MAX_COMMENT_LENGTH code points, or holds half of a UTF-16 surrogate pair (no
    character: JSON's `"\\ud800"` alone), which could not be stored."""
    if comment is not None:
        if len(comment) > MAX_COMMENT_LENGTH:
            raise InvalidInput([("comment", f"is {len(comment):,} characters long; at most {MAX_COMMENT_LENGTH} are "
                                            "accepted")])
        if not is_unicode(comment):
            raise InvalidInput([("comment", LONE_SURROGATE)])
    return Attribution(author, comment)


def delete_object(repo, org, kind, identifier, if_revision=None, dry_run=False, by=NOBODY):
    """Delete the object (its history stays); the revision of its deletion, which `by` (an Attribution) made.
    ObjectNotFound when it does not exist; a process that products name is refused (ProcessInUse)."""
    if not is_valid_id(identifier):
        raise ObjectNotFound(kind, identifier)
    guard = refuse_while_named(org, identifier) if kind == PROCESSES else None
    return repo.documents.delete(org, kind, identifier, if_revision=if_revision, dry_run=dry_run, guard=guard, by=by)


def restore_object(repo, org, kind, identifier, revision, if_revision=None, dry_run=False, by=NOBODY):
    """Store the input of revision `revision` as a new revision (RESTORED) that `by` made, checked as a create is;
    what the store did (service.storage.contract.Saved). RevisionNotFound when the history does not hold that
    revision's content."""
    document = repo.documents.revision(org, kind, identifier, revision) \
        if is_valid_id(identifier) and revision >= 1 else None
    if document is None:
        raise RevisionNotFound(kind, identifier, revision)
    return UPSERTS[kind](repo, org, input_of(kind, document), if_revision=if_revision, dry_run=dry_run, restored=True,
                         by=by)


def history_of(repo, org, kind, identifier, first, after=None):
    """Up to `first` (0..1000) revisions of the object, newest first, older than the revision `after`; [] for an id
    the org never stored."""
    problems = Problems()
    check_first(problems, first)
    if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
        problems.add("after", f"must be the last revision number of the previous page; got {after!r}")
    problems.raise_if_any()
    if not is_valid_id(identifier):
        return []
    return [{"revision": entry.revision, "savedAt": entry.saved_at, "change": entry.change, "author": entry.author,
             "comment": entry.comment} for entry in repo.documents.history(org, kind, identifier, first, after)]
