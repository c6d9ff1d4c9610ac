"""The storage contract of webhooks (CONTRACT 15): each org's subscriptions and the log of their deliveries, and the
claims through which the dispatchers of every worker and node attempt them, one at a time per subscription.

What is due is said by the event log itself: a subscription keeps a cursor, the seq through which the org's events
have been logged for it (at subscribe time: the org's latest seq). Whoever claims the subscription logs the events
after its cursor that it wants as PENDING deliveries, moves the cursor, and takes the lowest-seq delivery that is due.
A change's commit therefore writes nothing for webhooks, however many subscriptions there are, and an event committed
after the subscribe answer is due as surely as it is committed. The event log keeps every event a subscription may
still need (`EventStore.prune` asks `oldest_needed`).

A claim holds its subscription until it is finished or released: on the shared backend a lease (a row lock taken
with SKIP LOCKED for the claim's transaction only, then a time and a token on the row, so that no transaction is open
during the attempt, and a node that dies leaves the subscription to whoever claims it once the lease has passed); on
the file backend an flock that the kernel releases when its process dies.
"""
import enum
from datetime import datetime, timezone
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from service.storage.contract.events import Event


class DeliveryState(str, enum.Enum):
    PENDING = "PENDING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


# Why a subscription was disabled (disabledReason): its receiver answered 410, or every attempt failed for days.
GONE, FAILING = "GONE", "FAILING"


@dataclass(frozen=True)
class SubscriptionSettings:
    """What a subscribe stores: every setting, the secret None to keep the current one."""
    id: str
    url: str
    headers: dict
    types: list | None  # None: every type
    fragment: str | None
    secret: str | None


@dataclass(frozen=True)
class Subscription:
    """A subscription as stored; times as ISO 8601 UTC text, `failing_since` in seconds of the store's clock."""
    org: str
    id: str
    url: str
    headers: dict
    types: list | None
    fragment: str | None
    secret: str
    old_secret: str | None  # the secret before the last change, while it still signs beside the new one
    created_at: str
    disabled_at: str | None = None
    disabled_reason: str | None = None
    failing_since: float | None = None  # the first failed attempt since the last success

    @property
    def enabled(self):
        return self.disabled_at is None


@dataclass(frozen=True)
class Delivery:
    """One event for one subscription, as the delivery log keeps it."""
    seq: int
    type: str
    state: DeliveryState
    attempts: int = 0
    last_status: int | None = None
    last_error: str | None = None
    last_attempt_at: str | None = None
    next_attempt_at: str | None = None  # while PENDING
    # How many times a redelivery was asked for (not shown by the API): a `finish` that finds more than its claim read
    # leaves the delivery PENDING and due, as the redelivery asked during the attempt, and records the attempt.
    redeliveries: int = 0


@dataclass(frozen=True)
class Claim:
    """A delivery this dispatcher may attempt now, with its subscription and event (None once pruned); `hold` is the
    store's own (a lease token, a lock) and goes back with `finish` or `release`."""
    subscription: Subscription
    delivery: Delivery
    event: Event | None
    hold: object


@dataclass(frozen=True)
class AttemptOutcome:
    """What an attempt came to, as the domain decided it (service.domain.webhook_outcomes)."""
    state: DeliveryState
    status: int | None  # the HTTP status answered, if any
    error: str | None  # why it failed, for the log (None on success)
    retry_in: float | None = None  # seconds to the next attempt, while PENDING
    disable: str | None = None  # GONE or FAILING: disable the subscription now (its PENDING deliveries FAILED)


@dataclass(frozen=True)
class DispatchRules:
    """What the dispatcher hands the store with each claim: the (kind, change) pairs a subscription's `types` want
    (None: every event), and how long a claim holds its subscription."""
    wanted_of: Callable[[list | None], frozenset | None]
    lease_seconds: float


@runtime_checkable
class WebhookStore(Protocol):
    """Every org's webhook subscriptions and delivery logs (service.storage.files.webhooks,
    service.storage.shared.webhooks)."""

    def subscribe(self, org: str, settings: SubscriptionSettings, new_secret: str, grace_seconds: float,
                  max_subscriptions: int) -> bool | None:
        """Store the subscription (`new_secret` when it is new and names none), enabled; True when it was created,
        False when it replaced one; None, storing nothing, when it is new and the org has `max_subscriptions` already
        (counted and created under one lock of the org, on every worker and node). A changed secret keeps the old one
        signing for `grace_seconds`. Enabling it (new, or disabled) sets its cursor to the org's latest seq: the events
        committed after this answer are due."""

    def unsubscribe(self, org: str, subscription_id: str) -> bool:
        """Remove the subscription and its log (an attempt in flight is not recorded); False when there is none."""

    def subscriptions(self, org: str) -> list[Subscription]:
        """The org's subscriptions, by id."""

    def deliveries(self, org: str, subscription_id: str, first: int, before: int | None) -> list[Delivery] | None:
        """Up to `first` logged deliveries with seq below `before` (None: any), newest first; None when there is no
        such subscription."""

    def redeliver(self, org: str, subscription_id: str, seq: int) -> Delivery | None:
        """Make a logged delivery PENDING and due now, counting the redelivery (an attempt of it in flight is then
        recorded without changing that); None when the log has no such delivery."""

    def subscribed(self) -> bool:
        """True when any org has a subscription (enabled or not): without one, no commit makes anything due."""

    def claim(self, limit: int, rules: DispatchRules) -> list[Claim]:
        """Up to `limit` deliveries due now, each of a different enabled subscription that no other claim holds."""

    def finish(self, claim: Claim, outcome: AttemptOutcome, rules: DispatchRules, claim_next: bool = True) -> Claim | None:
        """Record the attempt's outcome (nothing when the subscription was removed or the claim lost meanwhile): a
        failure starts the subscription's `failing_since` unless it has one, a success clears it. A delivery redelivered
        since the claim read it stays PENDING and due (its attempt is counted). With `claim_next`, go on holding the
        subscription with its next due delivery, if any (else it is released)."""

    def release(self, claim: Claim) -> None:
        """Give the subscription back without an attempt (the dispatcher stops)."""

    def pending_count(self) -> int:
        """PENDING deliveries of every org (the metric)."""

    def make_due_now(self) -> int:
        """Test mode: every PENDING delivery is due now; how many."""


def iso_of(seconds):
    """A time in seconds since the epoch as the API shows times: `2024-05-01T12:00:00.123Z`; None stays None."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
