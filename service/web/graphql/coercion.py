"""Coercing variable values with functions compiled once per input type, instead of graphql-core's generic walk.

Profiling processCreate showed graphql-core's variable coercion (a type dispatch per value, plus a second walk
to check the nesting depth) to be most of a request's time. Here each named input type of the schema gets a
small function the first time a request uses it, kept for the life of the app; each operation of a parsed
document gets a plan (its variables' signatures and functions) once, cached with the document. A request's
variables go through those, and the operation runs on a copy of its document that declares no variables,
with the coerced values handed to the executor (PrecoercedExecutor).

This path only ever accepts: a value it cannot coerce exactly as graphql-core would is refused, and the
request then runs the ordinary way, so every error message stays graphql-core's (and service.web.graphql.errors').
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
from graphql.execution.values import MAX_NESTING_DEPTH, VariableValues, VariableValueSource
from graphql.pyutils import Undefined, is_iterable
from graphql.utilities.coerce_input_value import coerce_default_value

from service.web.graphql.budget import BudgetedExecutor


class Refused(Exception):
    """The value is not one this path coerces; run the request the ordinary way."""


class Unsupported(Exception):
    """The type is not one this path compiles (recursive, one-of, or nested deeper than graphql-core allows)."""


class PrecoercedExecutor(BudgetedExecutor):
    """The budgeted executor, taking a VariableValues already coerced in place of raw variables."""

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
    """Coercion functions of one schema's input types, each named type compiled once, on first use.

    What is cached must not grow with the requests: the compiled functions are keyed by the names of the
    schema's own input types (a fixed set), never by a type object built for a request (type_from_ast makes a
    new `[T!]!` wrapper for every variable definition it reads). The wrappers of a variable's type are compiled
    into its operation's plan, which is cached with the parsed document (endpoint.GraphQLEndpoint.prepare).
    """

    def __init__(self, schema):
        self.schema = schema
        self._named = {}  # type name -> (coercion function, nesting height)

    def plan(self, operation):
        """((signature, coercion function) per variable) of an operation, or None if this path cannot coerce them."""
        plan = []
        try:
            for definition in operation.variable_definitions or ():
                signature = get_variable_signature(self.schema, definition)
                if isinstance(signature, GraphQLError):
                    return None
                coerce, height = self._compile(signature.type, frozenset())
                if 1 + height > MAX_NESTING_DEPTH:  # graphql-core refuses values nested deeper
                    return None
                plan.append((signature, coerce))
        except (Unsupported, RecursionError):
            return None
        return tuple(plan)

    @staticmethod
    def coerce(plan, variables):
        """The VariableValues of a request's variables, or None when the ordinary path must run (refusal, defaults)."""
        sources, coerced = {}, {}
        try:
            for signature, coerce in plan:
                name = signature.name
                if name not in variables:
                    return None
                value = variables[name]
                sources[name] = VariableValueSource(signature, value)
                coerced[name] = coerce(value)
        except (Refused, RecursionError):
            return None
        return VariableValues(sources, coerced)

    def compile(self, type_):
        """The coercion function of an input type (Unsupported if this path does not handle it)."""
        return self._compile(type_, frozenset())[0]

    def _compile(self, type_, visiting):
        """(coercion function, nesting height): graphql-core's coerce_input_value rules, decided once.

        The height counts the levels a value of the type may nest below it (a list item or an input object's field
        is one level down), so that the depth graphql-core allows is checked once per plan, not per value.
        """
        if is_non_null_type(type_):
            inner, height = self._compile(type_.of_type, visiting)

            def coerce_non_null(value):
                if value is None or value is Undefined:
                    raise Refused
                return inner(value)
            return coerce_non_null, height
        if is_list_type(type_):
            item, height = self._compile(type_.of_type, visiting)

            def coerce_list(value):
                if value is None or value is Undefined:
                    return None
                # A single value where a list is expected is a list of one.
                return [item(entry) for entry in value] if is_iterable(value) else [item(value)]
            return coerce_list, height + 1
        compiled = self._named.get(type_.name)
        if compiled is None:
            # Compiled with `visiting`, but the outcome does not depend on it: a type reaching one being compiled
            # is on a cycle, so it raises Unsupported whatever the path, and only successes are kept.
            compiled = (self._compile_input_object(type_, visiting) if is_input_object_type(type_)
                        else (_compile_leaf(type_), 0))
            self._named[type_.name] = compiled
        return compiled

    def _compile_input_object(self, type_, visiting):
        if type_.is_one_of or type_.name in visiting:
            raise Unsupported(type_)
        visiting = visiting | {type_.name}
        fields, height = [], 0
        for name, field in type_.fields.items():
            coerce_field, field_height = self._compile(field.type, visiting)
            fields.append((name, field.out_name or name, coerce_field, is_required_input_field(field),
                           coerce_default_value(field)))
            height = max(height, field_height + 1)
            if height >= MAX_NESTING_DEPTH:
                raise Unsupported(type_)
        fields = tuple(fields)
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
        return coerce_object, height


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
