"""Running one GraphQL request: cached parse and validation, execution, response (its parameters are read from the
HTTP request by service.web.graphql.http).

Parsing and validating a query text is done once per distinct text (an LRU cache): clients send the
same few mutation texts over and over, with different variables. The cache is bounded by the length of
the texts it holds, not only by their number: a parsed and validated document takes 100-200 bytes per
character of its text (28 KB for the shortest), and 256 texts at the token limit would keep 800 MB
alive, 256 read queries with an id written in each 25 MB. Variables are coerced by functions
compiled once per input type (service.web.graphql.coercion), falling back to graphql-core's own coercion
for values those refuse, so that errors keep their usual form.
"""
import threading
from collections import OrderedDict
from typing import NamedTuple

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    OperationDefinitionNode,
    OperationType,
    execute_sync,
    get_operation_ast,
    is_non_null_type,
    parse,
    specified_rules,
    validate,
)

from service.domain.text_changes import matching_budget
from service.storage.contract.read_budget import read_budget
from service.web.graphql.budget import BudgetedExecutor
from service.web.graphql.calls import root_calls
from service.web.graphql.coercion import PrecoercedExecutor, VariableCoercer, without_variable_definitions
from service.web.graphql.errors import format_execution_errors, variable_errors
from service.web.graphql.http import request_error
from service.web.graphql.limits import MAX_TOKENS, QueryLimits, capped, fields_of_root
from service.web.graphql.scopes import refusal

CACHE_SIZE = 256
# At most this many characters of query text in the cache (about 20 MB of parsed documents at worst: up to
# 200 bytes per character, plus about 28 KB per text however short); a text longer than CACHED_QUERY_LENGTH
# is parsed for each request instead (such texts inline their values, so they rarely come twice, and each
# would push out dozens of the short texts that do).
CACHE_SIZE_CHARS = 64 * 1024
CACHED_QUERY_LENGTH = 8 * 1024


class Prepared(NamedTuple):
    """A parsed and validated document, its copy without variable definitions for pre-coerced variables, and the
    coercion plan of each operation by name (None where graphql-core's own coercion must run)."""

    document: DocumentNode
    without_variables: DocumentNode
    plans: dict


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int
    chars: int


class DocumentCache:
    """An LRU cache of prepare(query) bounded by the number of texts and their total length; thread-safe."""

    def __init__(self, prepare, maxsize=CACHE_SIZE, max_chars=CACHE_SIZE_CHARS, max_length=CACHED_QUERY_LENGTH):
        self._prepare = prepare
        self.maxsize, self.max_chars, self.max_length = maxsize, max_chars, max_length
        self._entries = OrderedDict()
        self._chars = self._hits = self._misses = 0
        self._lock = threading.Lock()

    def __call__(self, query):
        with self._lock:
            entry = self._entries.get(query)
            if entry is not None:
                self._entries.move_to_end(query)
                self._hits += 1
                return entry
            self._misses += 1
        entry = self._prepare(query)  # outside the lock: other threads keep being answered from the cache
        if len(query) <= self.max_length:
            with self._lock:
                if query not in self._entries:
                    self._entries[query] = entry
                    self._chars += len(query)
                    while len(self._entries) > self.maxsize or self._chars > self.max_chars:
                        evicted, _ = self._entries.popitem(last=False)
                        self._chars -= len(evicted)
        return entry

    def cache_info(self):
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.maxsize, len(self._entries), self._chars)


def result_body(result):
    """The answer to an ExecutionResult: its errors (formatted, capped), then its data."""
    body = {}
    if result.errors:
        body["errors"] = capped(format_execution_errors(result.errors))
    body["data"] = result.data
    return body


class GraphQLEndpoint:
    """The schema plus a cache of prepared documents; one per app, in app.extensions["graphql"]."""

    def __init__(self, schema):
        self.schema = schema
        self.coercer = VariableCoercer(schema)
        self.prepare = DocumentCache(self._prepare)

    def _prepare(self, query):
        """(Prepared, None) for a valid query text, else (None, errors) - both cached."""
        try:
            document = parse(query, max_tokens=MAX_TOKENS)
            errors = validate(self.schema, document, [QueryLimits]) or validate(self.schema, document, specified_rules)
        except GraphQLError as error:
            return None, [{**error.formatted, "extensions": {"code": "GRAPHQL_PARSE_FAILED"}}]
        except RecursionError:
            return None, [request_error("the query is nested too deeply", "GRAPHQL_PARSE_FAILED")]
        if errors:
            return None, [{**error.formatted, "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"}} for error in errors]
        # Operation names are unique in a valid document, and an anonymous operation is its only one.
        plans = {definition.name.value if definition.name else None: self.coercer.plan(definition)
                 for definition in document.definitions if isinstance(definition, OperationDefinitionNode)}
        return Prepared(document, without_variable_definitions(document), plans), None

    def respond(self, query, variables, operation_name, context, mutations=True, entry=None):
        """(HTTP status, response object) for one request's parameters (read_payload, read_url_parameters).
        `mutations=False` (GET) answers 405 to a mutation without running it. `entry`: what `prepare(query)` answered
        already (a caller that looked at the operation first)."""
        prepared, errors = entry or self.prepare(query)
        if errors:
            return 400, {"errors": errors}
        document = prepared.document
        operation = get_operation_ast(document, operation_name)
        if operation is None:
            message = (f"no operation named {operation_name!r} in the document" if operation_name
                       else "the document holds several operations: say which one to run in `operationName`")
            return 400, {"errors": [request_error(message)]}
        if not mutations and operation.operation != OperationType.QUERY:
            return 405, {"errors": [request_error(
                f"a {operation.operation.value} cannot be sent with GET (GraphQL over HTTP): POST it", "METHOD_NOT_ALLOWED")]}
        plan = prepared.plans[operation.name.value if operation.name else None]
        coerced = None if plan is None else self.coercer.coerce(plan, variables)
        # What every alias, page and event of the operation reads shares one budget of stored bytes, and what its
        # comparisons of revisions match one budget of word matching.
        with read_budget(), matching_budget():
            if coerced is None:
                result = execute_sync(self.schema, document, variable_values=variables, operation_name=operation_name,
                                      context_value=context, executor_class=BudgetedExecutor)
            else:
                result = execute_sync(self.schema, prepared.without_variables, variable_values=coerced,
                                      operation_name=operation_name, context_value=context,
                                      executor_class=PrecoercedExecutor)
        if result.data is None and result.errors and all(error.path is None for error in result.errors):
            # Variable values refused by graphql-core before any resolver ran: bad user input, named by path.
            return 200, {"errors": self.refused_variables(operation, variables, result.errors),
                         "data": self._null_data(operation)}
        return 200, result_body(result)

    def refused_variables(self, operation, variables, errors):
        """The errors of variable values graphql-core refused (`errors`), each named by its path in the input."""
        return capped(variable_errors(self.schema, operation, variables) or [
            request_error(error.message, "BAD_USER_INPUT") for error in errors])

    def operation_type(self, entry, query, operation_name, of_invalid=False):
        """"query", "mutation" or "subscription": the type of the operation a request runs (`entry`: what
        `prepare(query)` answered); None when there is no such operation or the document does not parse, or (unless
        `of_invalid`) fails validation."""
        prepared, errors = entry
        if errors:
            if not of_invalid:
                return None
            try:
                document = parse(query, max_tokens=MAX_TOKENS)
            except (GraphQLError, RecursionError):
                return None
        else:
            document = prepared.document
        operation = get_operation_ast(document, operation_name)
        return None if operation is None else operation.operation.value

    def forbidden(self, entry, operation_name, credential):
        """The answer (HTTP 200) to an operation that asks for a root field beyond the credential's scope (CONTRACT
        16): each root field null, one FORBIDDEN error; None when it asks for none (or there is no operation to run:
        `respond` says so). `entry`: what `prepare(query)` answered."""
        prepared, errors = entry
        operation = None if errors else get_operation_ast(prepared.document, operation_name)
        if operation is None:
            return None
        fragments = {definition.name.value: definition for definition in prepared.document.definitions
                     if isinstance(definition, FragmentDefinitionNode)}
        fields = list(fields_of_root(operation.selection_set, fragments))
        error = refusal(self.schema.get_root_type(operation.operation).name, [field.name.value for field in fields],
                        credential)
        return None if error is None else {"errors": [error], "data": self._null_data(operation, fields)}

    def root_calls(self, query, variables, operation_name):
        """[(root field name, ids it names)] of the operation a request ran or asked for (service.web.graphql.calls);
        empty when the document does not parse or validate, or names no operation to run."""
        prepared, errors = self.prepare(query)
        if errors:
            return []
        operation = get_operation_ast(prepared.document, operation_name)
        return [] if operation is None else root_calls(self.schema, prepared.document, operation, variables)

    def _null_data(self, operation, fields=None):
        """`data` of an operation none of whose fields ran: each field null, or null as a whole if one is non-null.
        `fields`: its root fields, through its fragments (by default those written at its top, fragments counting as
        non-null fields)."""
        root = self.schema.get_root_type(operation.operation)
        data = {}
        for selection in operation.selection_set.selections if fields is None else fields:
            field = root.fields.get(selection.name.value) if isinstance(selection, FieldNode) else None
            if field is None or is_non_null_type(field.type):
                return None
            data[(selection.alias or selection.name).value] = None
        return data
