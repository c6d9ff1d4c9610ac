"""The GraphQL endpoint at `/graph/v2` (and `/graphql`, the vendor's other spelling): `POST` runs operations for the
token's org; `GET` runs queries given as URL parameters (GraphQL over HTTP) and shows a browser the explorer.

This module and service.web.graphql.http import no graphql-core nor ariadne: those and the executable schema (about 0.3 s
together) are loaded when the app's GraphQLEndpoint is built (`endpoint_of`). `init_app` builds it at once, so that
no request of a server waits for it and a broken schema stops the app from starting; an app configured with
LOAD_ON_FIRST_REQUEST (the embedded test double, service.testing) builds it when a request first needs it.
"""
import functools
import json
import threading
from importlib import resources

from flask import Blueprint, Response, current_app, g, jsonify, render_template, request

from service.domain.tokens import READ
from service.web.auth import READ_TOKEN, Access, requires
from service.web.error_handlers import with_retry_after
from service.errors import ConfigurationError, EventStreamsFull, Unauthenticated, graphql_code, http_status
from service.web.graphql.http import BadGraphQLRequest, read_payload, read_url_parameters, request_error
from service.interface import GRAPHQL_PATHS, TOKEN_HEADER, TOKEN_HEADER_ALIAS
from service.web.observability import count_graphql_errors
from service.storage import get_repository

SCHEMA_FILE = "schema.graphql"
# Runs as is once the token is in: a read query, no variables, nothing written.
EXPLORER_QUERY = f"""# The work-instruction service's GraphQL explorer.
#
# 1. Put your API token in the Headers tab below:
#      {{"{TOKEN_HEADER}": "<your token>"}}
#    ({TOKEN_HEADER_ALIAS}, the spelling of the vendor's
#    documentation, is accepted too.)
#    The schema (Docs, autocompletion) loads as soon as the
#    service accepts it.
# 2. Run this query with the run button (or Ctrl-Enter): your
#    org's first stations and processes (empty lists at first).
# 3. Then try a mutation. Mutations answer CREATED or UPDATED
#    and take no selection set:
#      mutation {{
#        stationCreate(input: {{station: {{id: "st_1", name: "Station 1"}}}})
#      }}
query FirstLook {{
  stations(first: 10) {{ id name revision updatedAt }}
  processes(first: 10) {{ id name revision updatedAt }}
}}
"""
PLACEHOLDER_TOKEN = "paste your API token here"


def load_schema():
    """Build the executable schema from the packaged schema.graphql; exit naming the file if it is unusable."""
    return _executable_schema(resources.files("service") / SCHEMA_FILE)


@functools.cache
def _executable_schema(path):
    # Built once per process and file: the schema is the same for every app (resolvers are bound at import), and
    # building it was four fifths of create_app's time, which an embedding test suite pays per app.
    from ariadne import make_executable_schema
    from graphql import GraphQLError

    from service.web.graphql.resolvers import BINDABLES

    try:
        return make_executable_schema(path.read_text(encoding="utf-8"), *BINDABLES)
    except (OSError, UnicodeDecodeError, GraphQLError, TypeError, ValueError) as error:
        raise ConfigurationError(f"cannot load the GraphQL schema from {path}: {error}") from error


JSON = "application/json"
# The media type GraphQL over HTTP prefers for answers; given to a client that asks for it by name.
GRAPHQL_RESPONSE = "application/graphql-response+json"
HTML = "text/html"
EVENT_STREAM = "text/event-stream"
SUBSCRIPTION = "subscription"

bp = Blueprint("graphql", __name__)


@bp.errorhandler(Unauthenticated)
@bp.errorhandler(EventStreamsFull)
def refused(error):
    """A request refused before any operation ran (no token; a subscription beyond the worker's cap of streams)."""
    # GraphQL tools (get-graphql-schema, codegen, gql) read `errors`; the house clients read `error`.
    response = jsonify(error=error.message, errors=[request_error(error.message, graphql_code(error))])
    response.status_code = http_status(error)
    return with_retry_after(response, error)


def _on_graphql_paths(method):
    """Register a view for `method` on every GraphQL path (CONTRACT 3, and the vendor's spelling of CONTRACT 12)."""
    def register(view):
        for path in GRAPHQL_PATHS:
            bp.add_url_rule(path, view_func=view, methods=[method])
        return view
    return register


@_on_graphql_paths("POST")
@requires(READ_TOKEN)  # what each root field needs besides: service.web.graphql.scopes
def run():
    return _answer(read_payload, request.get_data(cache=False), mutations=True)


def _wants_explorer():
    """True when the client ranks HTML above JSON; on a tie (no Accept, `*/*`) the explorer without a `query`
    parameter (someone opening the URL), the answer with one (a client configured for GET)."""
    accept = request.accept_mimetypes
    html, data = accept.quality(HTML), max(accept.quality(JSON), accept.quality(GRAPHQL_RESPONSE))
    return html > data or (html == data and "query" not in request.args)


@_on_graphql_paths("GET")
@requires(Access(READ, exempt=_wants_explorer))  # the explorer page needs no token
def get():
    """The explorer for a browser; a query's answer for a GraphQL client (GraphQL over HTTP, GET)."""
    if _wants_explorer():
        return _explorer_page()
    response = _answer(read_url_parameters, request.args, mutations=False)
    # One org's data, chosen by a header: no cache between client and service may keep it for anyone else.
    response.headers["Cache-Control"] = "no-store"
    return response


def _explorer_page():
    # GraphiQL is served from the package (service/static/graphiql), so the explorer works offline.
    settings = {"endpoint": request.path, "header": TOKEN_HEADER, "headerAlias": TOKEN_HEADER_ALIAS,
                "placeholder": PLACEHOLDER_TOKEN, "defaultQuery": EXPLORER_QUERY,
                "persistHeaders": bool(current_app.config["EXPLORER_PERSIST_HEADERS"])}
    return render_template("explorer.html", settings=settings)


def _answer(read_parameters, source, mutations):
    """Run the request whose parameters `read_parameters(source)` reads; answer JSON of the type the client prefers."""
    endpoint = endpoint_of(current_app)
    try:
        parameters = read_parameters(source)
    except BadGraphQLRequest as refusal:
        status, body = refusal.status, {"errors": refusal.errors}
    else:
        # What was asked, for whoever looks at this request afterwards (the journal of test mode).
        g.graphql_parameters = parameters
        context = {"repo": get_repository(current_app), "org": g.org, "credential": g.credential}
        query, variables, operation_name = parameters
        entry = endpoint.prepare(query)
        event_stream = _names_event_stream()
        forbidden = endpoint.forbidden(entry, operation_name, g.credential)
        if forbidden is not None:
            status, body = 200, forbidden
        elif mutations and endpoint.operation_type(entry, query, operation_name, event_stream) == SUBSCRIPTION:
            if event_stream:
                # Here, not at the top: it imports graphql-core, which this module leaves to endpoint_of.
                from service.web.events.subscriptions import subscription_answer

                return subscription_answer(endpoint, entry, variables, operation_name, context)
            status, body = 400, {"errors": [request_error(
                f"a subscription is answered as Server-Sent Events: send it with the header Accept: {EVENT_STREAM} "
                "(the graphql-sse protocol, distinct connections mode)")]}
        else:
            status, body = endpoint.respond(*parameters, context, mutations=mutations, entry=entry)
    count_graphql_errors(body.get("errors"))
    response = Response(json.dumps(body, ensure_ascii=False, separators=(",", ":")), status=status,
                        content_type=_answer_type())
    if status == 405:
        response.headers["Allow"] = "POST"
    return response


def _names_event_stream():
    """True when the client names text/event-stream in Accept (a wildcard does not count): a subscription's answer."""
    return any(value.split(";")[0].strip().lower() == EVENT_STREAM and quality > 0
               for value, quality in request.accept_mimetypes)


def _answer_type():
    """application/graphql-response+json when the client names it and ranks it at least as high as
    application/json; application/json otherwise, also when Accept names neither (what clients expected before
    GraphQL over HTTP named a type of its own)."""
    accept = request.accept_mimetypes
    named = any(value.split(";")[0].strip().lower() == GRAPHQL_RESPONSE for value, _ in accept)
    if named and accept.quality(GRAPHQL_RESPONSE) >= accept.quality(JSON):
        return f"{GRAPHQL_RESPONSE}; charset=utf-8"
    return JSON


# One for all apps: building an endpoint is mostly the process's one schema (and imports), built once either way.
_building = threading.Lock()


def endpoint_of(app):
    """The app's GraphQLEndpoint (in app.extensions["graphql"]), built by the first caller; callers that come while it
    is being built (the threads of a threaded server) wait for it. A schema that cannot be loaded raises
    ConfigurationError at each call until it can."""
    endpoint = app.extensions.get("graphql")
    if endpoint is None:
        with _building:
            endpoint = app.extensions.get("graphql")
            if endpoint is None:
                from service.web.graphql.endpoint import GraphQLEndpoint

                endpoint = app.extensions["graphql"] = GraphQLEndpoint(load_schema())
    return endpoint


def init_app(app):
    """Serve the GraphQL paths; build the endpoint now (the schema loaded once per process) unless the app asks for it
    on first request."""
    if not app.config.get("LOAD_ON_FIRST_REQUEST"):
        endpoint_of(app)
    app.register_blueprint(bp)
