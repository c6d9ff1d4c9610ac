"""A webhook subscription's responseFragment (CONTRACT 15): a GraphQL fragment on Event, checked against the schema when
the subscription is made, then executed on each event it delivers, as a subscription `events { ...Fragment }` would
be: the body is `{"data": {"events": <the fragment's fields of the event>}}`, the answer of the vendor's own webhooks.
"""
import functools

import orjson
from graphql import FragmentDefinitionNode, GraphQLError, execute_subscription_event, parse, specified_rules, validate

from service.web.graphql.budget import BudgetedExecutor
from service.web.graphql.endpoint import result_body
from service.web.graphql.limits import MAX_TOKENS, QueryLimits

MAX_FRAGMENT_LENGTH = 20_000
EXAMPLE = "fragment Change on Event { seq type id name process { name revision } }"


def subscription_text(fragment):
    """The subscription that selects the fragment: what it means, and what runs on each event."""
    document = parse(fragment, max_tokens=MAX_TOKENS)
    return f"subscription Webhook {{ events {{ ...{document.definitions[0].name.value} }} }}\n{fragment}"


def fragment_problem(schema, fragment):
    """What is wrong with a responseFragment, in words, or None."""
    if not isinstance(fragment, str) or len(fragment) > MAX_FRAGMENT_LENGTH:
        return f"must be a GraphQL fragment on Event of at most {MAX_FRAGMENT_LENGTH:,} characters ({EXAMPLE})"
    try:
        definitions = parse(fragment, max_tokens=MAX_TOKENS).definitions
        if len(definitions) != 1 or not isinstance(definitions[0], FragmentDefinitionNode) \
                or definitions[0].type_condition.name.value != "Event":
            return f"must be one fragment on Event ({EXAMPLE})"
        document = parse(subscription_text(fragment), max_tokens=MAX_TOKENS)
    except GraphQLError as error:
        return f"is not a GraphQL fragment: {error.message}"
    except RecursionError:
        return "is nested too deeply"
    errors = validate(schema, document, [QueryLimits]) or validate(schema, document, specified_rules)
    if errors:
        return "; ".join(error.message for error in errors[:3])
    return None


@functools.lru_cache(maxsize=64)
def _document(fragment):
    return parse(subscription_text(fragment), max_tokens=MAX_TOKENS)


def fragment_body(schema, repo, subscription, event):
    """The body of a delivery of `event` to a subscription with a responseFragment (checked when it was made)."""
    executor = BudgetedExecutor.build(schema, _document(subscription.fragment),
                                      context_value={"repo": repo, "org": subscription.org})
    result = execute_subscription_event(executor.build_per_event_executor(event))
    return orjson.dumps(result_body(result))
