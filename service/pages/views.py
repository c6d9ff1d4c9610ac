"""One view per page: read through the domain for the session's org, then render one template. Nothing here changes
anything; an id the org does not have (unknown, or another org's) is a 404 page."""
from flask import current_app, g, render_template, request
from werkzeug.exceptions import NotFound

from service.domain.reads import PROCESSES, PRODUCTS, STATIONS, get_object, names_of, page_of_objects
from service.pages import graph
from service.pages.auth import login_required
from service.pages.blueprint import bp, page_route
from service.pages.present import colors_of
from service.sessions import session_org
from service.storage import get_repository

# Longer search strings are cut: no id is longer than 50 characters.
MAX_SEARCH_LENGTH = 200
WHAT = {PROCESSES: "process", PRODUCTS: "product", STATIONS: "station"}


@bp.context_processor
def signed_in():
    return {"signed_in_org": g.get("org")}


def _repository():
    return get_repository(current_app)


def _stored(kind, identifier):
    """The org's object of `kind` with this id, or a 404 page saying there is none."""
    found = get_object(_repository(), g.org, kind, identifier)
    if found is None:
        raise NotFound(f"Your org has no {WHAT[kind]} with the id \u201c{identifier}\u201d.")
    return found


def _list_page(kind, template):
    search = request.args.get("q", "")[:MAX_SEARCH_LENGTH]
    page = page_of_objects(_repository(), g.org, kind, after=request.args.get("after"), contains=search.strip())
    return render_template(template, page=page, search=search, after=request.args.get("after"))


@page_route("/")
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
