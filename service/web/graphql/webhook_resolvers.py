"""The webhook fields of the schema (CONTRACT 15): subscribe, unsubscribe, redeliver, the subscriptions and their
delivery log. Each root field is one domain function; they need the admin scope (web/graphql/scopes.py), checked
before any field of an operation runs."""
from ariadne import MutationType, ObjectType, QueryType
from flask import current_app

from service.domain import webhooks
from service.web.graphql.webhook_fragments import fragment_problem

query = QueryType()
mutation = MutationType()
subscription_type = ObjectType("WebhookSubscription")
delivery_type = ObjectType("WebhookDelivery")


def _dispatcher():
    return current_app.extensions["webhooks"]


@mutation.field("webhookSubscribe")
def resolve_subscribe(_, info, input):
    dispatcher = _dispatcher()
    return webhooks.subscribe(info.context["repo"], info.context["org"], input, dispatcher.settings.policy,
                              lambda fragment: fragment_problem(info.schema, fragment), dispatcher.resolver)


@mutation.field("webhookUnsubscribe")
def resolve_unsubscribe(_, info, subscriptionID):
    return webhooks.unsubscribe(info.context["repo"], info.context["org"], subscriptionID)


@mutation.field("webhookRedeliver")
def resolve_redeliver(_, info, subscriptionID, seq):
    return webhooks.redeliver(info.context["repo"], info.context["org"], subscriptionID, seq)


@query.field("webhookSubscriptions")
def resolve_subscriptions(_, info):
    return webhooks.subscriptions(info.context["repo"], info.context["org"])


@query.field("webhookDeliveries")
def resolve_deliveries(_, info, subscriptionID, first, before=None):
    return webhooks.deliveries(info.context["repo"], info.context["org"], subscriptionID, first, before)


for field, attribute in (("subscriptionID", "id"), ("webhookUrl", "url"), ("webhookHeaders", "headers"),
                         ("responseFragment", "fragment"), ("createdAt", "created_at"),
                         ("disabledAt", "disabled_at"), ("disabledReason", "disabled_reason")):
    subscription_type.set_alias(field, attribute)
for field, attribute in (("lastStatus", "last_status"), ("lastError", "last_error"),
                         ("lastAttemptAt", "last_attempt_at"), ("nextAttemptAt", "next_attempt_at")):
    delivery_type.set_alias(field, attribute)
delivery_type.set_field("state", lambda delivery, _info: delivery.state.value)

BINDABLES = [query, mutation, subscription_type, delivery_type]
