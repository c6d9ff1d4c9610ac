"""Webhook subscriptions and their delivery log (CONTRACT 15): the rules of a subscribe, and the operations the API
offers. What is sent, and when, is service.domain.webhook_outcomes and the dispatcher (service.delivery)."""
import base64
import binascii
import re
import secrets

from service.domain.events import reader_wanted
from service.domain.reads import MAX_PAGE_SIZE
from service.domain.validation import InvalidInput, Problems, quoted
from service.domain.webhook_addresses import AddressRefused, check_target
from service.errors import DeliveryNotFound, SubscriptionDisabled, SubscriptionNotFound
from service.interface.webhooks import SECRET_PREFIX
from service.storage.contract import SubscriptionSettings

SUBSCRIPTION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
SECRET_BYTES = (24, 64)
MADE_SECRET_BYTES = 32
# How long a replaced secret keeps signing beside the new one.
SECRET_GRACE_SECONDS = 24 * 3600
# Headers the service sets itself, which a subscription may not set.
RESERVED_HEADERS = re.compile(r"(host|content-.*|transfer-encoding|connection|webhook-.*)", re.IGNORECASE)
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}")
MAX_HEADERS, MAX_HEADER_VALUE = 50, 4096
# Visible ASCII, spaces and tabs: a value sent as is on every attempt (HTTP gives other characters no encoding).
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]{0,%d}" % MAX_HEADER_VALUE)
# Subscriptions an org may have. The dispatchers look at every subscription each second (300 cost ~3.5 % of a core
# at idle, the more the more), so one org cannot make the node's idle work grow without end; 100 is far more receivers
# than a site has, and one subscription serves any number of types.
MAX_SUBSCRIPTIONS = 100
SUBSCRIBED, UPDATED = "SUBSCRIBED", "UPDATED"


def made_secret():
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(MADE_SECRET_BYTES)).decode()


def subscribe(repo, org, data, policy, check_fragment, resolver=None):
    """Store the subscription `data` (SubscribeRequest_Input) for the org: SUBSCRIBED or UPDATED. Every problem is a
    BAD_USER_INPUT naming its field; `check_fragment(text)` says what is wrong with a responseFragment (None: nothing);
    the URL is checked against `policy` (webhook_addresses), its host resolved with `resolver`, nothing sent to it."""
    problems = Problems()
    identifier = data.get("subscriptionID")
    if not isinstance(identifier, str) or not SUBSCRIPTION_ID.fullmatch(identifier):
        problems.add("subscriptionID", "must be 1 to 64 ASCII letters, digits, '_' or '-'; got " + quoted(identifier))
    url = data.get("webhookUrl")
    try:
        check_target(url, policy, **({"resolver": resolver} if resolver else {}))
    except AddressRefused as refused:
        problems.add("webhookUrl", str(refused))
    headers = _checked_headers(data.get("webhookHeaders"), problems)
    types = _checked_types(data.get("types"), problems)
    fragment = data.get("responseFragment")
    if fragment is not None and (problem := check_fragment(fragment)) is not None:
        problems.add("responseFragment", problem)
    secret = data.get("secret")
    if secret is not None and not _is_secret(secret):
        problems.add("secret", f"must be {SECRET_PREFIX} then the standard base64 (padded) of {SECRET_BYTES[0]} to "
                               f"{SECRET_BYTES[1]} random bytes; leave it out to keep the current one (a new "
                               "subscription gets one made)")
    problems.raise_if_any()
    settings = SubscriptionSettings(identifier, url, headers, types, fragment, secret)
    created = repo.webhooks.subscribe(org, settings, made_secret(), SECRET_GRACE_SECONDS, MAX_SUBSCRIPTIONS)
    if created is None:  # a new id, and the org has as many subscriptions as it may: nothing was stored
        raise InvalidInput([("subscriptionID", f"is a new subscription, and your org has {MAX_SUBSCRIPTIONS}, the most "
                                               "it may have: remove one it no longer needs with webhookUnsubscribe "
                                               "(webhookSubscriptions lists them), or give the id of one to change it "
                                               "(one subscription may name any number of types)")])
    return SUBSCRIBED if created else UPDATED


def _checked_types(types, problems):
    """The entries of `types` once each, in their order (None: every type), held to the rules of the event readers'
    (service.domain.events.reader_wanted: at most MAX_TYPES entries); stored once each, as the dispatcher reads a
    subscription's types every time it looks at it."""
    if reader_wanted(types, problems) is None:
        return None  # every type, or refused
    return list(dict.fromkeys(entry for entry in types if isinstance(entry, str)))  # the others are refused


def _checked_headers(headers, problems):
    if headers is None:
        return {}
    field = "webhookHeaders"
    if not isinstance(headers, dict):
        problems.add(field, f"must be an object of header names to string values; got {quoted(headers)}")
        return {}
    if len(headers) > MAX_HEADERS:
        problems.add(field, f"holds {len(headers)} headers, at most {MAX_HEADERS} are allowed")
    for name, value in headers.items():
        if not HEADER_NAME.fullmatch(name):
            problems.add(field, f"{quoted(name)} is not a header name")
        elif RESERVED_HEADERS.fullmatch(name):
            problems.add(field, f"may not set {name!r}: Host, Content-*, Transfer-Encoding, Connection and webhook-* "
                                "are the service's own")
        elif not isinstance(value, str) or not HEADER_VALUE.fullmatch(value):
            problems.add(field, f"the value of {name!r} must be a string of at most {MAX_HEADER_VALUE} printable ASCII "
                                f"characters (percent-encode others, as HTTP has no encoding for them); got "
                                f"{quoted(value)}")
    return dict(headers)


def _is_secret(secret):
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        return False
    text = secret[len(SECRET_PREFIX):]
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return base64.b64encode(key).decode() == text and SECRET_BYTES[0] <= len(key) <= SECRET_BYTES[1]


def _named(subscription_id):
    """The id, when a subscription could have it; else SubscriptionNotFound. An id outside the rule of subscribe names
    none, and the stores are never asked about it: the file backend could make no file name of `../x`, and PostgreSQL
    refuses a NUL in a text."""
    if not isinstance(subscription_id, str) or not SUBSCRIPTION_ID.fullmatch(subscription_id):
        raise SubscriptionNotFound(subscription_id)
    return subscription_id


def unsubscribe(repo, org, subscription_id):
    """Remove the subscription, its retries and its log; SubscriptionNotFound when there is none."""
    if not repo.webhooks.unsubscribe(org, _named(subscription_id)):
        raise SubscriptionNotFound(subscription_id)
    return "UNSUBSCRIBED"


def subscriptions(repo, org):
    return repo.webhooks.subscriptions(org)


def deliveries(repo, org, subscription_id, first=100, before=None):
    """The subscription's logged deliveries, newest event first, below `before`; SubscriptionNotFound."""
    problems = Problems()
    if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= MAX_PAGE_SIZE:
        problems.add("first", f"must be an integer from 1 to {MAX_PAGE_SIZE}; got {first!r}")
    if before is not None and (isinstance(before, bool) or not isinstance(before, int) or before < 1):
        problems.add("before", f"must be a seq, 1 or more; got {before!r}")
    problems.raise_if_any()
    found = repo.webhooks.deliveries(org, _named(subscription_id), first, before)
    if found is None:
        raise SubscriptionNotFound(subscription_id)
    return found


def redeliver(repo, org, subscription_id, seq):
    """Send a logged delivery again now (its attempts count on); DeliveryNotFound when the log has none for `seq`,
    SubscriptionDisabled when the subscription is disabled (subscribe again first)."""
    _named(subscription_id)
    found = {subscription.id: subscription for subscription in repo.webhooks.subscriptions(org)}
    subscription = found.get(subscription_id)
    if subscription is None:
        raise SubscriptionNotFound(subscription_id)
    if not subscription.enabled:
        raise SubscriptionDisabled(subscription_id, subscription.disabled_reason)
    delivery = repo.webhooks.redeliver(org, subscription_id, seq)
    if delivery is None:
        raise DeliveryNotFound(subscription_id, seq)
    return delivery
