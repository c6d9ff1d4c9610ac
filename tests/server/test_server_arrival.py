"""When the worker's event loop hands a request to a thread (service.server.arrival): once its head is whole and its
body is whole or 64 KB have arrived, never for less, and without parsing a trickling head again for every byte."""
import pytest
from gunicorn.config import Config

from service.server import arrival
from service.server.arrival import HANDOFF_BYTES, RequestArrival

PEER = ("127.0.0.1", 50000)


def arriving(*pieces, number=1):
    """A RequestArrival fed `pieces` one after the other; the answers of each `add`."""
    request = RequestArrival(Config(), PEER, number)
    return request, [request.add(piece) for piece in pieces]


def head(method="POST", path="/graph/v2", **headers):
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{name.replace('_', '-')}: {value}"
                                                             for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_a_request_without_a_body_is_ready_once_its_head_is_whole():
    whole = head("GET", "/healthz")
    request, answers = arriving(whole[:10], whole[10:-1], whole[-1:])
    assert answers == [False, False, True]
    assert request.received == whole


def test_a_body_of_known_length_is_waited_for_to_its_last_byte():
    body = b'{"query": "{ processes { id } }"}'
    _, answers = arriving(head(Content_Length=len(body)) + body[:1], body[1:-1], body[-1:])
    assert answers == [False, False, True]


def test_a_large_body_is_handed_over_once_64_kb_of_the_request_arrived():
    start = head("PATCH", "/uploads/abc", Content_Length=500 * 1024 * 1024)
    request, answers = arriving(start, b"x" * (HANDOFF_BYTES - len(start) - 1), b"x")
    assert answers == [False, False, True]
    assert request.room == 0


def test_a_head_and_one_byte_of_body_is_not_ready_however_long_it_waits():
    request, answers = arriving(head(Content_Length=100) + b"{")
    assert answers == [False]
    assert request.ready() is False and request.head_whole


@pytest.mark.parametrize("body", [
    b"5\r\nhello\r\n0\r\n\r\n",
    b"5;name=value\r\nhello\r\n0\r\nChecked: yes\r\n\r\n",
    # chunk data that looks like the last chunk is data all the same
    b"7\r\n0\r\n\r\n\r\n\r\n0\r\n\r\n",
])
def test_a_chunked_body_is_ready_at_its_last_chunk_and_trailers_byte_by_byte(body):
    request, answers = arriving(head(Transfer_Encoding="chunked"), *(body[i:i + 1] for i in range(len(body))))
    assert answers == [False] * len(body) + [True]


def test_chunked_framing_that_is_not_chunked_is_handed_over_for_gunicorn_to_answer():
    _, answers = arriving(head(Transfer_Encoding="chunked") + b"zz\r\n")
    assert answers == [True]


@pytest.mark.parametrize("start", [
    b"NOT-HTTP\r\n\r\n",
    b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n\r\n",  # over gunicorn's limit_request_line
    head(Content_Length="-1"),
    head(Transfer_Encoding="gzip"),
])
def test_a_head_gunicorn_refuses_is_handed_over_at_once(start):
    # Gunicorn parses the same bytes again in the thread and answers with its 4xx there; nothing more is waited for.
    assert arriving(start)[1] == [True]


def test_a_head_that_never_ends_is_handed_over_at_64_kb():
    start = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    filler = b"X-Filler: " + b"y" * 1000 + b"\r\n"
    pieces = [start] + [filler] * ((HANDOFF_BYTES - len(start)) // len(filler)) + [b"z" * HANDOFF_BYTES]
    request = RequestArrival(Config(), PEER, 1)
    answers = [request.add(piece[:request.room]) for piece in pieces]
    assert answers[-1] is True and not any(answers[:-1])


def test_expect_100_continue_is_reported_and_the_body_still_waited_for():
    request, answers = arriving(head(Content_Length=10, Expect="100-continue"))
    assert answers == [False] and request.expects_continue
    assert request.add(b"0123456789") is True


def test_a_pipelined_request_behind_a_whole_one_does_not_hold_it_back():
    second = head("GET", "/healthz")
    request, answers = arriving(head("GET", "/healthz") + second[:5])
    assert answers == [True]


def test_a_head_trickling_in_byte_by_byte_is_parsed_once(monkeypatch):
    parses = []
    real_request = arrival.Request

    def counting_request(*args):
        parses.append(1)
        return real_request(*args)

    monkeypatch.setattr(arrival, "Request", counting_request)
    whole = head(Content_Length=2, X_Padding="p" * 8000) + b"{}"
    _, answers = arriving(*(whole[i:i + 1] for i in range(len(whole))))
    assert answers[-1] is True and not any(answers[:-1])
    assert len(parses) == 1
