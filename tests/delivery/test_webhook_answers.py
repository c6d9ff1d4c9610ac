"""What a receiver's answer makes of an attempt (CONTRACT 15, docs/webhooks.md "Retries"), for the answers no HTTP
server library would send: a raw-socket receiver on 127.0.0.1 answers with the bytes a test gives. An answer that is
not HTTP, a Retry-After that only looks like a number and a failure inside the service are each a failed attempt,
logged with why and retried on the schedule, and the events after it still go out. The timeout runs to the end of the
answer's head: a head cut short by it is no answer, a whole 2xx head is a success whatever its body does."""
import socket
import threading
from typing import NamedTuple

import pytest

from service.delivery.dispatcher import INTERNAL_FAILURE
from service.delivery.sender import Sender
from service.domain.webhook_addresses import Target
from service.domain.webhook_outcomes import Failing, outcome_of, retry_after_seconds
from service.storage.contract import DeliveryState
from support.waiting import wait_until

OK = b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
# How long a raw receiver keeps a connection open, at most, after an answer a test stalls on (the stop ends it).
STALL_SECONDS = 30.0
# The `server` and `client` fixtures: tests/delivery/conftest.py.
WEBHOOK_TIMEOUT_SECONDS = 10.0
HEADS_BEYOND_LIMIT = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-Header-%d: a\r\n" % number for number in range(101))


class RawRequest(NamedTuple):
    head: bytes
    body: bytes

    @property
    def id(self):
        for line in self.head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"webhook-id":
                return value.strip().decode()
        return None


class Answer(NamedTuple):
    data: bytes
    stall: bool = False  # keep the connection open after `data` (until the receiver stops), instead of closing it
    hold: threading.Event | None = None  # send `data` only once this is set (at most STALL_SECONDS)


class RawReceiver:
    """A receiver on a free 127.0.0.1 port that answers each request with `answer_of(request)`, an Answer; records
    every request it read (`requests`, in order of arrival)."""

    def __init__(self, answer_of):
        self.answer_of = answer_of
        self.requests = []
        self._stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hooks"
        self._threads = [threading.Thread(target=self._accept, name="raw receiver", daemon=True)]

    def __enter__(self):
        self._threads[0].start()
        return self

    def __exit__(self, *exc_info):
        self._stopping.set()
        for thread in list(self._threads):
            thread.join(STALL_SECONDS)
        self._listener.close()

    def _accept(self):
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(connection,), name="raw receiver", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, connection):
        with connection:
            connection.settimeout(STALL_SECONDS)
            request = _read_request(connection)
            if request is None:
                return
            self.requests.append(request)
            answer = self.answer_of(request)
            if answer.hold is not None:
                answer.hold.wait(STALL_SECONDS)
            connection.sendall(answer.data)
            if answer.stall:
                self._stopping.wait(STALL_SECONDS)


def _read_request(connection):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += connection.recv(65536)
    return RawRequest(head, body)


def answering(first, then=Answer(OK)):
    """Answer the first event's every attempt with `first`, any other event's with `then`."""
    return lambda request: first if request.id == "evt_default_1" else then


def station(client, identifier):
    client.create_station({"id": identifier, "name": "Press"})


def logged(client, seq, condition):
    """The logged delivery of `seq`, once `condition(delivery)` holds."""
    def found():
        deliveries = [delivery for delivery in client.webhook_deliveries("mes") if delivery["seq"] == seq]
        return deliveries[0] if deliveries and condition(deliveries[0]) else None
    return wait_until(found)


def first_attempt(client, receiver):
    """Subscribe the receiver and commit a change: its delivery once attempted."""
    client.webhook_subscribe("mes", receiver.url)
    station(client, "press_1")
    return logged(client, 1, lambda delivery: delivery["attempts"] > 0)


def the_next_goes_out(client, receiver, sent=("evt_default_1", "evt_default_2")):
    """Commit a second change: it is delivered, whatever came of the first (a retrying event holds none back)."""
    station(client, "press_2")
    logged(client, 2, lambda delivery: delivery["state"] == "SUCCEEDED")
    assert [request.id for request in receiver.requests] == list(sent)


def _seconds(iso):
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("answer, error", [
    (b"HELLO\r\n\r\n", "the receiver's answer is not HTTP: its first line is 'HELLO'"),
    (HEADS_BEYOND_LIMIT + b"\r\n", "the receiver's answer is not HTTP: got more than 100 headers"),
    (b"HTTP/1.1 200 " + b"x" * 70000 + b"\r\n\r\n",
     "the receiver's answer is not HTTP: got more than 65536 bytes when reading status line"),
    (b"HTTP/2.0 200 OK\r\n\r\n", "the receiver's answer is not HTTP: its first line names the protocol 'HTTP/2.0'"),
], ids=["not-http", "101-headers", "long-line", "http-2"])
def test_an_answer_that_is_not_http_is_a_failed_attempt_and_the_next_event_goes_out(client, answer, error):
    with RawReceiver(answering(Answer(answer))) as receiver:
        failed = first_attempt(client, receiver)
        assert (failed["state"], failed["attempts"], failed["lastStatus"], failed["lastError"]) == \
            ("PENDING", 1, None, error)
        assert 55 < _seconds(failed["nextAttemptAt"]) - _seconds(failed["lastAttemptAt"]) < 75  # the schedule's 60 s
        the_next_goes_out(client, receiver)


def test_a_retry_after_that_is_no_ascii_number_is_the_schedule(client):
    assert (retry_after_seconds("\u00b2"), retry_after_seconds("\u0661\u0662"), retry_after_seconds(" 7 ")) == \
        (None, None, 7.0)
    unavailable = "HTTP/1.1 503 X\r\nRetry-After: \u00b2\r\nConnection: close\r\n\r\n".encode("latin-1")
    with RawReceiver(answering(Answer(unavailable))) as receiver:
        failed = first_attempt(client, receiver)
        assert (failed["state"], failed["lastStatus"], failed["lastError"]) == ("PENDING", 503, "HTTP 503")
        assert 55 < _seconds(failed["nextAttemptAt"]) - _seconds(failed["lastAttemptAt"]) < 75
        the_next_goes_out(client, receiver)


def test_a_failure_inside_the_service_is_a_failed_attempt_retried_on_the_schedule(server, client, monkeypatch):
    sender = server.app.extensions["webhooks"].sender
    real_send = sender.send

    def send(target, headers, body):
        if headers["webhook-id"] == "evt_default_1":
            raise RuntimeError("a defect nobody foresaw")
        return real_send(target, headers, body)
    monkeypatch.setattr(sender, "send", send)
    with RawReceiver(answering(Answer(OK))) as receiver:
        failed = first_attempt(client, receiver)
        assert (failed["state"], failed["attempts"], failed["lastStatus"], failed["lastError"]) == \
            ("PENDING", 1, None, INTERNAL_FAILURE)
        the_next_goes_out(client, receiver, ["evt_default_2"])



def test_a_body_the_store_cannot_hold_is_logged_readable(server, client, monkeypatch):
    """A NUL in the logged body: PostgreSQL's text cannot hold it, and the attempt went unrecorded (then sent again at
    once, for ever)."""
    sender = server.app.extensions["webhooks"].sender
    real_send = sender.send
    # As from an address outside WIS_WEBHOOK_ALLOW_NETS, whose answer's body the log keeps.
    monkeypatch.setattr(sender, "send", lambda *args: real_send(*args)._replace(in_allowed_net=False))
    answer = b"HTTP/1.1 500 X\r\nContent-Length: 5\r\nConnection: close\r\n\r\na\x00b\xffc"
    with RawReceiver(answering(Answer(answer))) as receiver:
        failed = first_attempt(client, receiver)
        assert (failed["state"], failed["lastStatus"], failed["lastError"]) == \
            ("PENDING", 500, "HTTP 500: a\ufffdb\ufffdc")
        the_next_goes_out(client, receiver)


def test_an_outcome_the_store_refuses_is_recorded_as_a_failure_inside_the_service(server, client, monkeypatch):
    webhooks = server.app.extensions["webhooks"].repo.webhooks
    real_finish = webhooks.finish

    def finish(claim, outcome, rules, claim_next=True):
        if claim.delivery.seq == 1 and outcome.error != INTERNAL_FAILURE:
            raise RuntimeError("a value the store cannot hold")
        return real_finish(claim, outcome, rules, claim_next=claim_next)
    monkeypatch.setattr(webhooks, "finish", finish)
    with RawReceiver(answering(Answer(OK))) as receiver:
        failed = first_attempt(client, receiver)
        assert (failed["state"], failed["attempts"], failed["lastStatus"], failed["lastError"]) == \
            ("PENDING", 1, None, INTERNAL_FAILURE)
        the_next_goes_out(client, receiver)



def test_a_redelivery_asked_during_the_attempt_sends_the_delivery_again(client):
    """webhookRedeliver sends a logged delivery again "whatever its state": the outcome of the attempt in flight
    meanwhile is recorded, and does not undo it."""
    answer_now, held = threading.Event(), []

    def answer_of(request):
        if not held:
            held.append(request)
            return Answer(OK, hold=answer_now)  # the first attempt is answered when the test says so
        return Answer(OK)
    with RawReceiver(answer_of) as receiver:
        client.webhook_subscribe("mes", receiver.url)
        station(client, "press_1")
        wait_until(lambda: receiver.requests)
        assert client.webhook_redeliver("mes", 1)["state"] == "PENDING"
        answer_now.set()
        wait_until(lambda: len(receiver.requests) == 2)
        assert [request.id for request in receiver.requests] == ["evt_default_1", "evt_default_1"]
        logged(client, 1, lambda delivery: (delivery["state"], delivery["attempts"]) == ("SUCCEEDED", 2))


def target_of(receiver):
    host = "127.0.0.1"
    return Target("http", host, receiver.port, f"{host}:{receiver.port}", "/hooks", host, in_allowed_net=False)


@pytest.mark.parametrize("answer, state, status, error", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab", DeliveryState.SUCCEEDED, 200, None),
    (b"HTTP/1.1 500 Oops\r\nContent-Length: 10\r\n\r\nab", DeliveryState.PENDING, 500, "HTTP 500: ab"),
], ids=["2xx", "500"])
def test_a_whole_head_within_the_timeout_is_the_answer_whatever_its_body_does(answer, state, status, error):
    with RawReceiver(lambda request: Answer(answer, stall=True)) as receiver:
        result = Sender(timeout=1).send(target_of(receiver), {}, b"{}")
    assert (result.status, result.body, result.failure) == (status, b"ab", None)  # the body's start, as it came
    outcome, _ = outcome_of(result, 0, Failing(None, 0))
    assert (outcome.state, outcome.status, outcome.error) == (state, status, error)


@pytest.mark.parametrize("answer", [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n"],
                         ids=["status-line", "no-blank-line"])
def test_a_head_the_timeout_cuts_short_is_no_answer(answer):
    """When the deadline shuts the socket, http.client reads its end as the end of the head: not a 2xx."""
    with RawReceiver(lambda request: Answer(answer, stall=True)) as receiver:
        result = Sender(timeout=1).send(target_of(receiver), {}, b"{}")
    assert (result.status, result.failure_kind, result.failure) == \
        (None, "timeout", "no answer within 1 s (WIS_WEBHOOK_TIMEOUT_SECONDS)")
    outcome, _ = outcome_of(result, 0, Failing(None, 0))
    assert (outcome.state, outcome.error) == (DeliveryState.PENDING, result.failure)
