"""GraphQL subscriptions over Server-Sent Events (CONTRACT 14): `POST /graph/v2` with a `subscription` document and
`Accept: text/event-stream`, answered in the graphql-sse protocol's distinct connections mode: `event: next` with
each ExecutionResult, `event: complete` (an empty data line) at the end.

graphql-core's own steps run each part: `create_source_event_stream` calls the `events` field's source resolver
(service.web.graphql.resolvers), which checks the arguments and says where to start (an EventSubscription); then each
event of the stream is executed as the operation's root value (`execute_subscription_event`), with the budgeted
executor of every answer. graphql-core's `subscribe` and Ariadne's SubscriptionType sources are asynchronous
(an event loop, a sync source run in a thread of it); a gunicorn thread has no event loop, so this thread reads the
hub's stream (service.web.events.stream) itself and executes each event as it comes. The executor lives as long as the
stream: it keeps the variables an event's execution reads, not those only the root field's arguments use (the start
read them), so that what a stream holds does not grow with the request's `types`.

As graphql-sse does, a document that fails validation, variables refused and arguments refused are answered in the
stream: one `next` holding the errors, then `complete`. A stream whose org's events are numbered again (a test-mode
reset) gets a `next` with EVENTS_EXPIRED and completes; one that ends because the worker stops or its client hung up
ends without `complete`, so a client subscribes again.
"""
import logging
from typing import NamedTuple

from graphql import (ExecutionResult, VariableNode, Visitor, create_source_event_stream, execute_subscription_event,
                     get_operation_ast, is_required_argument, visit)

from service.errors import EventsExpired, ServiceError
from service.web.events import sse
from service.web.events.answer import sse_response, stream_answer
from service.web.events.stream import Ending
from service.web.graphql.budget import BudgetedExecutor
from service.web.graphql.endpoint import result_body
from service.web.graphql.errors import format_execution_errors, service_error_object
from service.web.graphql.limits import capped
from service.web.observability import count_graphql_errors

log = logging.getLogger(__name__)

COMPLETE = sse.message("complete", None)


class EventSubscription(NamedTuple):
    """What the `events` field's source resolver answers: the seq the subscription starts after, and the (kind, change)
    pairs it wants (None: every event)."""
    position: int
    wanted: frozenset | None

    def __aiter__(self):
        # graphql-core accepts only an async iterable from a source resolver; this one is read by this module, not
        # by an event loop.
        raise TypeError("an EventSubscription is read by service.web.events.subscriptions")


def subscription_answer(endpoint, entry, variables, operation_name, context):
    """The answer to a subscription request (one that names text/event-stream in Accept) whose document
    `endpoint.prepare` answered `entry` for."""
    prepared, errors = entry
    if errors:
        return _refused(errors)
    executor = BudgetedExecutor.build(endpoint.schema, prepared.document, context_value=context,
                                      raw_variable_values=variables, operation_name=operation_name)
    if isinstance(executor, list):
        return _refused(endpoint.refused_variables(get_operation_ast(prepared.document, operation_name), variables,
                                                   executor))
    source = create_source_event_stream(executor)
    if isinstance(source, ExecutionResult):
        return _refused(capped(format_execution_errors(source.errors)))

    events = context["repo"].events
    _drop_root_arguments(executor)
    return stream_answer(context["credential"], source.wanted, source.position,
                         lambda stream: _results(stream, executor, events))


def _drop_root_arguments(executor):
    """Let the executor, which each event is executed with for as long as the stream lasts, hold only the variables
    that execution reads. The root field's arguments (`after`, `types`) were read once, by the source resolver: a
    variable given only as one of them (a nullable one, which an event's execution then takes as not given) is let go,
    rather than held with its source and its coerced copy (a 10 MB `types` was 60 MB of a worker per stream)."""
    needed = set()
    subscription = executor.schema.subscription_type
    for definition in [executor.operation, *(details.definition for details in executor.fragments.values())]:
        at_root = definition is executor.operation or definition.type_condition.name.value == subscription.name
        visit(definition.selection_set, _VariableUses(subscription if at_root else None, needed))
    values = executor.variable_values
    executor.variable_values = values._replace(
        sources={name: source for name, source in values.sources.items() if name in needed},
        coerced={name: value for name, value in values.coerced.items() if name in needed})


class _VariableUses(Visitor):
    """Adds to `needed` the name of each variable a selection set uses, but those given as a whole nullable argument
    of a field at its top (the operation's root field, when `root_type` is the type of the set)."""

    def __init__(self, root_type, needed):
        super().__init__()
        self._root_type, self.needed = root_type, needed
        self._fields = []  # the names of the fields entered, outermost first
        self._directives = 0

    def enter_field(self, node, *_):
        self._fields.append(node.name.value)

    def leave_field(self, *_):
        self._fields.pop()

    def enter_directive(self, *_):
        self._directives += 1

    def leave_directive(self, *_):
        self._directives -= 1

    def enter_argument(self, node, *_):
        at_top = self._root_type is not None and len(self._fields) == 1 and not self._directives
        if not at_top or not isinstance(node.value, VariableNode):
            return None
        field = self._root_type.fields.get(self._fields[0])
        argument = field.args.get(node.name.value) if field is not None else None
        return self.SKIP if argument is not None and not is_required_argument(argument) else None

    def enter_variable(self, node, *_):
        self.needed.add(node.name.value)


def _refused(errors):
    """A stream of one result holding `errors`, then its end."""
    count_graphql_errors(errors)
    return sse_response([sse.message("next", {"errors": errors}), COMPLETE])


def _results(stream, executor, events):
    """`next` with the result of each event of the stream, keepalives between them; `next` with EVENTS_EXPIRED then
    `complete` when the org's events are numbered again."""
    # A comment first, so that the answer's head goes out now: the client knows it is subscribed.
    yield sse.KEEPALIVE
    try:
        for batch in stream.batches(events, sse.KEEPALIVE_SECONDS):
            if not batch:
                yield sse.KEEPALIVE
            else:
                yield b"".join(sse.message("next", _result(executor, event)) for event in batch)
    except ServiceError as error:
        log.warning("a subscription of org %r ends: %s", stream.org, error.message)
        return
    if stream.ending is Ending.RENUMBERED:
        expired = EventsExpired(stream.position, stream.oldest)
        yield sse.message("next", {"errors": [service_error_object(expired)]}) + COMPLETE


def _result(executor, event):
    return result_body(execute_subscription_event(executor.build_per_event_executor(event)))
