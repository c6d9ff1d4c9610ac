"""Coercing variable values with functions compiled once per input type, instead of graphql-core's generic walk.

Profiling processCreate showed graphql-core's variable coercion (a type dispatch per value, plus a second walk
to check the nesting depth) to be most of a request's time. Here each named input type of the schema gets a
small function the first time a request uses it, kept for the life of the app; each operation of a parsed
document gets a plan (its variables' signatures and functions) once, cached with the document. A request's
variables go through those, and the operation runs on a copy of its document that declares no variables,
with the coerced values handed to the executor (PrecoercedExecutor).

This path only ever accepts: a value it cannot coerce exactly as graphql-core would is refused, and the
request then runs the ordinary way, so every error message stays graphql-core's (and service.web.graphql.errors').

The same walk applies the domain's value rules (service.domain.validation.Problems.check_values: each string within
its field's length and made of characters, each number finite), and leaves out null members, as the stored form
does: graphql-core's coercion keeps an explicit null, and every resolver reads a member with `.get`, so the two are one
input. A variable whose every value it has checked, and whose JSON shows it within the input's size limits, reaches
the resolvers marked as a CheckedInput, which the domain then stores without walking it again. A value breaking a rule
is refused here, and the ordinary path's domain check then names it.
"""
from dataclasses import replace

from graphql import (
    GraphQLBoolean,
    GraphQLError,
    GraphQLFloat,
    GraphQLInputObjectType,
    GraphQLInt,
    GraphQLString,
    OperationDefinitionNode,
    is_enum_type,
    is_input_object_type,
    is_list_type,
    is_non_null_type,
    is_required_input_field,
)
from graphql.execution.get_variable_signature import get_variable_signature
from graphql.execution.values import MAX_NESTING_DEPTH, VariableValues, VariableValueSource
from graphql.pyutils import Undefined, is_iterable
from graphql.utilities.coerce_input_value import coerce_default_value
import orjson

from service.domain.validation import CheckedInput, text_limit
from service.interface import MAX_INPUT_OBJECTS, MAX_INPUT_SIZE
from service.web.graphql.budget import BudgetedExecutor
from service.web.graphql.object_coercer import ObjectField, Refused, object_coercer, text_coercer

# The built-in scalars whose coerced values break no value rule of the domain: graphql-core refuses a non-finite Float
# and an Int beyond 32 bits. A custom scalar (JSON) may hold anything, so a variable holding one is not marked.
CHECKED_LEAVES = (GraphQLInt, GraphQLFloat, GraphQLBoolean)


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
        self._named = {}  # type name -> (coercion function, nesting height, whether it checks every value)

    def plan(self, operation):
        """((signature, coercion function, whether it checks every value) per variable) of an operation, or None if
        this path cannot coerce them."""
        plan = []
        try:
            for definition in operation.variable_definitions or ():
                signature = get_variable_signature(self.schema, definition)
                if isinstance(signature, GraphQLError):
                    return None
                coerce, height, checks = self._compile(signature.type, frozenset())
                if 1 + height > MAX_NESTING_DEPTH:  # graphql-core refuses values nested deeper
                    return None
                plan.append((signature, coerce, checks))
        except (Unsupported, RecursionError):
            return None
        return tuple(plan)

    @staticmethod
    def coerce(plan, variables):
        """The VariableValues of a request's variables, or None when the ordinary path must run (refusal, defaults)."""
        sources, coerced = {}, {}
        try:
            for signature, coerce, checks in plan:
                name = signature.name
                if name not in variables:
                    return None
                value = variables[name]
                sources[name] = VariableValueSource(signature, value)
                coerced[name] = _marked(coerce(value)) if checks else coerce(value)
        except (Refused, RecursionError):
            return None
        return VariableValues(sources, coerced)

    def compile(self, type_):
        """The coercion function of an input type (Unsupported if this path does not handle it)."""
        return self._compile(type_, frozenset())[0]

    def _compile(self, type_, visiting, field=None):
        """(coercion function, nesting height, whether it checks every value): graphql-core's coerce_input_value
        rules and the domain's value rules, decided once. `field` names the input field the type is the type of (a
        string's length limit is its field's).

        The height counts the levels a value of the type may nest below it (a list item or an input object's field
        is one level down), so that the depth graphql-core allows is checked once per plan, not per value.
        """
        if is_non_null_type(type_):
            inner, height, checks = self._compile(type_.of_type, visiting, field)
            return _non_null(inner), height, checks
        if is_list_type(type_):
            item_type = type_.of_type
            non_null_items = is_non_null_type(item_type)
            item, height, checks = self._compile(item_type.of_type if non_null_items else item_type, visiting, field)

            def coerce_list(value):
                if value is None or value is Undefined:
                    return None
                # A single value where a list is expected is a list of one.
                coerced = ([item(entry) for entry in value] if value.__class__ is list or is_iterable(value)
                           else [item(value)])
                if non_null_items and None in coerced:  # an item's coercion answers None for a null (or Undefined)
                    raise Refused
                return coerced
            return coerce_list, height + 1, checks
        if type_ is GraphQLString and field is not None:
            return text_coercer(_most_characters(field)), 0, True
        compiled = self._named.get(type_.name)
        if compiled is None:
            # Compiled with `visiting`, but the outcome does not depend on it: a type reaching one being compiled
            # is on a cycle, so it raises Unsupported whatever the path, and only successes are kept.
            compiled = (self._compile_input_object(type_, visiting) if is_input_object_type(type_)
                        else (_compile_leaf(type_), 0, type_ in CHECKED_LEAVES or is_enum_type(type_)))
            self._named[type_.name] = compiled
        return compiled

    def _compile_input_object(self, type_, visiting):
        if type_.is_one_of or type_.name in visiting:
            raise Unsupported(type_)
        visiting = visiting | {type_.name}
        fields, height, checks = [], 0, True
        for name, field in type_.fields.items():
            # A non-null field's null is refused here, in the loop, rather than by a function call per value.
            non_null = is_non_null_type(field.type)
            field_type = field.type.of_type if non_null else field.type
            coerce_field, field_height, field_checks = self._compile(field_type, visiting, name)
            most = _most_characters(name) if field_type is GraphQLString else None  # (its test inlined)
            fields.append(ObjectField(name, field.out_name or name, coerce_field, non_null,
                                      is_required_input_field(field), coerce_default_value(field), most))
            height, checks = max(height, field_height + 1), checks and field_checks
            if height >= MAX_NESTING_DEPTH:
                raise Unsupported(type_)
        coerce_object = object_coercer(type_.name, fields, type_.out_type)
        return coerce_object, height, checks and type_.out_type is GraphQLInputObjectType.out_type


def _marked(value):
    """A variable's coerced value whose every value was checked, marked as a CheckedInput when it is an object within
    the input's size limits (MAX_INPUT_SIZE, MAX_INPUT_OBJECTS). What check_values counts (a character per value plus
    those of its strings; an object per `{...}`) is no more than the length of the value's JSON and the `{` in it, so a
    value whose JSON is within both limits is within them; any other is left for the domain to count exactly, as is one
    orjson cannot encode (none of the built-in scalars' values is such, but what is not measured is not vouched for)."""
    if value.__class__ is not dict:
        return value
    try:
        encoded = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return value
    if len(encoded) > MAX_INPUT_SIZE or encoded.count(b"{") > MAX_INPUT_OBJECTS:
        return value
    return CheckedInput(value)


def _non_null(inner):
    def coerce_non_null(value):
        if value is None or value is Undefined:
            raise Refused
        return inner(value)
    return coerce_non_null


def _most_characters(field):
    """The most characters a string of the input field may hold: text_limit's, or for an id field (whose length only the
    input's size bounds) MAX_INPUT_SIZE."""
    rule = text_limit(field)
    return MAX_INPUT_SIZE if rule is None else rule[0]


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
