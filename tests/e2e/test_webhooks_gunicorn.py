"""Webhooks on real gunicorn with the shipped configuration (CONTRACT 15): SIGTERM while an attempt hangs ends the
worker cleanly within the attempt's timeout (no traceback), and the delivery it held is sent by the server started
again on the same data directory, with its webhook-id; the metrics count the attempts by outcome."""
import time

import requests

from service.client import Client
from service.testing.webhook_receiver import WebhookReceiver
from support.metrics import metric_value
from support.tokens import TOKEN
from support.waiting import wait_until

TIMEOUT_SECONDS = 3


def start(start_gunicorn, data_dir, tmp_path):
    metrics = tmp_path / f"metrics-{time.monotonic_ns()}"
    metrics.mkdir()
    env = {"WIS_WEBHOOK_ALLOW_HTTP": "1", "WIS_WEBHOOK_ALLOW_NETS": "127.0.0.1/32", "WIS_LOG_LEVEL": "warning",
           "WIS_WEBHOOK_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS), "WIS_WEBHOOK_RETRY_SECONDS": "0.5",
           "PROMETHEUS_MULTIPROC_DIR": str(metrics)}
    return start_gunicorn(data_dir, workers=1, env=env, extra_args=("-c", "python:service.gunicorn_config"))


def test_sigterm_mid_attempt_stops_cleanly_and_the_next_start_delivers(tmp_path, start_gunicorn):
    data_dir = tmp_path / "data"
    server = start(start_gunicorn, data_dir, tmp_path)
    with WebhookReceiver() as receiver, Client(server.url, TOKEN, backoff=0) as client:
        client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
        receiver.hang(seconds=60)
        client.create_station({"id": "press_1", "name": "Press 1"})
        receiver.wait_for(1, answered=False)
        stopping = time.monotonic()
        server.stop()
        assert time.monotonic() - stopping < TIMEOUT_SECONDS + 5
        assert server.process.returncode == 0
        assert "Traceback" not in server.stderr_text

        again = start(start_gunicorn, data_dir, tmp_path)
        [delivery] = receiver.wait_for(1, timeout=30)
        assert delivery.id == "evt_default_1" and delivery.verified
        # The attempt is counted once the server has read the receiver's answer, a moment after the receiver sent it.
        wait_until(lambda: metric_value(requests.get(again.url + "/metrics", timeout=10).text,
                                        "wis_webhook_delivery_seconds_count") == 1)  # (counted after the attempt)
        metrics = requests.get(again.url + "/metrics", timeout=10).text
        assert metric_value(metrics, "wis_webhook_attempts_total", outcome="succeeded") == 1
        assert metric_value(metrics, "wis_webhook_events_emitted_total") == 0  # its first attempt was the other's
