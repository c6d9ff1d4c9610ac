"""Slow and stalled clients against gunicorn as shipped (`-c python:service.gunicorn_config`, its worker class): a
thousand connections that send a head and one byte, then nothing, lock nobody out; a request that stops mid-head or
mid-body is ended by the server, and an upload stopped mid-body keeps what arrived."""
import json
import resource
import select
import socket
import time
from pathlib import Path

import pytest
import requests

from service.server.arrival import HANDOFF_BYTES

from service.interface import TOKEN_HEADER
from support.media import PNG
from support.over_http import TUS_BODY_TYPE, TUS_HEADERS, tus_metadata, tus_offset
from support.servers import connections_held, process_children
from support.tokens import HEADERS, TOKEN

CONFIG = ("-c", "python:service.gunicorn_config")
STALLED = 1000
# Generous: the answers must come, however busy the machine; how fast is the benchmark's business.
PATIENCE = 60


def raise_open_file_limit(needed):
    """Let this process hold `needed` sockets (bounded by the hard limit, which the test needs to reach)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.fail(f"this test holds {needed} connections; the open-file hard limit is {hard} (ulimit -Hn)")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def shipped(start, tmp_path, backend, **env):
    """Gunicorn as `wis serve` runs it (two workers), with the WIS_* settings in `env`, started by a start_gunicorn
    fixture (`start`)."""
    return start(tmp_path / "data", workers=2, backend=backend, extra_args=CONFIG,
                 env={"WIS_WORKERS": "2", "WIS_LOG_LEVEL": "warning", "WIS_ACCESS_LOG": "off",
                               "PROMETHEUS_MULTIPROC_DIR": str(_directory(tmp_path / "metrics")), **env})


def _directory(path):
    path.mkdir(exist_ok=True)
    return path


def both_workers(server):
    """The process ids of the server's two workers, once both have started."""
    deadline = time.monotonic() + PATIENCE
    while len(workers := set(process_children(server.process.pid))) < 2:
        assert time.monotonic() < deadline, "gunicorn did not start its two workers"
        time.sleep(0.1)
    return workers


def open_files(pid):
    """How many files process `pid` holds open (none once it has ended)."""
    try:
        return len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except FileNotFoundError:
        return 0


def connect(server, timeout=PATIENCE):
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout)


def read_until_closed(sock):
    """Everything the server sends until it closes the connection (the socket's timeout bounds each wait)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def read_answer(sock):
    """One answer with a Content-Length, read off a connection that stays open."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def answered(server):
    """A /healthz, a GraphQL read and a small upload, each answered with success."""
    assert requests.get(server.url + "/healthz", timeout=PATIENCE).json() == {"status": "ok"}
    query = requests.post(server.url + "/graph/v2", headers=HEADERS, timeout=PATIENCE,
                          json={"query": "{ processes { id } }"})
    assert query.status_code == 200 and query.json() == {"data": {"processes": []}}
    upload = requests.post(server.url + "/uploads", headers=HEADERS, timeout=PATIENCE,
                           files={"file": ("pic.png", PNG + bytes(200))}, data={"destinationId": "stepImage"})
    assert upload.status_code == 201, upload.text
    return upload.json()["path"]


def test_a_thousand_stalled_requests_lock_nobody_out(tmp_path, backend, start_gunicorn):
    raise_open_file_limit(STALLED + 256)
    server = shipped(start_gunicorn, tmp_path, backend)
    stalled = []
    try:
        workers = both_workers(server)
        head = (f"POST /graph/v2 HTTP/1.1\r\nHost: 127.0.0.1\r\n{TOKEN_HEADER}: {TOKEN}\r\n"
                "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{").encode()
        for number in range(STALLED):
            sock = connect(server)
            if number % 2:  # half of them stall in their second request, on a kept-alive connection
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert read_answer(sock).startswith(b"HTTP/1.1 200 OK\r\n")
            sock.sendall(head)
            stalled.append(sock)
        # The workers hold every one of them (none waits in the listen backlog, where it would hold nothing).
        ports = {sock.getsockname()[1] for sock in stalled}
        deadline = time.monotonic() + PATIENCE
        while connections_held(workers, server.port, ports) < STALLED:
            assert time.monotonic() < deadline, "the workers did not accept the stalled connections"
            time.sleep(0.1)

        media_path = answered(server)

        assert set(process_children(server.process.pid)) == workers  # no worker died or was replaced
        for sock in stalled:
            sock.close()
        stalled.clear()
        assert requests.get(server.url + media_path, headers=HEADERS, timeout=PATIENCE).content == PNG + bytes(200)
        answered(server)
        assert set(process_children(server.process.pid)) == workers
    finally:
        for sock in stalled:
            sock.close()
        server.stop()


def test_a_worker_out_of_open_files_keeps_what_it_holds_and_serves_again(tmp_path, start_gunicorn):
    raise_open_file_limit(STALLED + 256)
    server = shipped(start_gunicorn, tmp_path, None)
    stalled = []
    try:
        workers = both_workers(server)
        for pid in workers:  # far fewer files than worker_connections needs (as a bad ulimit would give)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (300, 300))
        for _ in range(STALLED):
            sock = connect(server)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            stalled.append(sock)
        deadline = time.monotonic() + PATIENCE
        while not all(open_files(pid) >= 290 for pid in workers):
            assert time.monotonic() < deadline, "the workers did not run out of open files"
            time.sleep(0.1)
        time.sleep(2)  # the backlog holds the rest: accept() keeps failing meanwhile
        for sock in stalled:
            sock.close()
        stalled.clear()
        answered(server)
        assert set(process_children(server.process.pid)) == workers  # no worker died or was replaced
    finally:
        for sock in stalled:
            sock.close()
        server.stop()


@pytest.fixture(scope="module")
def impatient_server(tmp_path_factory, backend, start_module_gunicorn):
    """The shipped configuration with deadlines of one second."""
    return shipped(start_module_gunicorn, tmp_path_factory.mktemp("impatient"), backend,
                   WIS_REQUEST_START_TIMEOUT="1", WIS_REQUEST_BODY_TIMEOUT="1")


def test_a_request_that_stops_mid_head_gets_408_and_is_closed(impatient_server):
    with connect(impatient_server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"Content-Type: application/json" in head
    assert "did not arrive within 1 s" in json.loads(body)["error"]


def test_a_request_that_stops_mid_head_behind_a_pipelined_one_gets_408_and_is_closed(impatient_server):
    with connect(impatient_server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answers = read_until_closed(sock)
    first, _, second = answers.partition(b"HTTP/1.1 408 Request Timeout\r\n")
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b'{"status":"ok"}\n')
    assert b"did not arrive within 1 s" in second


def test_a_client_that_expects_100_continue_is_told_once_to_send_its_body(impatient_server):
    body = b'{"query": "{ processes { id } }"}'
    with connect(impatient_server) as sock:
        sock.sendall((f"POST /graph/v2 HTTP/1.1\r\nHost: 127.0.0.1\r\n{TOKEN_HEADER}: {TOKEN}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n"
                      "Connection: close\r\n\r\n").encode())
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"100 Continue" not in answer
    assert json.loads(answer.partition(b"\r\n\r\n")[2]) == {"data": {"processes": []}}


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(impatient_server):
    with connect(impatient_server) as sock:
        assert read_until_closed(sock) == b""


def test_a_request_that_stops_mid_body_after_64_kb_is_answered_and_closed(impatient_server):
    # Past 64 KB a thread reads the body; the body timeout ends it as if the client had gone.
    body = b'{"query": "' + b" " * 200_000 + b'{ processes { id } }"}'
    with connect(impatient_server) as sock:
        sock.sendall((f"POST /graph/v2 HTTP/1.1\r\nHost: 127.0.0.1\r\n{TOKEN_HEADER}: {TOKEN}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
                     + body[:100_000])
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert requests.get(impatient_server.url + "/healthz", timeout=PATIENCE).status_code == 200


def test_a_request_that_trickles_its_body_after_64_kb_is_ended_before_it_has_sent_it(impatient_server):
    # Each byte comes well within the body timeout; together they fall far behind the minimum rate (1 KB/s).
    head = (f"POST /graph/v2 HTTP/1.1\r\nHost: 127.0.0.1\r\n{TOKEN_HEADER}: {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {HANDOFF_BYTES + 100}\r\n\r\n").encode()
    trickled = 0
    with connect(impatient_server) as sock:
        sock.sendall(head + b" " * (HANDOFF_BYTES - len(head)))
        while trickled < 100 and not select.select([sock], [], [], 0.2)[0]:
            sock.sendall(b" ")
            trickled += 1
        answer = read_until_closed(sock)
    assert trickled < 100  # the server ended the request while the client was still trickling
    assert answer.startswith(b"HTTP/1.1 400 ")


def test_a_tus_patch_that_stops_mid_body_keeps_what_arrived(impatient_server):
    url = impatient_server.url
    data = PNG + bytes(range(256)) * 4096  # 1 MB
    response = requests.post(url + "/uploads", headers=dict(TUS_HEADERS, **{
        "Upload-Length": str(len(data)), "Upload-Metadata": tus_metadata(destinationId="stepImage", filename="p.png")}),
        timeout=PATIENCE)
    assert response.status_code == 201, response.text
    path = response.headers["Location"]
    with connect(impatient_server) as sock:
        sock.sendall((f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{TOKEN_HEADER}: {TOKEN}\r\n"
                      f"Tus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\nContent-Type: {TUS_BODY_TYPE}\r\n"
                      f"Content-Length: {len(data)}\r\n\r\n").encode() + data[:300_000])
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"300000 bytes that arrived are kept" in answer
    assert tus_offset(url, path.rsplit("/", 1)[1]) == 300_000
    finish = requests.patch(url + path, data=data[300_000:], timeout=PATIENCE, headers=dict(
        TUS_HEADERS, **{"Upload-Offset": "300000", "Content-Type": TUS_BODY_TYPE}))
    assert finish.status_code == 204
    assert requests.get(url + finish.headers["Media-Path"], headers=HEADERS, timeout=PATIENCE).content == data
