"""What an attempt connects to (CONTRACT 15), through the test double's dispatcher: the address its check passed,
never the name resolved again (DNS rebinding), no proxy of the environment; a name that now resolves to a refused
address fails the attempt without a connection; the log keeps only the status for an address of the operator's
networks, and at most 1 KB of a body otherwise. Traffic goes to 127.0.0.1 only (a second receiver listens on
127.0.0.2 to catch a connection that went where the name pointed afterwards)."""
import socket

import pytest

from service.client import Client
from service.delivery.sender import Sender
from service.domain.webhook_addresses import Target
from service.domain.webhook_outcomes import Failing, outcome_of
from service.testing import ThreadedServer
from service.testing.webhook_receiver import WebhookReceiver
from support.waiting import wait_until

HOST = "hooks.example.com"


@pytest.fixture
def server(tmp_path):
    with ThreadedServer(data_dir=tmp_path / "data") as server:
        yield server


@pytest.fixture
def client(server):
    with Client(server.url, server.token, backoff=0) as client:
        yield client


def test_the_connection_goes_to_the_checked_address_when_the_name_changes_after_the_check(server, client,
                                                                                           monkeypatch):
    checked = []
    with WebhookReceiver() as receiver, WebhookReceiver(host="127.0.0.2", port=_port(receiver.url)) as elsewhere:
        def check_resolver(host, port):
            checked.append(host)
            return ["127.0.0.1"]
        server.app.extensions["webhooks"].resolver = check_resolver
        # Anyone resolving the name from now on (urllib3 by name, the system resolver) gets 127.0.0.2.
        system_getaddrinfo = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", lambda host, *rest, **options: system_getaddrinfo(
            "127.0.0.2" if host == HOST else host, *rest, **options))
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.2:9")  # the service's attempts read no proxy setting
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # (the test's own client does)
        client.webhook_subscribe("mes", receiver.url.replace("127.0.0.1", HOST), secret=receiver.secret)
        client.create_station({"id": "press_1", "name": "Press 1"})
        [delivery] = receiver.wait_for(1)
        assert delivery.verified and delivery.headers["host"] == f"{HOST}:{_port(receiver.url)}"
        assert elsewhere.deliveries == []
    assert checked == [HOST, HOST]  # once at subscribe, once for the attempt


def test_a_name_that_now_resolves_to_a_refused_address_fails_the_attempt_unsent(server, client):
    answers = iter([["127.0.0.1"], ["169.254.169.254"]])
    server.app.extensions["webhooks"].resolver = lambda host, port: next(answers)
    with WebhookReceiver() as receiver:
        client.webhook_subscribe("mes", receiver.url.replace("127.0.0.1", HOST), secret=receiver.secret)
        client.create_station({"id": "press_1", "name": "Press 1"})
        logged = wait_until(lambda: [item for item in client.webhook_deliveries("mes") if item["attempts"] == 1])[0]
        assert logged["state"] == "PENDING" and logged["lastStatus"] is None
        assert "169.254.169.254 (the address of hooks.example.com) is a link-local address" in logged["lastError"]
        assert receiver.deliveries == []


def test_the_log_keeps_1_kb_of_a_body_and_only_the_status_inside_the_allowed_networks(tmp_path):
    sender = Sender(timeout=2)
    with WebhookReceiver() as receiver:
        receiver.fail(status=500, body="x" * 5000)
        host, port = "127.0.0.1", _port(receiver.url)
        public = Target("http", host, port, f"{host}:{port}", "/hooks", host, in_allowed_net=False)
        result = sender.send(public, {}, b"{}")
        assert result.status == 500 and result.body == b"x" * 1024
        receiver.fail(status=500, body="secret internal page")
        allowed = public._replace(in_allowed_net=True)
        outcome, kind = outcome_of(sender.send(allowed, {}, b"{}"), 0, Failing(None, 0))
        assert (outcome.error, kind) == ("HTTP 500", "http_error")
        outcome, _ = outcome_of(result, 0, Failing(None, 0))
        assert outcome.error == "HTTP 500: " + "x" * 1024


def _port(url):
    return int(url.split(":")[2].split("/")[0])
