"""Zero webhooks lost across nodes (CONTRACT 15 on CONTRACT 8): two real gunicorn nodes (the shipped configuration:
each worker's dispatcher starts after the fork) on one PostgreSQL, a receiver on 127.0.0.1, writers on both nodes.
Mid-burst the receiver holds one attempt without answering; the node that sent it is killed with SIGKILL while it
waits. Every event then reaches the receiver with a 2xx at least once, with its webhook-id; the only one seen twice is
the one the killed node had in flight, sent again by the other node once its lease passed; first attempts came in
seq order."""
import os
import threading
from pathlib import Path

import pytest
import requests

from service.client import Client
from service.testing.webhook_receiver import WebhookReceiver
from support.over_http import upsert_over_http
from support.servers import SHIPPED_WORKER_CLASS, process_children
from support.waiting import wait_until
from support.tokens import TOKEN

# A short timeout: the killed node's lease (timeout + 5 s) passes within the test.
TIMEOUT_SECONDS = 4


class Writer:
    """A thread that writes processes through one node until stopped or its node dies."""

    def __init__(self, url, label):
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url, label))
        self._thread.start()

    def _run(self, url, label):
        while not self._stop.is_set():
            try:
                upsert_over_http(url, f"line_{label}_{self.written % 5}", f"{label}-{self.written}", timeout=10)
            except requests.RequestException:
                return
            self.written += 1

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=60)


def node(start_gunicorn, data_dir, shared_backend, settings, tmp_path):
    metrics = tmp_path / f"metrics-{data_dir.name}"
    metrics.mkdir()
    env = {"WIS_WEBHOOK_ALLOW_HTTP": "1", "WIS_WEBHOOK_ALLOW_NETS": "127.0.0.1/32", "WIS_LOG_LEVEL": "warning",
           "WIS_WEBHOOK_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS), "PROMETHEUS_MULTIPROC_DIR": str(metrics)}
    return start_gunicorn(data_dir, workers=2, backend=shared_backend, settings=settings, env=env,
                          extra_args=("-c", "python:service.gunicorn_config", "--worker-class", SHIPPED_WORKER_CLASS,
                                      "--threads", "4"))


def holds_connection(server, local_port):
    """True when a process of `server` (its master or a worker) holds the TCP connection from `local_port`."""
    inodes = set()
    for pid in (server.process.pid, *process_children(server.process.pid)):
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                inodes.add(os.readlink(fd))
            except OSError:
                pass
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == local_port and f"socket:[{fields[9]}]" in inodes:
            return True
    return False


@pytest.fixture
def settings(shared_backend):
    return shared_backend.settings()


def test_no_webhook_is_lost_when_a_node_is_killed_mid_attempt(tmp_path, shared_backend, settings, start_gunicorn):
    nodes = [node(start_gunicorn, tmp_path / name, shared_backend, settings, tmp_path) for name in ("a", "b")]
    with WebhookReceiver() as receiver, Client(nodes[1].url, TOKEN, backoff=0) as client:
        client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
        writers = [Writer(server.url, label) for server, label in zip(nodes, "ab")]
        try:
            wait_until(lambda: len(receiver.deliveries) >= 30, seconds=60)
            receiver.hang(seconds=120)
            held = len(receiver.deliveries)
            hung = wait_until(lambda: len(receiver.deliveries) > held and receiver.deliveries[held], seconds=60)
            doomed = next(server for server in nodes if holds_connection(server, hung.peer[1]))
            doomed.kill()
            survivor = nodes[1 - nodes.index(doomed)]
            wait_until(lambda: sum(writer.written for writer in writers) >= 150, seconds=60)
        finally:
            for writer in writers:
                writer.stop()
        latest = requests.post(survivor.url + "/graph/v2", headers={"x-service-api-org": TOKEN}, timeout=30,
                               json={"query": "{ latestEventSeq }"}).json()["data"]["latestEventSeq"]
        expected = {f"evt_default_{seq}" for seq in range(1, latest + 1)}
        wait_until(lambda: expected <= {delivery.id for delivery in receiver.deliveries if delivery.status == 204},
                   seconds=TIMEOUT_SECONDS + 60)
        received = receiver.deliveries

    assert all(delivery.verified for delivery in received)
    assert all(delivery.json["data"]["seq"] == int(delivery.id.rsplit("_", 1)[1]) for delivery in received)
    ids = [delivery.id for delivery in received]
    assert {identifier for identifier in ids if ids.count(identifier) > 1} == {hung.id}  # the one in flight only
    seqs = [int(identifier.rsplit("_", 1)[1]) for identifier in ids]
    first_arrivals = [seq for position, seq in enumerate(seqs) if seq not in seqs[:position]]
    assert first_arrivals == sorted(first_arrivals)
    assert set(seqs) == set(range(1, latest + 1))
