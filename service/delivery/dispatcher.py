"""The webhook dispatcher of one worker process (CONTRACT 15): a thread that wakes when an event commits on any worker
or node (the event store's commit watcher), or a second has passed (a retry that came due, a redelivery), and claims
the deliveries due (service.storage.contract.webhooks) for its senders. While no org has a subscription, no commit
makes anything due: the thread then only looks every IDLE_CHECK_SECONDS whether one came, and commits do not wake
it (nor does it hold a commit watcher). It sends at most WIS_WEBHOOK_CONCURRENCY attempts at once in this process,
one per subscription across every process and node. A sender that finishes an attempt goes on with its subscription's
next due delivery, then with any other subscription's, so that a busy subscription is not claimed anew for each
event; a hanging receiver holds one sender for its timeout, never the others.

Nothing here is in memory that a killed process would lose: the claim is the store's (a lease or an flock), and
what is due is the store's event log and delivery log.
"""
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import NamedTuple

from service.domain.events import wanted_of
from service.domain.validation import Problems
from service.domain.webhook_addresses import AddressPolicy, AddressRefused, check_target, resolve
from service.domain.webhook_outcomes import (
    FAILING_AFTER_SECONDS, AttemptResult, Failing, envelope_body, outcome_of, request_headers)
from service.storage.contract import DeliveryState, DispatchRules, AttemptOutcome
from service.delivery.sender import Sender

log = logging.getLogger(__name__)

# The longest the thread waits between two looks at what is due (a retry starts within this of its time), and how often
# it looks whether it is to stop meanwhile.
POLL_SECONDS = 1.0
STOP_CHECK_SECONDS = 0.25
# A claim's lease lasts the attempt's timeout and this much more (shared backend: a dead node's claim passes then).
LEASE_MARGIN_SECONDS = 5.0
# While no org has a subscription: how often the thread looks whether one came (a first event is then sent within
# this and a look at what is due, well within CONTRACT 15's second).
IDLE_CHECK_SECONDS = 0.5
# How often the gauge of pending deliveries is counted again.
PENDING_EVERY_SECONDS = 10.0
# The lastError of an attempt that failed inside the service (its log has the traceback).
INTERNAL_FAILURE = "the service failed while making the attempt (its log says why)"


class DispatchSettings(NamedTuple):
    timeout: float
    schedule: tuple
    policy: AddressPolicy
    concurrency: int
    failing_after_seconds: float = FAILING_AFTER_SECONDS

    @classmethod
    def of(cls, config):
        return cls(config["WEBHOOK_TIMEOUT_SECONDS"], tuple(config["WEBHOOK_RETRY_SECONDS"]),
                   AddressPolicy(config["WEBHOOK_ALLOW_HTTP"], tuple(config["WEBHOOK_ALLOW_NETS"])),
                   config["WEBHOOK_CONCURRENCY"],
                   config.get("WEBHOOK_FAILING_AFTER_SECONDS", FAILING_AFTER_SECONDS))


class NoMetrics:
    """What the dispatcher tells the metrics (service.web.observability.WebhookMetrics), for an embedding without."""

    def attempted(self, kind): pass
    def emitted(self): pass
    def delivered_after(self, seconds): pass
    def disabled(self, reason): pass
    def pending(self, count): pass


class WebhookDispatcher:
    """Delivers the webhooks due, from a thread of this process, once started (`start`, `stop`)."""

    def __init__(self, repo, settings, render=None, metrics=None, resolver=resolve):
        """`render(subscription, event)`: the body of a subscription with a responseFragment."""
        self.repo, self.settings = repo, settings
        self._render, self._metrics, self.resolver = render, metrics or NoMetrics(), resolver
        self.rules = DispatchRules(lambda types: wanted_of(types, Problems()),
                                   settings.timeout + LEASE_MARGIN_SECONDS)
        self.sender = Sender(settings.timeout)
        self._lock = threading.Lock()
        self._pid = self._thread = self._pool = None
        self._busy = 0
        self._stopping = threading.Event()
        self._pending_counted = 0.0

    # -- lifetime ------------------------------------------------------------------------------------------------------

    def start(self):
        """Run the dispatcher in this process (once; a forked process starts its own)."""
        if self._pid == os.getpid():
            return  # the common case, every request of a process that serves: no lock
        with self._lock:
            if self._pid == os.getpid() or self._stopping.is_set():
                return
            self._pid = os.getpid()
            self._pool = ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="webhook sender")
            self._thread = threading.Thread(target=self._run, name="webhook dispatcher", daemon=True)
            self._thread.start()

    def stop(self, wait=True):
        """Claim nothing more; with `wait`, let the attempts in flight finish (their timeout at most) and end."""
        self._stopping.set()
        with self._lock:
            thread, pool = self._thread, self._pool
        if wait and thread is not None and pool is not None and self._pid == os.getpid():
            thread.join(STOP_CHECK_SECONDS + self.settings.timeout)
            pool.shutdown(wait=True)

    # -- the thread ----------------------------------------------------------------------------------------------------

    def _run(self):
        watcher, failing = None, False
        while not self._stopping.is_set():
            try:
                subscribed = self.repo.webhooks.subscribed()
                if subscribed and watcher is None:
                    watcher = self.repo.events.watcher()  # before the look at what is due: no commit falls between
                elif not subscribed and watcher is not None:
                    watcher.close()  # (a shared backend's watcher is a connection, its notifications unread meanwhile)
                    watcher = None
                if subscribed:
                    self.dispatch()
                self._count_pending()
                if failing:
                    log.warning("webhooks: the dispatcher works again")
                    failing = False
                if subscribed:
                    self._wait(watcher)
                else:
                    self._stopping.wait(IDLE_CHECK_SECONDS)
            except Exception as error:  # noqa: BLE001 (an engine's outage: try again every POLL_SECONDS)
                if not failing:
                    log.warning("webhooks: the dispatcher failed (%s); trying again every %g s", error, POLL_SECONDS)
                    failing = True
                if watcher is not None:
                    watcher.close()
                    watcher = None
                self._stopping.wait(POLL_SECONDS)
        if watcher is not None:
            watcher.close()

    def _wait(self, watcher):
        """Until a commit may have come on any worker or node, POLL_SECONDS have passed, or the dispatcher stops."""
        deadline = time.monotonic() + POLL_SECONDS
        while not self._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or watcher.wait(min(left, STOP_CHECK_SECONDS)):
                return

    def dispatch(self):
        """Claim what is due, up to the free senders, and hand each claim to one."""
        with self._lock:
            free = self.settings.concurrency - self._busy
        if free <= 0:
            return
        for claim in self.repo.webhooks.claim(free, self.rules):
            with self._lock:
                self._busy += 1
            self._pool.submit(self._send_all, claim)

    def _send_all(self, claim):
        """Attempt the claim, then its subscription's next due deliveries, then any other subscription's."""
        try:
            while claim is not None:
                claim = self.attempt(claim)
                if claim is None and not self._stopping.is_set():
                    claim = next(iter(self.repo.webhooks.claim(1, self.rules)), None)
        except Exception:  # noqa: BLE001 (a store failed: the lease passes, or the lock goes with the release)
            log.exception("webhooks: a sender failed")
            if claim is not None:
                self._release(claim)
        finally:
            with self._lock:
                self._busy -= 1

    def _release(self, claim):
        try:
            self.repo.webhooks.release(claim)
        except Exception:  # noqa: BLE001 (its lease passes by itself)
            log.warning("webhooks: releasing a claim failed; it passes with its lease")

    # -- one attempt ---------------------------------------------------------------------------------------------------

    def attempt(self, claim):
        """Send the claimed delivery, record what came of it; the next claim of the same subscription, or None."""
        delivery, event = claim.delivery, claim.event
        if event is None:
            outcome, kind = AttemptOutcome(DeliveryState.FAILED, None, "the event is no longer kept"), "expired"
        else:
            outcome, kind = self._outcome(claim)
        self._metrics.attempted(kind)
        if delivery.attempts == 0:
            self._metrics.emitted()
        if outcome.state is DeliveryState.SUCCEEDED:
            self._metrics.delivered_after(_since(event.timestamp))
        else:
            self._log_failure(claim, outcome)
        if outcome.disable is not None:
            self._metrics.disabled(outcome.disable)
        return self._finish(claim, outcome)

    # A failure of the service's own while it makes or records an attempt is a failed attempt too: recorded, the
    # delivery waits for its retry like any other; released unrecorded, it would be due again at once, sent again
    # every second for ever, and the subscription's later events never.

    def _outcome(self, claim):
        """(the AttemptOutcome, the metric's word) of an attempt at the claimed delivery."""
        try:
            return outcome_of(self._result(claim.subscription, claim.event), claim.delivery.attempts,
                              self._failing(claim), self.settings.schedule)
        except Exception:  # noqa: BLE001 (a defect of ours, or a library's on an answer nobody foresaw)
            self._log_internal(claim, "failed inside the service")
            return self._internal_failure(claim)

    def _finish(self, claim, outcome):
        """Record the outcome; the next claim of the same subscription, or None."""
        claim_next = not self._stopping.is_set()
        try:
            return self.repo.webhooks.finish(claim, outcome, self.rules, claim_next=claim_next)
        except Exception:  # noqa: BLE001 (a value the store cannot hold; an outage fails the second try too)
            self._log_internal(claim, "could not be recorded")
            return self.repo.webhooks.finish(claim, self._internal_failure(claim)[0], self.rules, claim_next=claim_next)

    def _internal_failure(self, claim):
        result = AttemptResult(failure=INTERNAL_FAILURE, failure_kind="internal")
        return outcome_of(result, claim.delivery.attempts, self._failing(claim), self.settings.schedule)

    def _failing(self, claim):
        return Failing(claim.subscription.failing_since, time.time(), self.settings.failing_after_seconds)

    @staticmethod
    def _log_internal(claim, what):
        subscription, delivery = claim.subscription, claim.delivery
        log.exception("webhook %r of org %r: attempt %d of event %d %s; recording a failed attempt instead",
                      subscription.id, subscription.org, delivery.attempts + 1, delivery.seq, what)

    def _result(self, subscription, event):
        try:
            target = check_target(subscription.url, self.settings.policy, self.resolver)
        except AddressRefused as refused:
            return AttemptResult(failure=f"webhookUrl {refused}", failure_kind="refused_address")
        if subscription.fragment is None:
            body = envelope_body(event)
        else:
            body = self._render(subscription, event)
        headers = request_headers(subscription, subscription.org, event.seq, body)
        return self.sender.send(target, headers, body)

    def _log_failure(self, claim, outcome):
        subscription, delivery = claim.subscription, claim.delivery
        then = (f"next attempt in {outcome.retry_in:.0f} s" if outcome.state is DeliveryState.PENDING else
                "no more attempts" + (f": the subscription is disabled ({outcome.disable})" if outcome.disable else ""))
        log.warning("webhook %r of org %r: attempt %d of event %d failed: %s; %s", subscription.id, subscription.org,
                    delivery.attempts + 1, delivery.seq, outcome.error, then,
                    extra={"subscription": subscription.id, "org": subscription.org, "seq": delivery.seq})

    def _count_pending(self):
        if time.monotonic() - self._pending_counted >= PENDING_EVERY_SECONDS:
            self._pending_counted = time.monotonic()
            self._metrics.pending(self.repo.webhooks.pending_count())


def _since(timestamp):
    """Seconds from an event's timestamp (ISO 8601 UTC) to now."""
    return max(time.time() - datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp(), 0.0)
