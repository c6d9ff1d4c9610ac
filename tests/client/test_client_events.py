"""Change events from the Python client and `wis events` against real gunicorn on both backends: the feed read page by
page, its errors, following the stream across a server that drops it, and the Server-Sent Events parser that
`follow()` reads the stream with."""
import io
import json
import signal
import subprocess
import threading
import time

import pytest
import requests

from service.cli import main
from service.client import Client, ClientError
from service.client import events as events_module
from service.client.events import lines_of, messages
from service.client.transport import Transport
from support.servers import WIS
from support.tokens import TOKEN


def station(identifier, name):
    return {"id": identifier, "name": name}


def test_the_feed_from_the_client_and_wis_events(server, api, capsys):
    start = api.latest_event_seq()
    api.create_station(station("ev_press", "Press"))
    api.create_station(station("ev_press", "Press"))  # unchanged: no event
    api.create_station(station("ev_press", "Press 2"))
    api.delete_station("ev_press")
    found = api.events(after=start)
    assert [(event["seq"] - start, event["type"], event["revision"], event["name"]) for event in found] == [
        (1, "station.created", 1, "Press"), (2, "station.updated", 2, "Press 2"), (3, "station.deleted", 3, None)]
    assert api.latest_event_seq() == start + 3
    assert [event["seq"] for event in api.events(after=start, types=["station.deleted"])] == [start + 3]
    assert api.events(after=start + 3) == []

    arguments = ["--url", server.url, "--token", TOKEN]
    assert main(["events", "--after", str(start), "--types", "station.*", *arguments]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(int(seq), kind, identifier, revision, name) for seq, _, kind, identifier, revision, name in lines] == [
        (start + 1, "station.created", "ev_press", "1", "Press"), (start + 2, "station.updated", "ev_press", "2",
                                                                   "Press 2"),
        (start + 3, "station.deleted", "ev_press", "3", "")]
    assert main(["events", "--after", str(start + 2), "--json", *arguments]) == 0
    envelope = json.loads(capsys.readouterr().out)
    assert envelope["type"] == "station.deleted" and envelope["data"]["seq"] == start + 3


def test_bad_arguments_are_refused_naming_them(server, api, capsys):
    with pytest.raises(ClientError) as bad:
        api.events(first=0, types=["process.moved"])
    assert {error["extensions"]["field"] for error in bad.value.errors} == {"first", "types[0]"}
    assert main(["events", "--types", "nothing", "--url", server.url, "--token", TOKEN]) == 1
    assert "types[0]: must be <kind>.<change>" in capsys.readouterr().err


@pytest.mark.parametrize("stream, expected", [
    ("retry: 3000\n\nid: 1\nevent: process.created\ndata: {\"a\": 1}\n\n",
     [{"event": "message", "retry": 3000}, {"event": "process.created", "id": "1", "data": '{"a": 1}'}]),
    (": keepalive\n\nid: 2\ndata: one\ndata: two\n\n", [{"event": "message", "id": "2", "data": "one\ntwo"}]),
    ("data:no space\n\nid\n\nevent: x\n\nretry: soon\n\n",
     [{"event": "message", "data": "no space"}, {"event": "message", "id": ""}]),
    ("id: 3\ndata: cut off before its blank line\n", []),
])
def test_the_stream_is_parsed_as_html_says(stream, expected):
    found = list(messages(stream.splitlines()))
    assert [{key: value for key, value in message.items()} for message in found] == expected


# Line breaks of Unicode that are not line ends of Server-Sent Events: a name may hold them, and JSON leaves them raw.
BREAKS = "\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e"
STREAM = ("\ufeffretry: 3000\r\n\r\nid: 1\revent: station.created\rdata: {\"name\": \"P" + BREAKS + "\u00e9\"}\r\r"
          ": keepalive\n\nid: 2\ndata: two\n\n").encode()


@pytest.mark.parametrize("size", [len(STREAM), 1, 2, 3, 7])
def test_lines_end_only_with_cr_lf_or_both_however_the_bytes_come(size):
    chunks = [STREAM[start:start + size] for start in range(0, len(STREAM), size)]
    assert list(lines_of(chunks)) == ["retry: 3000", "", "id: 1", "event: station.created",
                                      'data: {"name": "P' + BREAKS + '\u00e9"}', "", ": keepalive", "", "id: 2",
                                      "data: two", ""]
    assert [message.get("data") for message in messages(lines_of(chunks))] == [
        None, '{"name": "P' + BREAKS + '\u00e9"}', "two"]


def test_a_line_is_decoded_as_utf_8_with_replacement_and_a_last_line_without_its_end_is_dropped():
    # The CR and LF of separate chunks are one line end; the LF after them is another.
    assert list(lines_of([b"data: \xff\xe2\x80", b"\xa8\n", b"", b"\r", b"\n", b"\n", b"id: 3"])) == [
        "data: \ufffd\u2028", "", ""]


def test_follow_and_wis_events_follow_read_names_holding_unicode_line_breaks(server, api):
    """A name with U+2028 (or U+0085, ...) comes raw in the stream's JSON: it is not a line end of Server-Sent Events,
    so neither follow() nor `wis events --follow` may split the event there."""
    start = api.latest_event_seq()
    names = ["Press\u2028one", "Press\x85two", "Press\u2029three"]
    for name in names:
        api.create_station(station("ev_breaks", name))
    with Client(server.url, TOKEN, timeout=30) as client:
        following = client.follow(after=start)
        assert [next(following)["data"]["name"] for _ in names] == names
        following.close()
    printing = subprocess.Popen([str(WIS), "events", "--follow", "--json", "--after", str(start), "--url",
                                 server.url, "--token", TOKEN], stdout=subprocess.PIPE, text=True)
    try:
        printed = [json.loads(printing.stdout.readline()) for _ in names]
    finally:
        printing.terminate()
        printing.wait(10)
        printing.stdout.close()
    assert [envelope["data"]["name"] for envelope in printed] == names


def test_follow_resumes_after_the_server_drops_its_streams_missing_nothing(server, api):
    """Client.follow() from a seq: the events after it in order; when gunicorn replaces its workers (SIGHUP ends
    their streams), it connects again with Last-Event-ID and nothing is missed or repeated."""
    start = api.latest_event_seq()
    received, done = [], threading.Event()

    def follow():
        with Client(server.url, TOKEN, timeout=30) as client:
            for envelope in client.follow(after=start, types=["station.*"]):
                received.append((envelope["data"]["seq"], envelope["data"]["name"]))
                if envelope["data"]["name"] == "last":
                    done.set()
                    return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    for name in ("one", "two", "three"):
        api.create_station(station("ev_follow", name))
    wait_for(lambda: len(received) == 3)
    server.process.send_signal(signal.SIGHUP)  # new workers; the old ones end their streams
    for name in ("four", "last"):
        api.create_station(station("ev_follow", name))
    assert done.wait(30), received
    assert received == [(start + number, name) for number, name in enumerate(("one", "two", "three", "four", "last"),
                                                                                 start=1)]


def test_wis_events_follow_prints_each_event_as_it_commits(server, api):
    start = api.latest_event_seq()
    following = subprocess.Popen([str(WIS), "events", "--follow", "--after", str(start), "--url", server.url,
                                  "--token", TOKEN], stdout=subprocess.PIPE, text=True)
    try:
        api.create_station(station("ev_cli_follow", "Press"))
        api.delete_station("ev_cli_follow")
        lines = [following.stdout.readline().rstrip("\n").split("\t") for _ in range(2)]
    finally:
        following.terminate()
        following.wait(10)
        following.stdout.close()
    assert [(int(seq), kind, identifier) for seq, _, kind, identifier, _, _ in lines] == [
        (start + 1, "station.created", "ev_cli_follow"), (start + 2, "station.deleted", "ev_cli_follow")]


class ScriptedSession:
    """A requests.Session whose GETs answer, in turn, what `script` holds: an exception to raise or a Response."""

    def __init__(self, script):
        self.script, self.headers = list(script), {}

    def get(self, url, **options):
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    def close(self):
        pass


def answer(status, body=b""):
    response = requests.Response()
    response.status_code, response.raw = status, io.BytesIO(body)
    response.headers["Content-Type"] = "text/event-stream" if status == 200 else "application/json"
    return response


def test_follow_tells_once_when_following_stops_working_and_once_when_it_works_again():
    """`wis events --follow` retried an unreachable server for ever and said nothing."""
    event = b'id: 7\ndata: {"type": "station.created", "data": {"seq": 7}}\n\n'
    refused = requests.ConnectionError("HTTPConnectionPool: Max retries exceeded ([Errno 111] Connection refused)")
    session = ScriptedSession([refused, refused, answer(200, event), refused,
                               answer(503, b'{"error": "too many event streams"}'), refused, answer(200, event)])
    told = []
    transport = Transport("http://127.0.0.1:9", "a-token-of-no-server", session_factory=lambda: session)
    following = events_module.follow(transport, after=3, sleep=lambda seconds: None, on_outage=told.append)
    assert [next(following)["data"]["seq"] for _ in range(2)] == [7, 7]
    following.close()
    assert told == ["cannot reach http://127.0.0.1:9 (Connection refused)", None,
                    "cannot reach http://127.0.0.1:9 (Connection refused)", None]
    assert session.script == []


def wait_for(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)
