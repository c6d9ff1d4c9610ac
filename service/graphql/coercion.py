"""Coercing variable values with functions compiled once per input type, instead of graphql-core's generic walk.

Profiling processCreate showed graphql-core's variable coercion (a type dispatch per value, plus a second walk
to check the nesting depth) to be most of a request's time. Here each input type gets a small function once,
at start-up; a request's variables go through those, and the operation runs on a copy of its document that
declares no variables, with the coerced values handed to the executor (PrecoercedExecutor).

This path only ever accepts: a value it cannot coerce exactly as graphql-core would is refused, and the
request then runs the ordinary way, so every error message stays graphql-core's (and service.graphql.errors').
"""
from dataclasses import replace

from graphql import (
    GraphQLError,
    GraphQLString,
    OperationDefinitionNode,
    is_input_object_type,
    is_list_type,
    is_non_null_type,
    is_required_input_field,
)
from graphql.execution.get_variable_signature import get_variable_signature
from graphql.execution.incremental.incremental_executor import IncrementalExecutor
from graphql.execution.values import MAX_NESTING_DEPTH, VariableValues, VariableValueSource
from graphql.pyutils import Undefined, is_iterable
from graphql.utilities.coerce_input_value import coerce_default_value


class Refused(Exception):
    """The value is not one this path coerces; run the request the ordinary way."""


class Unsupported(Exception):
    """The type is not one this path compiles (recursive, one-of, or nested deeper than graphql-core allows)."""


class PrecoercedExecutor(IncrementalExecutor):
    """graphql-core's default executor, taking a VariableValues already coerced in place of raw variables."""

    @classmethod
    def build(cls, schema, document, root_value=None, context_value=None, raw_variable_values=None,
              operation_name=None, *args, **kwargs):
        # `document` declares no variables (see without_variable_definitions): nothing is coerced twice.
        executor = super().build(schema, document, root_value, context_value, None, operation_name, *args, **kwargs)
        if not isinstance(executor, list):
            executor.variable_values = raw_variable_values
        return executor


def without_variable_definitions(document):
    """A shallow copy of the document whose operations declare no variables (they were validated with them)."""
    return replace(document, definitions=tuple(
        replace(definition, variable_definitions=()) if isinstance(definition, OperationDefinitionNode)
        else definition for definition in document.definitions))


class VariableCoercer:
    """Compiled coercion functions of one schema's input types."""

    def __init__(self, schema):
        self.schema = schema
        self._compiled = {}

    def coerce(self, operation, variables):
        """The operation's VariableValues, or None when the ordinary path must run (refusal, defaults, oddities)."""
        sources, coerced = {}, {}
        try:
            for definition in operation.variable_definitions or ():
                signature = get_variable_signature(self.schema, definition)
                if isinstance(signature, GraphQLError) or signature.name not in variables:
                    return None
                value = variables[signature.name]
                sources[signature.name] = VariableValueSource(signature, value)
                coerced[signature.name] = self._coercer(signature.type)(value)
        except (Refused, Unsupported, RecursionError):
            return None
        return VariableValues(sources, coerced)

    def _coercer(self, type_):
        compiled = self._compiled.get(type_)
        if compiled is None:
            compiled = self._compiled[type_] = _compile(type_, 1, set())
        return compiled


def _compile(type_, depth, visiting):
    """The coercion function of an input type: graphql-core's coerce_input_value rules, decided once."""
    if depth > MAX_NESTING_DEPTH:
        raise Unsupported(type_)
    if is_non_null_type(type_):
        inner = _compile(type_.of_type, depth, visiting)

        def coerce_non_null(value):
            if value is None or value is Undefined:
                raise Refused
            return inner(value)
        return coerce_non_null
    if is_list_type(type_):
        item = _compile(type_.of_type, depth + 1, visiting)

        def coerce_list(value):
            if value is None or value is Undefined:
                return None
            # A single value where a list is expected is a list of one.
            return [item(entry) for entry in value] if is_iterable(value) else [item(value)]
        return coerce_list
    if is_input_object_type(type_):
        return _compile_input_object(type_, depth, visiting)
    return _compile_leaf(type_)


def _compile_input_object(type_, depth, visiting):
    if type_.is_one_of or type_.name in visiting:
        raise Unsupported(type_)
    visiting = visiting | {type_.name}
    fields = tuple((name, field.out_name or name, _compile(field.type, depth + 1, visiting),
                    is_required_input_field(field), coerce_default_value(field))
                   for name, field in type_.fields.items())
    out_type = type_.out_type

    def coerce_object(value):
        if value is None or value is Undefined:
            return None
        if not isinstance(value, dict):
            raise Refused
        coerced, found = {}, 0
        for name, out_name, coerce_field, required, default in fields:
            if name in value:
                found += 1
                coerced[out_name] = coerce_field(value[name])
            elif required:
                raise Refused
            elif default is not Undefined:
                coerced[out_name] = default
        if found != len(value):
            raise Refused  # a field the type does not have
        return out_type(coerced)
    return coerce_object


def _compile_leaf(type_):
    parse = type_.coerce_input_value

    def coerce_leaf(value):
        if value is None or value is Undefined:
            return None
        try:
            coerced = parse(value)
        except Exception:  # graphql-core treats any exception of a scalar's parser as an invalid value
            raise Refused from None
        if coerced is Undefined:
            raise Refused
        return coerced

    def coerce_string(value):
        # Most leaves are strings, which graphql-core's String returns unchanged.
        return value if value.__class__ is str else coerce_leaf(value)
    return coerce_string if type_ is GraphQLString else coerce_leaf
