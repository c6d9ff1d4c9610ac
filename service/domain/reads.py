"""Reading stored processes, products and stations back, one org at a time."""
from typing import NamedTuple, Optional

from service.domain.derivations import derive
from service.interface.ids import is_valid_id
from service.domain.input_form import input_of
from service.interface.kinds import PROCESSES
from service.domain.validation import Problems

MAX_PAGE_SIZE = 1000


def present(kind, document):
    """A stored document as it is read: its input's fields with the derived data of a process (derived now, by the
    rules of this version, for current and past revisions alike), the metadata, and `input` itself."""
    if document is None:
        return None
    given = input_of(kind, document)
    shown = derive(given) if kind == PROCESSES else dict(given)
    shown.update(createdAt=document["createdAt"], updatedAt=document["updatedAt"], revision=document["revision"],
                 input=given)
    return shown


def get_object(repo, org, kind, identifier, revision=None):
    """The object of `kind` with this id in the org as it is now, or as revision `revision` stored it; None when there
    is none (also for ids that cannot exist, and revisions pruned or never made)."""
    if not is_valid_id(identifier):
        return None
    if revision is None:
        return present(kind, repo.documents.get(org, kind, identifier))
    return present(kind, repo.documents.revision(org, kind, identifier, revision)) if revision >= 1 else None


def check_first(problems, first):
    """Record a problem unless `first` is a page size (0..MAX_PAGE_SIZE)."""
    if isinstance(first, bool) or not isinstance(first, int) or not 0 <= first <= MAX_PAGE_SIZE:
        problems.add("first", f"must be an integer from 0 to {MAX_PAGE_SIZE}; got {first!r}")


def list_objects(repo, org, kind, first, after=None):
    """Up to `first` (0..1000) objects ordered by id, starting after the id `after`."""
    problems = Problems()
    check_first(problems, first)
    if after is not None and not isinstance(after, str):
        problems.add("after", f"must be the id of the last object of the previous page; got {after!r}")
    problems.raise_if_any()
    return (present(kind, document) for document in repo.documents.page(org, kind, first, after))


# The preview pages list this many objects at a time.
LIST_PAGE_SIZE = 100


class Listed(NamedTuple):
    """What a list page shows of one object: the list keeps this, not the document, so that a page of large documents
    holds one of them at a time (the store reads each as the page takes it), not 101."""
    id: str
    name: str
    revision: int
    updated_at: str
    step_count: int = 0  # a process's steps
    final_process_id: Optional[str] = None  # a product's
    dependency_count: int = 0  # a product's


def listed(document):
    """A stored document reduced to what a list shows of it (its steps are counted as stored: deriving a process adds
    actions, never steps)."""
    return Listed(document["id"], document["name"], document["revision"], document["updatedAt"],
                  len(document.get("steps") or []), document.get("finalProcessId"),
                  len(document.get("dependencies") or []))


class ListPage(NamedTuple):
    """One page of a list: what it shows of its objects (Listed), and the `after` of the page that follows (None on
    the last page)."""
    objects: list
    next_after: Optional[str]


def page_of_objects(repo, org, kind, after=None, contains="", size=LIST_PAGE_SIZE):
    """The org's objects of `kind` in id order after the id `after`, `size` at most, only those whose id or name
    contains `contains` (ignoring case) when it is given, each as Listed. Reads the ids (and names, when searching: a
    bounded start of each document) and the page's documents, no others, and holds one document at a time."""
    after = after if is_valid_id(after) else None  # anything else is no id of a page: start at the beginning
    if contains:
        needle = contains.casefold()
        matching = [identifier for identifier, name in repo.documents.names(org, kind)
                    if (after is None or identifier > after)
                    and (needle in identifier.casefold() or needle in name.casefold())]
        found = (repo.documents.get(org, kind, identifier) for identifier in matching[:size + 1])
        objects = [listed(document) for document in found if document is not None]  # removed since the listing
    else:
        objects = [listed(document) for document in repo.documents.page(org, kind, size + 1, after)]
    return ListPage(objects[:size], objects[size - 1].id if len(objects) > size else None)


def names_of(repo, org, kind, identifiers):
    """{id: name} of those of `identifiers` the org has stored of `kind`, from the start of each document of the kind
    (the store's `names`, which reads a bounded start of each, not the whole): a product's processes may be large, and
    its page needs only their names. Its cost grows with the org's number of objects of `kind`, by about 20 µs each."""
    wanted = {identifier for identifier in identifiers if is_valid_id(identifier)}
    return {identifier: name for identifier, name in repo.documents.names(org, kind) if identifier in wanted}
