"""`wis webhooks` against the test double: subscribe (the made secret printed), list, deliveries, redeliver,
unsubscribe, and a clear error for a refused URL or an unknown id."""
import json

import pytest

from service.cli import main
from service.testing import ThreadedServer
from service.testing.webhook_receiver import WebhookReceiver


@pytest.fixture
def server(tmp_path):
    with ThreadedServer(data_dir=tmp_path / "data") as server:
        yield server


def wis(server, capsys, *argv):
    code = main(["webhooks", *argv, "--url", server.url, "--token", server.token])
    out, err = capsys.readouterr()
    return code, out, err


def test_subscribe_list_deliveries_redeliver_unsubscribe(server, capsys):
    with WebhookReceiver() as receiver:
        code, out, _ = wis(server, capsys, "subscribe", "mes", receiver.url, "--types", "station.*", "--header",
                           "Authorization=Bearer abc")
        assert code == 0 and out.splitlines()[0] == "SUBSCRIBED mes"
        secret = out.splitlines()[1].split()[1]
        assert secret.startswith("whsec_")
        receiver.secret = secret
        server.session().post("/graph/v2", json={"query": 'mutation { stationCreate(input: {station: '
                                                          '{id: "press_1", name: "Press"}}) }'})
        [delivery] = receiver.wait_for(1)
        assert delivery.verified and delivery.headers["authorization"] == "Bearer abc"

        code, out, _ = wis(server, capsys, "list")
        assert out.split("\t")[:4] == ["mes", receiver.url, "station.*", "enabled"]
        code, out, _ = wis(server, capsys, "list", "--json")
        assert json.loads(out)["secret"] == secret
        code, out, _ = wis(server, capsys, "deliveries", "mes")
        assert out.split("\t")[:5] == ["1", "station.created", "SUCCEEDED", "1", "204"]
        code, out, _ = wis(server, capsys, "redeliver", "mes", "1")
        assert code == 0 and out.split("\t")[:3] == ["1", "station.created", "PENDING"]
        assert receiver.wait_for(2)[-1].id == "evt_default_1"
        code, out, _ = wis(server, capsys, "unsubscribe", "mes")
        assert (code, out) == (0, "UNSUBSCRIBED mes\n")


def test_refusals_are_one_line_naming_the_field(server, capsys):
    code, _, err = wis(server, capsys, "subscribe", "mes", "http://169.254.169.254/latest")
    assert code == 1 and "webhookUrl: may not be sent to: 169.254.169.254 is a link-local address" in err
    code, _, err = wis(server, capsys, "unsubscribe", "nope")
    assert code == 1 and "no webhook subscription 'nope'" in err
    code, _, err = wis(server, capsys, "subscribe", "mes", "https://hooks.example.com", "--header", "novalue")
    assert code == 1 and "--header takes NAME=VALUE" in err
