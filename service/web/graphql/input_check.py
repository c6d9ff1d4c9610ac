"""An object's input checked as the API checks one sent to its create mutation, without a request: graphql-core's
coercion against the schema's input type of its kind (for a snapshot's objects, which reach the store without one)."""
from graphql import GraphQLError
from graphql.utilities import coerce_input_value, validate_input_value

from service.domain.validation import InvalidInput
from service.interface.kinds import SINGULAR
from service.web.graphql import load_schema

INPUT_TYPES = {"stations": "StationInput", "processes": "ProcessInput", "products": "ProductInput"}


def coerced_input(kind, value):
    """`value` as a resolver receives the input of kind `kind` ("processes": a ProcessInput), or InvalidInput listing
    what the schema refuses, each with its field path (process.steps[0].name) and graphql-core's message."""
    problems = []

    def refused(error: GraphQLError, path):
        field = SINGULAR[kind] + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
        problems.append((field, error.message))

    input_type = load_schema().type_map[INPUT_TYPES[kind]]
    validate_input_value(value, input_type, refused)
    if problems:
        raise InvalidInput(problems)
    return coerce_input_value(value, input_type)
