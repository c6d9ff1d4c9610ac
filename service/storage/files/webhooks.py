"""The file backend's webhooks (CONTRACT 15), under `<data>/webhooks/<org>/`:

    <subscription>/subscription.json     its settings, `loggedThrough` (its cursor over the org's events), its
                                         failures, and a token that a new subscription of the same id does not share
    <subscription>/deliveries/<seq>.json the log: one file per event logged for it
    <subscription>/pending/<seq>-<due>   one empty file per PENDING delivery, named with its due time (milliseconds):
                                         a listing says what is due without reading the log
    <subscription>.state.lock            held for each short read-modify-write of the above
    <subscription>.attempt.lock          held by the claim, for as long as the attempt lasts: one attempt at a time
                                         per subscription across the worker processes; the kernel releases it when
                                         its process dies, so another worker claims the subscription at once
    subscribe.lock                       held by a subscribe while it counts the org's subscriptions and makes one, so
                                         that two workers cannot both make the last one the org may have

What a subscribe answers is fsynced. The dispatcher's own bookkeeping (the cursor, the log, the markers) is written
whole but not synced: a power cut may take back what it logged or recorded since, and the deliveries concerned are
then attempted again (at least once allows that), never lost, since the event log itself is synced.
"""
import contextlib
import os
import secrets
import shutil
from dataclasses import replace

import orjson

from service.errors import StorageBusy, disk_errors
from service.interface.kinds import SINGULAR
from service.storage.common.disk import DiskLock, atomic_write_bytes, lock, numbered_files, write_unsynced
from service.storage.contract.webhooks import (
    Claim, Delivery, DeliveryState, Subscription, iso_of)
from service.storage.files.names import SAFE_NAME, id_to_name, name_to_id

SUBSCRIPTION = "subscription.json"
DELIVERIES, PENDING = "deliveries", "pending"
DELIVERY_SUFFIX = ".json"
# Events logged for one subscription in one claim at most; the next claim logs the rest.
LOG_PAGE = 1000


class FileWebhookStore:
    """Webhook subscriptions and deliveries as files (service.storage.contract.webhooks.WebhookStore)."""

    def __init__(self, root, events, clock):
        self.root = root
        self.events = events
        self.clock = clock

    # -- subscriptions -------------------------------------------------------------------------------------------------

    def subscribe(self, org, settings, new_secret, grace_seconds, max_subscriptions):
        directory = self._directory(org, settings.id)
        with lock(directory.parent / "subscribe"), self._state_lock(org, settings.id):
            stored = _read(directory / SUBSCRIPTION)
            if stored is None and self._count(org) >= max_subscriptions:
                return None
            record = dict(stored or {"createdAt": iso_of(self.clock()), "token": secrets.token_hex(8)})
            record.update(url=settings.url, headers=settings.headers, types=settings.types, fragment=settings.fragment)
            secret = settings.secret or (stored or {}).get("secret") or new_secret
            if stored is not None and secret != stored["secret"]:
                record.update(oldSecret=stored["secret"], oldSecretUntil=self.clock() + grace_seconds)
            record["secret"] = secret
            if stored is None or stored.get("disabledAt"):
                record["loggedThrough"] = self.events.bounds(org).latest
            record.update(disabledAt=None, disabledReason=None, failingSince=None)
            with disk_errors():
                (directory / PENDING).mkdir(parents=True, exist_ok=True)
                (directory / DELIVERIES).mkdir(exist_ok=True)
                atomic_write_bytes(directory / SUBSCRIPTION, orjson.dumps(record))
        return stored is None

    def unsubscribe(self, org, subscription_id):
        directory = self._directory(org, subscription_id)
        with self._state_lock(org, subscription_id):
            if not (directory / SUBSCRIPTION).exists():
                return False
            with disk_errors():
                os.unlink(directory / SUBSCRIPTION)  # the commit: what is left is no subscription's
            shutil.rmtree(directory, ignore_errors=True)
        return True

    def _count(self, org):
        # A folder without its subscription.json is what a crashed unsubscribe left, or a subscribe that never was.
        folder = self.root / _name(org)
        return sum((folder / name / SUBSCRIPTION).exists() for name in self._names(folder))

    def subscriptions(self, org):
        found = []
        for name in self._names(self.root / _name(org)):
            record = _read(self.root / _name(org) / name / SUBSCRIPTION)
            if record is not None:
                found.append(self._subscription(org, name_to_id(name), record))
        return sorted(found, key=lambda subscription: subscription.id)

    def deliveries(self, org, subscription_id, first, before):
        directory = self._directory(org, subscription_id)
        if not (directory / SUBSCRIPTION).exists():
            return None
        logged = numbered_files(directory / DELIVERIES, DELIVERY_SUFFIX)
        seqs = sorted((seq for seq in logged if before is None or seq < before), reverse=True)
        found = (_read_delivery(directory, seq) for seq in seqs)
        return [delivery for delivery in found if delivery is not None][:first]

    def redeliver(self, org, subscription_id, seq):
        directory = self._directory(org, subscription_id)
        with self._state_lock(org, subscription_id):
            delivery = _read_delivery(directory, seq) if (directory / SUBSCRIPTION).exists() else None
            if delivery is None:
                return None
            delivery = self._write_delivery(directory, delivery, state=DeliveryState.PENDING, due=self.clock(),
                                            redeliveries=delivery.redeliveries + 1)
        self.events.ring()  # the dispatchers wake
        return delivery

    # -- claims --------------------------------------------------------------------------------------------------------

    def subscribed(self):
        # A subscription's folder is there from its subscribe to its unsubscribe.
        return any(self._names(self.root / org_name) for org_name in self._names(self.root))

    def claim(self, limit, rules):
        claims = []
        for org_name in self._names(self.root):
            for name in self._names(self.root / org_name):
                if len(claims) >= limit:
                    return claims
                attempt = DiskLock(f"{self.root / org_name / name}.attempt.lock", 0)
                try:
                    attempt.acquire()
                except StorageBusy:
                    continue  # another claim holds it
                claim = self._take_due(name_to_id(org_name), name_to_id(name), rules, attempt)
                if claim is None:
                    attempt.release()
                else:
                    claims.append(claim)
        return claims

    def finish(self, claim, outcome, rules, claim_next=True):
        subscription, (attempt, token) = claim.subscription, claim.hold
        org, identifier = subscription.org, subscription.id
        directory = self._directory(org, identifier)
        with self._state_lock(org, identifier):
            record = _read(directory / SUBSCRIPTION)
            if record is None or record["token"] != token or record.get("disabledAt"):
                attempt.release()
                return None  # unsubscribed (and perhaps subscribed again) meanwhile
            delivery = _read_delivery(directory, claim.delivery.seq) or claim.delivery
            now = self.clock()
            state, due = outcome.state, outcome.retry_in and now + outcome.retry_in
            if delivery.redeliveries != claim.delivery.redeliveries:
                state, due = DeliveryState.PENDING, now  # redelivered during the attempt: sent again, as asked
            self._write_delivery(directory, delivery, state, due, attempts=delivery.attempts + 1,
                                 last_status=outcome.status, last_error=outcome.error, last_attempt_at=iso_of(now))
            succeeded = outcome.state is DeliveryState.SUCCEEDED
            failing_since = None if succeeded else record.get("failingSince") or now
            disable = outcome.disable
            if disable is not None or failing_since != record.get("failingSince"):
                record["failingSince"] = failing_since
                if disable is not None:
                    self._disable(directory, record, disable)
                with disk_errors():
                    write_unsynced(directory / SUBSCRIPTION, orjson.dumps(record))
            if claim_next and disable is None:
                following = self._due(org, identifier, directory, record, rules)
                if following is not None:
                    return replace(following, hold=claim.hold)
        attempt.release()
        return None

    def release(self, claim):
        claim.hold[0].release()

    def pending_count(self):
        return sum(len(_markers(self.root / org_name / name))
                   for org_name in self._names(self.root) for name in self._names(self.root / org_name))

    def make_due_now(self):
        made = 0
        for org_name in self._names(self.root):
            for name in self._names(self.root / org_name):
                org, identifier = name_to_id(org_name), name_to_id(name)
                directory = self.root / org_name / name
                with self._state_lock(org, identifier):
                    for seq, _due in _markers(directory):
                        with disk_errors():
                            _set_marker(directory, seq, self.clock())
                        made += 1
        self.events.ring()
        return made

    # -- upkeep (the events' pruning, the repository's sweep, test mode) -----------------------------------------------

    def oldest_needed(self, org):
        """The oldest seq of the org's events a subscription may still send: a pending delivery, or the first event
        after an enabled subscription's cursor; None when none."""
        needed = []
        for name in self._names(self.root / _name(org)):
            directory = self.root / _name(org) / name
            record = _read(directory / SUBSCRIPTION)
            if record is not None and not record.get("disabledAt"):
                needed.append(record["loggedThrough"] + 1)
            needed += [seq for seq, _due in _markers(directory)]
        return min(needed, default=None)

    def prune(self):
        """Remove the deliveries of events no longer kept (never a pending one); how many."""
        removed = 0
        for org_name in self._names(self.root):
            oldest = self.events.bounds(name_to_id(org_name)).oldest
            for name in self._names(self.root / org_name):
                directory = self.root / org_name / name
                pending = {seq for seq, _due in _markers(directory)}
                for seq in numbered_files(directory / DELIVERIES, DELIVERY_SUFFIX):
                    if seq < oldest and seq not in pending:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(directory / DELIVERIES / _seq_name(seq))
                            removed += 1
        return removed

    def remove_all(self):
        shutil.rmtree(self.root, ignore_errors=True)

    # -- inside a claim ------------------------------------------------------------------------------------------------

    def _take_due(self, org, identifier, rules, attempt):
        directory = self._directory(org, identifier)
        with self._state_lock(org, identifier):
            record = _read(directory / SUBSCRIPTION)
            if record is None or record.get("disabledAt"):
                return None
            claim = self._due(org, identifier, directory, record, rules)
        return None if claim is None else replace(claim, hold=(attempt, record["token"]))

    def _due(self, org, identifier, directory, record, rules):
        """(Under the state lock) the lowest-seq due delivery as a Claim without its hold, or None; the events after the
        cursor are logged first when none is due."""
        now, logged = self.clock(), {}
        due = [seq for seq, at in _markers(directory) if at <= now]
        if not due:  # the events logged before come first in seq order: log more only when none of them is due
            logged = self._log_new_events(org, directory, record, rules.wanted_of(record.get("types")))
            now = self.clock()
            due = [seq for seq, at in _markers(directory) if at <= now]
        delivery = _read_delivery(directory, min(due)) if due else None
        if delivery is None:
            return None
        event = logged.get(delivery.seq)
        if event is None:
            found = self.events.read(org, delivery.seq - 1, 1)
            event = found[0] if found and found[0].seq == delivery.seq else None
        return Claim(self._subscription(org, identifier, record), delivery, event, None)

    def _log_new_events(self, org, directory, record, wanted):
        """Log the events after the cursor (a page at most) as PENDING deliveries due now; {seq: event} of those."""
        page = self.events.read(org, record["loggedThrough"], LOG_PAGE)
        for event in page:
            if (wanted is None or (event.kind, event.change) in wanted) and not \
                    (directory / DELIVERIES / _seq_name(event.seq)).exists():
                kind = f"{SINGULAR[event.kind]}.{event.change.lower()}"
                self._write_delivery(directory, Delivery(event.seq, kind, DeliveryState.PENDING),
                                     DeliveryState.PENDING, self.clock(), fresh=True)
        if page:
            record["loggedThrough"] = page[-1].seq
            with disk_errors():
                write_unsynced(directory / SUBSCRIPTION, orjson.dumps(record))
        return {event.seq: event for event in page}

    @staticmethod
    def _write_delivery(directory, delivery, state, due, fresh=False, **changes):
        """Write the delivery in `state` (due at `due` when PENDING), with its marker to match (`fresh`: it has none
        yet); the new Delivery."""
        pending = state is DeliveryState.PENDING
        delivery = replace(delivery, state=state, next_attempt_at=iso_of(due) if pending else None, **changes)
        with disk_errors():
            write_unsynced(directory / DELIVERIES / _seq_name(delivery.seq), orjson.dumps(_delivery_json(delivery)))
            _set_marker(directory, delivery.seq, due if pending else None, fresh)
        return delivery

    def _disable(self, directory, record, reason):
        record.update(disabledAt=iso_of(self.clock()), disabledReason=reason)
        for seq, _due in _markers(directory):
            delivery = _read_delivery(directory, seq)
            if delivery is not None:
                self._write_delivery(directory, delivery, DeliveryState.FAILED, None)

    # -- names ---------------------------------------------------------------------------------------------------------

    def _directory(self, org, subscription_id):
        return self.root / _name(org) / id_to_name(subscription_id)

    def _state_lock(self, org, subscription_id):
        return lock(self._directory(org, subscription_id).with_suffix(".state"))

    @staticmethod
    def _names(directory):
        try:
            with os.scandir(directory) as entries:
                return sorted(entry.name for entry in entries if entry.is_dir() and SAFE_NAME.fullmatch(entry.name))
        except FileNotFoundError:
            return []

    def _subscription(self, org, identifier, record):
        old_secret = record.get("oldSecret") if (record.get("oldSecretUntil") or 0) > self.clock() else None
        return Subscription(org, identifier, record["url"], record["headers"], record["types"], record["fragment"],
                            record["secret"], old_secret, record["createdAt"], record.get("disabledAt"),
                            record.get("disabledReason"), record.get("failingSince"))


def _name(org):
    return id_to_name(org)


def _seq_name(seq):
    return f"{seq:012d}{DELIVERY_SUFFIX}"


def _read(path):
    """A JSON file's value, or None when it is missing or not whole (a crash before its first sync)."""
    try:
        with open(path, "rb") as handle:
            return orjson.loads(handle.read())
    except (FileNotFoundError, NotADirectoryError, orjson.JSONDecodeError):
        return None


def _delivery_json(delivery):
    return {"seq": delivery.seq, "type": delivery.type, "state": delivery.state.value, "attempts": delivery.attempts,
            "lastStatus": delivery.last_status, "lastError": delivery.last_error,
            "lastAttemptAt": delivery.last_attempt_at, "nextAttemptAt": delivery.next_attempt_at,
            "redeliveries": delivery.redeliveries}


def _read_delivery(directory, seq):
    value = _read(directory / DELIVERIES / _seq_name(seq))
    if value is None:
        return None
    return Delivery(value["seq"], value["type"], DeliveryState(value["state"]), value["attempts"], value["lastStatus"],
                    value["lastError"], value["lastAttemptAt"], value["nextAttemptAt"],
                    value.get("redeliveries", 0))  # (none in a log written before it was counted)


def _markers(directory):
    """[(seq, due time in seconds)] of the subscription's PENDING deliveries."""
    try:
        with os.scandir(directory / PENDING) as entries:
            names = [entry.name.split("-") for entry in entries]
    except FileNotFoundError:
        return []
    return [(int(seq), int(due) / 1000) for seq, due in (name for name in names if len(name) == 2)]


def _set_marker(directory, seq, due, fresh=False):
    """The delivery `seq` is PENDING and due at `due` (seconds), or not PENDING (None); `fresh`: it had no marker."""
    for marked, at in [] if fresh else _markers(directory):
        if marked == seq:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / PENDING / f"{seq:012d}-{round(at * 1000):015d}")
    if due is not None:
        (directory / PENDING / f"{seq:012d}-{int(due * 1000):015d}").touch()
