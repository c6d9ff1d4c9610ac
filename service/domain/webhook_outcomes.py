"""What an attempt to deliver a webhook sends, and what its answer means (CONTRACT 15): the Standard Webhooks headers,
then success on a 2xx, the subscription disabled on a 410, Retry-After honoured on a 429 or 503 (an hour at most), a
redirect not followed, and any other failure retried after the next delay of the schedule (with up to 20 % more, so
that the retries of many deliveries do not all come at once), FAILED after the last."""
import email.utils
import random
import time
from typing import NamedTuple

import orjson

from service.domain.events import envelope
from service.interface.webhooks import ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, message_id, signature_header
from service.storage.contract import FAILING, GONE, DeliveryState, AttemptOutcome

DEFAULT_RETRY_SECONDS = (5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)
MAX_RETRY_AFTER = 3600
JITTER = 0.2
# How much of a response's body the log keeps.
LOGGED_BODY = 1024
# A subscription whose every attempt failed for this long, none succeeding since the first, is disabled (FAILING).
FAILING_AFTER_SECONDS = 5 * 86400


class AttemptResult(NamedTuple):
    """What the receiver answered (status, Retry-After, Location, the start of its body), or why there was no answer:
    `failure` says it in words and `failure_kind` in one (timeout, connection, malformed, refused_address, internal)."""
    status: int | None = None
    retry_after: str | None = None
    location: str | None = None
    body: bytes = b""
    failure: str | None = None
    failure_kind: str | None = None
    in_allowed_net: bool = False


def request_headers(subscription, org, seq, body, now=None):
    """The headers of an attempt: the subscription's own, then the Standard Webhooks ones (the timestamp is now)."""
    msg_id, timestamp = message_id(org, seq), str(int(now if now is not None else time.time()))
    signing = [subscription.secret] + ([subscription.old_secret] if subscription.old_secret else [])
    return {**subscription.headers, "Content-Type": "application/json", ID_HEADER: msg_id,
            TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature_header(signing, msg_id, timestamp, body)}


def envelope_body(event):
    """The body of a subscription without a responseFragment: the event's envelope (CONTRACT 14)."""
    return orjson.dumps(envelope(event))


class Failing(NamedTuple):
    """Since when a subscription's attempts have all failed (None: its last attempt succeeded), the time now (both by
    the store's clock), and after how long of that it is disabled."""
    since: float | None
    now: float
    after_seconds: float = FAILING_AFTER_SECONDS


def outcome_of(result, attempts_before, failing, schedule=DEFAULT_RETRY_SECONDS, jitter=random.random):
    """(the AttemptOutcome to record, the metric's word for it) of an attempt that followed `attempts_before` others."""
    status = result.status
    if status is not None and 200 <= status < 300:
        return AttemptOutcome(DeliveryState.SUCCEEDED, status, None), "succeeded"
    error, kind = _error_of(result)
    if status == 410:
        return AttemptOutcome(DeliveryState.FAILED, status, error, disable=GONE), kind
    if failing.since is not None and failing.now - failing.since >= failing.after_seconds:
        return AttemptOutcome(DeliveryState.FAILED, status, error, disable=FAILING), kind
    attempts = attempts_before + 1
    if attempts > len(schedule):
        return AttemptOutcome(DeliveryState.FAILED, status, error), kind
    delay = schedule[attempts - 1] * (1 + JITTER * jitter())
    if status in (429, 503) and (after := retry_after_seconds(result.retry_after)) is not None:
        delay = after
    return AttemptOutcome(DeliveryState.PENDING, status, error, retry_in=delay), kind


def _error_of(result):
    """(lastError, the metric's word) of a failed attempt; lastError holds no NUL, which a receiver's body or Location
    may (PostgreSQL's text cannot hold it: the shared backend could not record the attempt)."""
    error, kind = _said(result)
    return (None if error is None else error.replace("\x00", "\ufffd")), kind


def _said(result):
    if result.status is None:
        return result.failure, result.failure_kind or "connection"
    if 300 <= result.status < 400:
        where = f" to {result.location[:200]}" if result.location and not result.in_allowed_net else ""
        return f"HTTP {result.status}: a redirect{where}, not followed", "redirect"
    kind = {410: "gone", 429: "rate_limited"}.get(result.status, "http_error")
    if result.in_allowed_net or not result.body:
        return f"HTTP {result.status}", kind
    return f"HTTP {result.status}: " + result.body[:LOGGED_BODY].decode("utf-8", "replace"), kind


def retry_after_seconds(value, now=None):
    """A Retry-After header's delay in seconds (a number, or an HTTP date), at most MAX_RETRY_AFTER; None when absent
    or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # HTTP's DIGIT: str.isdigit() alone also takes '²', which float() refuses
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return min(max(when - (now if now is not None else time.time()), 0.0), MAX_RETRY_AFTER)
