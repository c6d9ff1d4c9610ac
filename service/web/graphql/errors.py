"""Turning graphql-core results and domain errors into GraphQL error objects.

Input problems become one error per field: `message` starts with the field's path in the input
(`process.steps[2].actions[0].id: ...`), and `extensions` carries `code: BAD_USER_INPUT` and `field`.
"""
import logging

from graphql import (
    FieldNode,
    GraphQLError,
    ListValueNode,
    ObjectValueNode,
    VariableNode,
    is_enum_type,
    is_input_object_type,
    is_list_type,
    is_non_null_type,
    is_required_input_field,
    type_from_ast,
)
from graphql.pyutils import inspect

from service.domain.validation import InvalidInput
from service.errors import ServiceError, graphql_code
from service.web.observability import count_engine_error

log = logging.getLogger(__name__)

BAD_USER_INPUT = "BAD_USER_INPUT"


def field_error(field, message, located=None):
    """One BAD_USER_INPUT error naming `field`; `located` lends its locations and path."""
    error = {"message": f"{field}: {message}"}
    if located is not None:
        if located.locations:
            error["locations"] = [{"line": spot.line, "column": spot.column} for spot in located.locations]
        if located.path is not None:
            error["path"] = located.path
    error["extensions"] = {"code": BAD_USER_INPUT, "field": field}
    return error


def service_error_object(error):
    """The message and extensions of a GraphQL error for a ServiceError: its code and what else it carries."""
    return {"message": error.message, "extensions": {"code": graphql_code(error), **error.extensions}}


def format_execution_errors(errors):
    """The `errors` list of a response for the errors raised while executing."""
    formatted = []
    for error in errors:
        original = error.original_error
        if isinstance(original, InvalidInput):
            formatted.extend(field_error(field, message, error) for field, message in original.errors)
        elif isinstance(original, ServiceError):
            count_engine_error(original)
            formatted.append({**error.formatted, **service_error_object(original)})
        elif original is not None and not isinstance(original, GraphQLError):
            # Logged in full here; the client learns only that it was not its fault.
            log.error("unexpected error in a resolver", exc_info=original)
            formatted.append({**error.formatted, "message": "internal server error",
                              "extensions": {"code": "INTERNAL_SERVER_ERROR"}})
        else:
            formatted.append(error.formatted)
    return formatted


def variable_errors(schema, operation, variables):
    """BAD_USER_INPUT errors for every variable value the operation's variable types refuse.

    graphql-core reports these as one flat message per variable; here each problem is named by its
    path inside the argument (e.g. `process.steps[0].id`), as for the domain's own rules.
    """
    prefixes = _variable_prefixes(operation)
    errors = []
    for definition in operation.variable_definitions:
        name = definition.variable.name.value
        type_ = type_from_ast(schema, definition.type)
        if type_ is None:
            continue
        prefix = prefixes.get(name, [name])
        if name not in variables:
            if is_non_null_type(type_) and definition.default_value is None:
                errors.append(field_error(_field_path(prefix, []), f"is required: send the variable ${name} ({type_})"))
            continue
        for path, message in _value_problems(variables[name], type_, []):
            errors.append(field_error(_field_path(prefix, path), message))
    return errors


def _value_problems(value, type_, path):
    """(path, message) for each part of `value` that the input type refuses; walks the type, not the value."""
    if is_non_null_type(type_):
        if value is None:
            yield path, f"is required and cannot be null ({type_})"
            return
        type_ = type_.of_type
    if value is None:
        return
    if is_list_type(type_):
        # GraphQL accepts a single value where a list is expected, as a list of one.
        for index, item in (enumerate(value) if isinstance(value, list) else [(None, value)]):
            yield from _value_problems(item, type_.of_type, path if index is None else path + [index])
    elif is_input_object_type(type_):
        if not isinstance(value, dict):
            yield path, f"must be an object of type {type_.name}; got {inspect(value)}"
            return
        for field_name, field in type_.fields.items():
            if field_name in value:
                yield from _value_problems(value[field_name], field.type, path + [field_name])
            elif is_required_input_field(field):
                yield path + [field_name], f"is required ({field.type})"
        for field_name in value:
            if field_name not in type_.fields:
                yield path + [field_name], f"is not a field of {type_.name}; its fields are {', '.join(type_.fields)}"
    elif is_enum_type(type_):
        if not isinstance(value, str) or value not in type_.values:
            yield path, f"must be one of {', '.join(type_.values)}; got {inspect(value)}"
    else:
        try:
            type_.parse_value(value)
        except (GraphQLError, TypeError, ValueError) as error:
            yield path, str(error.message if isinstance(error, GraphQLError) else error)


def _field_path(prefix, path):
    """Join an argument prefix (argument name first) and a value path into `process.steps[0].id` (the argument's name
    left out before a field of it, as the domain names them), or `types[1]` (kept before an index)."""
    parts = prefix[1:] + path
    if not parts:
        return prefix[0]
    text = prefix[0] if isinstance(parts[0], int) else ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else ("." if text else "") + part
    return text


def _variable_prefixes(operation):
    """{variable name: [argument name, path inside the argument...]} for variables used once at the top level."""
    found, seen_twice = {}, set()

    def visit(value, path):
        if isinstance(value, VariableNode):
            name = value.name.value
            if name in found:
                seen_twice.add(name)
            found[name] = path
        elif isinstance(value, ObjectValueNode):
            for field in value.fields:
                visit(field.value, path + [field.name.value])
        elif isinstance(value, ListValueNode):
            for index, item in enumerate(value.values):
                visit(item, path + [index])

    for selection in operation.selection_set.selections:
        if isinstance(selection, FieldNode):
            for argument in selection.arguments:
                visit(argument.value, [argument.name.value])
    return {name: path for name, path in found.items() if name not in seen_twice}
