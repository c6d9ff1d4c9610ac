"""Reading a GraphQL-over-HTTP request's parameters (a POSTed JSON body, a GET's URL parameters) and the error objects
of a request that cannot be run at all.

Nothing here imports graphql-core: the blueprint and the test-mode journal read requests with it, and an app whose
GraphQL endpoint is built on first use (service.web.graphql.endpoint_of) must not load graphql-core before then.
"""
import json

import orjson

MAX_QUERY_LENGTH = 100_000


def request_error(message, code="BAD_REQUEST"):
    """A GraphQL error object for a request that could not be run at all."""
    return {"message": message, "extensions": {"code": code}}


class BadGraphQLRequest(Exception):
    """The request cannot be run at all; answered with `status` and `{"errors": [...]}`."""

    def __init__(self, errors, status=400):
        super().__init__(errors)
        self.errors = errors
        self.status = status


def _refuse_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _load_with_json(body):
    """The body parsed by the json module (UTF-16 and UTF-32 too), or BadGraphQLRequest saying what is wrong."""
    try:
        return json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise BadGraphQLRequest([request_error("the JSON body is nested too deeply")]) from None
    except ValueError as error:
        raise BadGraphQLRequest([request_error(f"the body must be a JSON object with `query` and `variables`: {error}")]) from None


def read_payload(body):
    """The POSTed JSON object as (query, variables, operation_name), or BadGraphQLRequest naming the problem."""
    try:
        # orjson is several times faster on a large body; a body it refuses gets the json module's verdict.
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        payload = _load_with_json(body)
    if not isinstance(payload, dict):
        raise BadGraphQLRequest([request_error("the body must be a JSON object with `query` and `variables`")])
    return _checked(payload.get("query"), payload.get("variables"), payload.get("operationName"))


def read_url_parameters(args):
    """A GET request's URL parameters (GraphQL over HTTP: `query`, `variables` as a JSON text, `operationName`) as
    (query, variables, operation_name), or BadGraphQLRequest naming the problem."""
    variables = args.get("variables") or None
    if variables is not None:
        try:
            variables = orjson.loads(variables)
        except orjson.JSONDecodeError as error:
            raise BadGraphQLRequest([request_error(f"the `variables` parameter must be a JSON object: {error}")]) from None
    return _checked(args.get("query"), variables, args.get("operationName"))


def _checked(query, variables, operation_name):
    """The three parameters of a GraphQL request once they have the right types and sizes."""
    if not isinstance(query, str) or not query.strip():
        raise BadGraphQLRequest([request_error("`query` must be a non-empty string holding the GraphQL document")])
    if len(query) > MAX_QUERY_LENGTH:
        raise BadGraphQLRequest([request_error(
            f"`query` is {len(query)} characters long; at most {MAX_QUERY_LENGTH} are accepted (send data in `variables`)",
            "PAYLOAD_TOO_LARGE")], status=413)
    if variables is not None and not isinstance(variables, dict):
        raise BadGraphQLRequest([request_error("`variables` must be a JSON object (or null)")])
    if operation_name is not None and not isinstance(operation_name, str):
        raise BadGraphQLRequest([request_error("`operationName` must be a string (or null)")])
    # An empty operationName is the same as none, POSTed or in a GET's URL (GraphQL over HTTP).
    return query, variables or {}, operation_name or None
