"""Webhooks delivered by the server itself (CONTRACT 15), on both backends: the test double (ThreadedServer, its
dispatcher running) sends to the receiver fixture of service.testing on 127.0.0.1, which checks each signature with the
`standardwebhooks` library. What is sent and with which headers; which events (types, after the subscribe answer,
not while disabled); retries with one webhook-id; 410, 429 with Retry-After, redirects, timeouts; a retrying event
does not hold back the next; the secret's rotation; FAILING; the log and redelivery; unsubscribe and reset."""
import base64
import gzip
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from service.client import Client, ClientError
from service.testing import ThreadedServer
from service.testing.webhook_receiver import WebhookReceiver
from support.waiting import wait_until
from support.tokens import OTHER_TOKEN, TOKEN, TOKENS

FRAGMENT = "fragment Change on Event { seq type id station { name revision } }"


# The `server` and `client` fixtures: tests/delivery/conftest.py.
WEBHOOK_TIMEOUT_SECONDS = 1.0


@pytest.fixture
def receiver():
    with WebhookReceiver() as receiver:
        yield receiver


def station(client, identifier, name="Press", comment=None):
    client.create_station({"id": identifier, "name": name}, comment=comment)


def delivery_of(client, seq, subscription="mes", state=None):
    """The logged delivery of `seq` (once it is in `state`, when given)."""
    def logged():
        found = [delivery for delivery in client.webhook_deliveries(subscription) if delivery["seq"] == seq]
        return found[0] if found and (state is None or found[0]["state"] == state) else None
    return wait_until(logged)


def test_each_event_after_the_subscribe_is_posted_signed_with_its_envelope(client, receiver):
    station(client, "before")  # committed before the subscribe answer: not sent
    assert client.webhook_subscribe("mes", receiver.url, {"Authorization": "Bearer abc"},
                                    secret=receiver.secret) == "SUBSCRIBED"
    station(client, "press_1", "Press 1", comment="the new line")
    station(client, "press_1", "Press one")
    first, second = receiver.wait_for(2)
    assert [first.id, second.id] == ["evt_default_2", "evt_default_3"]
    assert first.verified and second.verified
    assert first.json == {"type": "station.created", "timestamp": first.json["timestamp"],
                          "data": {"seq": 2, "kind": "station", "id": "press_1", "revision": 1, "change": "CREATED",
                                   "name": "Press 1", "author": "env-1", "comment": "the new line"}}
    assert second.json["type"] == "station.updated" and second.json["data"]["seq"] == 3
    headers = first.headers
    assert headers["authorization"] == "Bearer abc" and headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(first.body)) and "transfer-encoding" not in headers
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
    assert delivery_of(client, 3, state="SUCCEEDED")["attempts"] == 1


def test_types_choose_the_events_and_a_fragment_shapes_the_body(client, receiver):
    client.webhook_subscribe("mes", receiver.url, types=["process.*", "station.updated"], fragment=FRAGMENT,
                             secret=receiver.secret)
    station(client, "press_1", "Press 1")
    station(client, "press_1", "Press one")
    [delivery] = receiver.wait_for(1)
    assert delivery.verified and delivery.id == "evt_default_2"
    assert delivery.json == {"data": {"events": {"seq": 2, "type": "station.updated", "id": "press_1",
                                                 "station": {"name": "Press one", "revision": 2}}}}
    assert [logged["seq"] for logged in client.webhook_deliveries("mes")] == [2]


def test_a_failed_delivery_is_retried_with_its_webhook_id_and_does_not_hold_back_the_next(server, client, receiver):
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    receiver.fail(status=500)
    station(client, "press_1")
    failed = delivery_of(client, 1, state="PENDING")
    wait_until(lambda: delivery_of(client, 1)["attempts"] == 1)
    station(client, "press_2")
    [later] = receiver.wait_for(1)
    assert later.id == "evt_default_2"  # the retrying event did not hold it back
    failed = delivery_of(client, 1)
    assert (failed["state"], failed["lastStatus"], failed["lastError"]) == ("PENDING", 500, "HTTP 500")
    assert failed["nextAttemptAt"] > failed["lastAttemptAt"]
    delivery_of(client, 2, state="SUCCEEDED")  # its answer recorded: only the retry is pending
    assert server.deliver_due() == 1
    assert [delivery.id for delivery in receiver.wait_for(2)] == ["evt_default_2", "evt_default_1"]
    assert [delivery.id for delivery in receiver.deliveries] == ["evt_default_1", "evt_default_2", "evt_default_1"]
    assert delivery_of(client, 1, state="SUCCEEDED")["attempts"] == 2


def test_after_the_last_retry_the_delivery_is_failed(server, client, receiver):
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    receiver.fail(status=502, times=3)
    station(client, "press_1")
    for attempts in (1, 2):
        wait_until(lambda: delivery_of(client, 1)["attempts"] == attempts)
        server.deliver_due()
    failed = delivery_of(client, 1, state="FAILED")
    assert (failed["attempts"], failed["nextAttemptAt"]) == (3, None)  # WEBHOOK_RETRY_SECONDS has two delays
    assert len(receiver.deliveries) == 3


def test_410_disables_the_subscription_until_it_subscribes_again(client, receiver):
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    receiver.fail(status=410)
    station(client, "press_1")
    delivery_of(client, 1, state="FAILED")
    [subscription] = client.webhook_subscriptions()
    assert subscription["disabledReason"] == "GONE" and subscription["disabledAt"] is not None
    station(client, "press_2")  # committed while disabled: neither sent nor logged
    with pytest.raises(ClientError) as refused:
        client.webhook_redeliver("mes", 1)
    assert refused.value.code == "CONFLICT"
    assert client.webhook_subscribe("mes", receiver.url) == "UPDATED"
    station(client, "press_3")
    [delivery] = receiver.wait_for(1)
    assert delivery.id == "evt_default_3" and delivery.verified  # the secret was kept
    assert [logged["seq"] for logged in client.webhook_deliveries("mes")] == [3, 1]
    assert client.webhook_subscriptions()[0]["disabledAt"] is None


def test_429_and_503_are_retried_after_their_retry_after(client, receiver):
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    receiver.fail(status=429, retry_after=7)
    station(client, "press_1")
    wait_until(lambda: delivery_of(client, 1)["attempts"] == 1)
    logged = delivery_of(client, 1)
    delay = _seconds(logged["nextAttemptAt"]) - _seconds(logged["lastAttemptAt"])
    assert 6.9 <= delay <= 7.5  # not the schedule's 60 s


def test_redirects_are_not_followed_and_timeouts_end_an_attempt(client, receiver):
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    receiver.redirect("http://169.254.169.254/latest/meta-data")
    station(client, "press_1")
    wait_until(lambda: delivery_of(client, 1)["attempts"] == 1)
    redirected = delivery_of(client, 1)
    assert redirected["state"] == "PENDING" and redirected["lastStatus"] == 302
    assert "not followed" in redirected["lastError"]
    receiver.hang(seconds=30)
    started = time.monotonic()
    station(client, "press_2")
    wait_until(lambda: delivery_of(client, 2)["attempts"] == 1)
    assert time.monotonic() - started < 10  # WEBHOOK_TIMEOUT_SECONDS is 1
    timed_out = delivery_of(client, 2)
    assert timed_out["lastStatus"] is None and "no answer within 1 s" in timed_out["lastError"]
    assert len(receiver.deliveries) == 2  # neither the redirect's target nor a second try was sent anything


def test_a_changed_secret_signs_beside_the_old_one(client, receiver):
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    new_secret = "whsec_" + base64.b64encode(b"n" * 32).decode()
    assert client.webhook_subscribe("mes", receiver.url, secret=new_secret) == "UPDATED"
    station(client, "press_1")
    [delivery] = receiver.wait_for(1)
    assert delivery.verified  # the old secret still verifies
    assert len(delivery.signature.split(" ")) == 2
    Webhook(new_secret).verify(delivery.body, delivery.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + base64.b64encode(b"x" * 32).decode()).verify(delivery.body, delivery.headers)
    assert client.webhook_subscriptions()[0]["secret"] == new_secret


def test_a_subscription_failing_for_days_is_disabled(backend, tmp_path, receiver):
    config = {**backend.settings(), "API_TOKENS": TOKENS, "WEBHOOK_FAILING_AFTER_SECONDS": 0.5,
              "WEBHOOK_RETRY_SECONDS": "0.2,0.2,0.2,0.2,0.2,0.2"}
    with ThreadedServer(token=TOKEN, data_dir=tmp_path / "data", config=config) as server, \
            Client(server.url, TOKEN, backoff=0) as client:
        client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
        receiver.fail(status=500, times=100)
        station(client, "press_1")
        wait_until(lambda: client.webhook_subscriptions()[0]["disabledReason"] == "FAILING")
        assert delivery_of(client, 1)["state"] == "FAILED"


def test_the_log_pages_newest_first_and_redelivers(client, receiver):
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    for number in range(5):
        station(client, f"press_{number}")
    receiver.wait_for(5)
    assert [logged["seq"] for logged in client.webhook_deliveries("mes", first=2, before=4)] == [3, 2]
    assert client.webhook_redeliver("mes", 2)["state"] == "PENDING"
    assert receiver.wait_for(6)[-1].id == "evt_default_2"
    for missing in (("mes", 99), ("nope", 1)):
        with pytest.raises(ClientError) as refused:
            client.webhook_redeliver(*missing)
        assert refused.value.code == "NOT_FOUND"


def test_unsubscribe_stops_sending_and_drops_the_log_and_orgs_are_apart(server, client, receiver):
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    with Client(server.url, OTHER_TOKEN, backoff=0) as other:
        assert other.webhook_subscriptions() == []
        with pytest.raises(ClientError) as refused:
            other.webhook_unsubscribe("mes")
        assert refused.value.code == "NOT_FOUND"
    receiver.fail(status=500)
    station(client, "press_1")
    wait_until(lambda: delivery_of(client, 1)["attempts"] == 1)
    assert client.webhook_unsubscribe("mes") == "UNSUBSCRIBED"
    assert server.deliver_due() == 0
    with pytest.raises(ClientError):
        client.webhook_deliveries("mes")
    station(client, "press_2")
    time.sleep(1.5)
    assert len(receiver.deliveries) == 1


def test_a_reset_or_a_restore_removes_subscriptions_and_a_snapshot_holds_none(server, client, receiver):
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    station(client, "press_1")
    receiver.wait_for(1)
    server.reset()
    assert client.webhook_subscriptions() == []
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    station(client, "press_2")
    archive = server.snapshot()
    assert receiver.secret.encode() not in gzip.decompress(archive)
    server.restore(archive)
    assert client.webhook_subscriptions() == []
    assert client.get_station("press_2")["name"] == "Press"


def test_while_nothing_is_subscribed_commits_do_not_wake_the_dispatcher_and_a_new_subscription_is_served(
        server, client, receiver, monkeypatch):
    """No org subscribed: nothing a commit adds can be due, so the dispatcher does not look at what is due on each
    commit (nor every second); a subscription made then has its first event sent as usual."""
    webhooks = server.app.extensions["webhooks"].repo.webhooks
    looks, real_claim = [], webhooks.claim
    monkeypatch.setattr(webhooks, "claim", lambda *args: looks.append(args) or real_claim(*args))
    for number in range(10):
        station(client, f"idle_{number}")
    time.sleep(1.5)
    assert looks == []
    client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
    station(client, "press_1")
    [delivery] = receiver.wait_for(1)
    assert delivery.json["data"]["id"] == "press_1" and looks


def _seconds(iso):
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
