"""The GraphQL endpoint: `POST /graph/v2` runs operations for the token's org; `GET /graph/v2` is the explorer."""
import functools
import json
from importlib import resources

from ariadne import make_executable_schema
from flask import Blueprint, Response, current_app, g, jsonify, render_template, request
from graphql import GraphQLError

from service.auth import require_org
from service.errors import ConfigurationError, Unauthenticated, graphql_code, http_status
from service.graphql.endpoint import GraphQLEndpoint
from service.graphql.errors import request_error
from service.interface import TOKEN_HEADER
from service.graphql.resolvers import BINDABLES
from service.storage import get_repository

SCHEMA_FILE = "schema.graphql"
# Runs as is once the token is in: a read query, no variables, nothing written.
EXPLORER_QUERY = f"""# The work-instruction service's GraphQL explorer.
#
# 1. Put your API token in the Headers tab below:
#      {{"{TOKEN_HEADER}": "<your token>"}}
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
    try:
        return make_executable_schema(path.read_text(encoding="utf-8"), *BINDABLES)
    except (OSError, UnicodeDecodeError, GraphQLError, TypeError, ValueError) as error:
        raise ConfigurationError(f"cannot load the GraphQL schema from {path}: {error}") from error


# Two blueprints on one URL: the explorer page needs no token, running operations does.
explorer = Blueprint("graphql_explorer", __name__)
api = Blueprint("graphql", __name__)
api.before_request(require_org)


@api.errorhandler(Unauthenticated)
def unauthenticated(error):
    # GraphQL tools (get-graphql-schema, codegen, gql) read `errors`; the house clients read `error`.
    response = jsonify(error=error.message, errors=[request_error(error.message, graphql_code(error))])
    response.status_code = http_status(error)
    return response


@explorer.get("/graph/v2")
def explorer_page():
    # GraphiQL is served from the package (service/static/graphiql), so the explorer works offline.
    settings = {"endpoint": request.path, "header": TOKEN_HEADER, "placeholder": PLACEHOLDER_TOKEN,
                "defaultQuery": EXPLORER_QUERY,
                "persistHeaders": bool(current_app.config["EXPLORER_PERSIST_HEADERS"])}
    return render_template("explorer.html", settings=settings)


@api.post("/graph/v2")
def run():
    context = {"repo": get_repository(current_app), "org": g.org}
    status, body = current_app.extensions["graphql"].respond(request.get_data(cache=False), context)
    return Response(json.dumps(body, ensure_ascii=False, separators=(",", ":")), status=status,
                    mimetype="application/json")


def init_app(app):
    """Load the schema once, then serve the explorer page and the token-protected POST at /graph/v2."""
    app.extensions["graphql"] = GraphQLEndpoint(load_schema())
    app.register_blueprint(explorer)
    app.register_blueprint(api)
