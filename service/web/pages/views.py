"""One view per page: read through the domain for the session's org, then render one template. Nothing here changes
anything; an id the org does not have (unknown, or another org's) is a 404 page."""
import re

from flask import current_app, g, render_template, request, url_for
from werkzeug.exceptions import NotFound

from service.domain.changes import changes, revision_input
from service.domain.lifecycle import history_of
from service.interface.kinds import PROCESSES, PRODUCTS, STATIONS
from service.domain.reads import get_object, names_of, page_of_objects
from service.web.auth import PUBLIC, requires
from service.web.pages import graph
from service.web.pages.auth import login_required
from service.web.pages.blueprint import DeletedObject, bp, page_route
from service.web.pages.present import colors_of
from service.web.sessions import session_org
from service.storage import get_repository

# Longer search strings are cut: no id is longer than 50 characters.
MAX_SEARCH_LENGTH = 200
WHAT = {PROCESSES: "process", PRODUCTS: "product", STATIONS: "station"}
# The history page lists this many revisions at a time.
HISTORY_PAGE_SIZE = 100
# A revision number as a query argument: digits only, few enough for any store (PostgreSQL's bigint).
REVISION_NUMBER = re.compile(r"[0-9]{1,15}")
# A deletion has no content: it is listed but cannot be compared.
DELETED = "DELETED"


@bp.context_processor
def signed_in():
    return {"signed_in_org": g.get("org")}


def _repository():
    return get_repository(current_app)


def _stored(kind, identifier):
    """The org's object of `kind` with this id, or a 404 page saying there is none (or that it was deleted, with a link
    to its history)."""
    repo = _repository()
    found = get_object(repo, g.org, kind, identifier)
    if found is None and history_of(repo, g.org, kind, identifier, 1):
        raise DeletedObject(f"The {WHAT[kind]} \u201c{identifier}\u201d was deleted. Its history stays, and the API or "
                            "wis restore can bring back any revision.",
                            url_for("pages.history", kind=kind, identifier=identifier))
    if found is None:
        raise NotFound(f"Your org has no {WHAT[kind]} with the id \u201c{identifier}\u201d.")
    return found


def _list_page(kind, template):
    search = request.args.get("q", "")[:MAX_SEARCH_LENGTH]
    page = page_of_objects(_repository(), g.org, kind, after=request.args.get("after"), contains=search.strip())
    return render_template(template, page=page, search=search, after=request.args.get("after"))


@page_route("/")
@requires(PUBLIC)
def home():
    g.org = session_org()
    return render_template("pages/home.html")


@page_route("/view/processes")
@login_required
def processes():
    return _list_page(PROCESSES, "pages/processes.html")


@page_route("/view/processes/<identifier>")
@login_required
def process(identifier):
    found = _stored(PROCESSES, identifier)
    return render_template("pages/process.html", process=found, colors=colors_of(found))


@page_route("/view/products")
@login_required
def products():
    return _list_page(PRODUCTS, "pages/products.html")


@page_route("/view/products/<identifier>")
@login_required
def product(identifier):
    found = _stored(PRODUCTS, identifier)
    process_ids = {found["finalProcessId"]}
    for edge in found.get("dependencies") or []:
        process_ids.update((edge["processId"], edge["upstreamProcessId"]))
    names = names_of(_repository(), g.org, PROCESSES, sorted(process_ids))
    return render_template("pages/product.html", product=found, drawing=graph.layout(found, names), names=names)


@page_route("/view/stations")
@login_required
def stations():
    return _list_page(STATIONS, "pages/stations.html")


@page_route("/view/<any(processes, products, stations):kind>/<identifier>/history")
@login_required
def history(kind, identifier):
    """The object's revisions, newest first (100 a page, `after` the last revision of the page before), and what
    changed between two of them (`from`, `to`; the last two by default). Kept after the object is deleted. Reads the 3
    newest entries, a page of at most 101, the current document and the two revisions compared, whatever the
    history's length (and the entries of the two compared)."""
    problems = []
    after, chosen_from, chosen_to = (_revision_argument(name, problems) for name in ("after", "from", "to"))
    repo = _repository()
    newest = history_of(repo, g.org, kind, identifier, 3)
    if not newest:
        raise NotFound(f"Your org has no {WHAT[kind]} with the id \u201c{identifier}\u201d and no history of one.")
    current = get_object(repo, g.org, kind, identifier)
    listed = history_of(repo, g.org, kind, identifier, HISTORY_PAGE_SIZE + 1, after)
    next_after = listed[HISTORY_PAGE_SIZE - 1]["revision"] if len(listed) > HISTORY_PAGE_SIZE else None
    listed = _with_previous(listed[:HISTORY_PAGE_SIZE])

    latest = [entry["revision"] for entry in newest if entry["change"] != DELETED][:2]
    to_revision = chosen_to if chosen_to is not None else (latest[0] if latest else None)
    from_revision = chosen_from if chosen_from is not None else (latest[-1] if len(latest) == 2 else None)
    comparison = _comparison(repo, kind, identifier, from_revision, to_revision, problems)
    choices = {entry["revision"] for entry in listed if entry["change"] != DELETED}
    choices.update(number for number in (from_revision, to_revision) if number is not None and not problems)
    return render_template(
        "pages/history.html", kind=kind, identifier=identifier, current=current,
        deleted=newest[0] if newest[0]["change"] == DELETED else None, revisions=listed, after=after,
        next_after=next_after, choices=sorted(choices, reverse=True), from_revision=from_revision,
        to_revision=to_revision, comparison=comparison, problems=problems,
        object_url=_object_url(kind, identifier) if current else None), 400 if problems else 200


def _revision_argument(name, problems):
    """The query argument `name` as a revision number; None when absent or empty, or (with a problem said) when it is
    not a number."""
    value = request.args.get(name, "")
    if value == "":
        return None
    if not REVISION_NUMBER.fullmatch(value):
        shown = value if len(value) <= 40 else value[:39] + "\u2026"
        problems.append(f"\u201c{name}\u201d must be a revision number, such as 3; got \u201c{shown}\u201d.")
        return None
    return int(value)


def _with_previous(entries):
    """The entries (newest first), each with `previous`: the revision with content listed before it (older), whose
    changes up to it the row links to; None for the oldest on the page and for deletions."""
    shown, previous = [], None
    for entry in reversed(entries):
        has_content = entry["change"] != DELETED
        shown.append({**entry, "previous": previous if has_content else None})
        if has_content:
            previous = entry["revision"]
    return shown[::-1]


def _comparison(repo, kind, identifier, from_revision, to_revision, problems):
    """{"from", "to", "lines", "entries"}: the changes between two revisions in words, and the history entries of the
    two (who made each, and why); None when there are not two to compare or one of them is not in the history (a
    problem says which). A revision given alone is checked too: a `to` with no `from` to pair it with (an object with
    one revision with content) must not be offered as a choice unchecked."""
    found = {}
    for number in dict.fromkeys(number for number in (from_revision, to_revision) if number is not None):
        found[number] = revision_input(repo, g.org, kind, identifier, number)
        if found[number] is None:
            problems.append(f"Revision {number} of this {WHAT[kind]} is not in its history: it was never made, is "
                            f"older than the revisions kept, or is a deletion, which has no content to compare.")
    if problems or from_revision is None or to_revision is None:
        return None
    lines = changes(kind, found[from_revision], found[to_revision])
    entries = [entry for number in found for entry in history_of(repo, g.org, kind, identifier, 1, number + 1)]
    return {"from": from_revision, "to": to_revision, "lines": lines, "entries": entries}


def _object_url(kind, identifier):
    """The page of the object itself: a process's or product's page, the list for a station (it has no page)."""
    if kind == PROCESSES:
        return url_for("pages.process", identifier=identifier)
    if kind == PRODUCTS:
        return url_for("pages.product", identifier=identifier)
    return url_for("pages.stations", q=identifier)
