"""Resolvers: take the repository and org from the context, call one domain function."""
from ariadne import MutationType, ObjectType, QueryType, ScalarType, SubscriptionType
from graphql.utilities import value_from_ast_untyped

from service.domain.changes import changes_between
from service.domain.events import event_type, latest_event_seq, list_events, subscription_start
from service.domain.lifecycle import UPSERTS, attribution, delete_object, history_of, restore_object
from service.interface.kinds import PROCESSES, PRODUCTS, SINGULAR, STATIONS
from service.domain.reads import get_object, list_objects
from service.domain.validation import CheckedInput
from service.web.events.subscriptions import EventSubscription
from service.web.graphql import webhook_resolvers

query = QueryType()
mutation = MutationType()
subscription = SubscriptionType()
step = ObjectType("Step")
event = ObjectType("Event")
# Any JSON value (an object's stored input), answered as it is.
json_scalar = ScalarType("JSON", serializer=lambda value: value, value_parser=lambda value: value,
                         literal_parser=lambda node, variables=None: value_from_ast_untyped(node, variables))


def _answer(saved):
    return "CREATED" if saved.created else "UPDATED"


def _by(info, comment):
    """Who makes the change (the request's token's name) and why (CONTRACT 16)."""
    return attribution(info.context["credential"].name, comment)


def _upsert(kind, key):
    def resolve(_, info, input, ifRevision=None, dryRun=False, comment=None):
        return _answer(UPSERTS[kind](info.context["repo"], info.context["org"], _member(input, key),
                                     if_revision=ifRevision, dry_run=dryRun, by=_by(info, comment)))

    return resolve


def _member(input, key):
    """input[key], still a CheckedInput when the input is one (its members were checked with it)."""
    member = input[key]
    return CheckedInput(member) if input.__class__ is CheckedInput else member


def _delete(kind):
    def resolve(_, info, id, ifRevision=None, dryRun=False, comment=None):
        delete_object(info.context["repo"], info.context["org"], kind, id, ifRevision, dryRun, _by(info, comment))
        return "DELETED"

    return resolve


def _restore(kind):
    def resolve(_, info, id, revision, ifRevision=None, dryRun=False, comment=None):
        return _answer(restore_object(info.context["repo"], info.context["org"], kind, id, revision, ifRevision, dryRun,
                                      _by(info, comment)))

    return resolve


def _get(kind):
    def resolve(_, info, id, revision=None):
        return get_object(info.context["repo"], info.context["org"], kind, id, revision)

    return resolve


def _list(kind):
    def resolve(_, info, first, after=None):
        return list_objects(info.context["repo"], info.context["org"], kind, first, after)

    return resolve


def _history(kind):
    def resolve(_, info, id, first, after=None):
        return history_of(info.context["repo"], info.context["org"], kind, id, first, after)

    return resolve


def _changes(kind):
    def resolve(_, info, id, **revisions):
        return changes_between(info.context["repo"], info.context["org"], kind, id, revisions["from"], revisions["to"])

    return resolve


for single, plural, kind in (("process", "processes", PROCESSES), ("product", "products", PRODUCTS),
                             ("station", "stations", STATIONS)):
    mutation.set_field(f"{single}Create", _upsert(kind, single))
    mutation.set_field(f"{single}Delete", _delete(kind))
    mutation.set_field(f"{single}Restore", _restore(kind))
    query.set_field(single, _get(kind))
    query.set_field(plural, _list(kind))
    query.set_field(f"{single}History", _history(kind))
    query.set_field(f"{single}Changes", _changes(kind))


@query.field("events")
def resolve_events(_, info, first, after=None, types=None):
    return list_events(info.context["repo"], info.context["org"], after, first, types)


@query.field("latestEventSeq")
def resolve_latest_event_seq(_, info):
    return latest_event_seq(info.context["repo"], info.context["org"])


@subscription.source("events")
def subscribe_events(_, info, after=None, types=None):
    """Where the subscription starts and what it wants; its events come from the transport
    (service.web.events.subscriptions)."""
    return EventSubscription(*subscription_start(info.context["repo"], info.context["org"], after, types))


@subscription.field("events")
def resolve_subscribed_event(stored, _info, **_arguments):
    return stored


event.set_field("type", lambda stored, _info: event_type(stored))
event.set_field("kind", lambda stored, _info: SINGULAR[stored.kind])


def _object_of_event(kind):
    def resolve(stored, info):
        if stored.kind != kind:
            return None
        return get_object(info.context["repo"], info.context["org"], kind, stored.id, stored.revision)

    return resolve


for kind in (PROCESSES, PRODUCTS, STATIONS):
    event.set_field(SINGULAR[kind], _object_of_event(kind))


@step.field("torqueGroups")
def resolve_torque_groups(stored_step, _info):
    """Derived groups hold action ids; hand back the actions themselves."""
    by_id = {action["id"]: action for action in stored_step.get("actions") or []}
    return [{"tool": group["tool"], "actions": [by_id[i] for i in group["actionIds"]]}
            for group in stored_step.get("torqueGroups") or []]


BINDABLES = [query, mutation, subscription, step, event, json_scalar, *webhook_resolvers.BINDABLES]
