"""HTTP to one service: the token header, timeouts, and which failed requests are sent again.

Retry policy. Whether a failed request is sent again depends on what a second copy would do if the
first one did reach the service (the caller says which kind it sends, `repeat=`):

- SAFE (GET, DELETE, a chunk PATCH, a GraphQL query): a repeat changes nothing (re-sending a chunk
  replaces it; after completion it answers the same path). Retried after any connection error,
  timeout, broken answer, or a 500/502/503/504 answer.
- HARMLESS (POST /uploads): retried like SAFE. If the first copy was received but its answer lost (a
  read timeout, a reset after sending, a 502/504 from a proxy that gave up), a single upload leaves a
  second media file that nothing refers to (`wis gc` lists it), and a stream creation leaves an empty
  stream that expires (STREAM_TTL_HOURS, 24 h by default). The caller gets one path or stream.
- UNSAFE (a GraphQL mutation): retried only when the request certainly never reached the service
  (the connection could not be made: refused, unreachable, connect timeout). After a read timeout, a
  reset, or any answer, it is not sent again: an upsert applied twice stores the same object but with
  `revision` one higher and answers UPDATED instead of CREATED. A lost answer raises OutcomeUnknown;
  a 5xx answer is raised as ClientError with its status. Read the object back, or send it again.

Waits between attempts: backoff * 2**attempt seconds (0.5, 1, 2, 4 s by default), `retries` times.
"""
import enum
import re
import time

import requests
from urllib3.exceptions import ConnectTimeoutError

from service.client.errors import ClientError, ServerUnreachable
from service.interface import TOKEN_HEADER

# What an HTTP header's value can hold (RFC 9110's field-value: visible ASCII, spaces and tabs, the obsolete Latin-1
# bytes): what http.client can encode and gunicorn reads. Anything else was requests' or http.client's error, which
# quoted the token or did not say it was the token.
HEADER_VALUE_CHARACTER = re.compile(r"[\t\x20-\x7e\x80-\xff]")
# Answers worth retrying: the server or a proxy in front of it had a passing problem.
RETRY_STATUSES = frozenset({500, 502, 503, 504})
BROKEN = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


class Repeat(enum.Enum):
    """What sending a request a second time does when the first copy reached the service."""

    SAFE = "safe"
    HARMLESS = "harmless"
    UNSAFE = "unsafe"


class OutcomeUnknown(ServerUnreachable):
    """An UNSAFE request (a mutation) was sent but no answer came: it may or may not have been applied."""


class Transport:
    """Requests to one service with its token; `session` is for the calling thread, `new_session()` for others.

    `session_factory` makes each requests.Session (default requests.Session): mount adapters, set
    proxies or certificates there. requests.Session is not meant to be shared across threads, so
    every thread that sends requests gets its own from `new_session()`.
    """

    def __init__(self, base_url, token, timeout=60.0, retries=4, backoff=0.5, session_factory=None):
        problem = token_problem(token) if isinstance(token, str) else None
        if problem:
            raise ValueError(f"the API token {problem}; it is not shown here")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.session_factory = session_factory or requests.Session
        self.session = self.new_session()

    def new_session(self):
        """A new requests.Session carrying the token; the caller closes it."""
        session = self.session_factory()
        session.headers[TOKEN_HEADER] = self.token
        return session

    def close(self):
        self.session.close()

    def request(self, method, path, repeat, body=None, session=None, **kwargs):
        """Send a request, retrying as the module docstring says; return the last response.

        `body` is a callable returning a fresh request body (with `content_type`, and `take_back()`
        that withdraws the bytes it reported as sent), since a retry must send the body again.
        """
        session = session or self.session
        attempt = 0
        while True:
            segment = body() if body else None
            if segment is not None:
                kwargs["data"] = segment
                kwargs["headers"] = {"Content-Type": segment.content_type}
            try:
                response = session.request(method, self.base_url + path, timeout=self.timeout, **kwargs)
            except BROKEN as exc:
                if segment is not None:
                    segment.take_back()
                sent = not _never_sent(exc)
                if sent and repeat is Repeat.UNSAFE:
                    raise OutcomeUnknown(f"no answer from {self.base_url} after the request was sent "
                                         f"({_connection_reason(exc)}); it may or may not have been applied") from None
                if attempt >= self.retries:
                    raise ServerUnreachable(f"cannot reach {self.base_url}: {_connection_reason(exc)}") from None
            else:
                retry = response.status_code in RETRY_STATUSES and repeat is not Repeat.UNSAFE
                if not retry or attempt >= self.retries:
                    if segment is not None and response.status_code >= 400:
                        segment.take_back()
                    return response
                if segment is not None:
                    segment.take_back()
                response.close()
            finally:
                if segment is not None:
                    segment.close()
            time.sleep(self.backoff * 2**attempt)
            attempt += 1

    def json(self, method, path, repeat, **kwargs):
        """Send a request and return its JSON answer (None for 204); raise ClientError for 4xx/5xx."""
        response = self.request(method, path, repeat, **kwargs)
        if response.status_code >= 400:
            raise ClientError(response.status_code, error_message(response))
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError:
            raise ClientError(response.status_code, error_message(response)) from None


def token_problem(token):
    """Why `token` cannot be sent in the token header, in words that never show it; None when it can."""
    if token != token.strip():
        return "starts or ends with whitespace, which no token has"
    bad = next((at for at, character in enumerate(token, 1) if not HEADER_VALUE_CHARACTER.fullmatch(character)), None)
    if bad is not None:
        return (f"holds a character an HTTP header cannot carry (character {bad} of {len(token)}: a control character, "
                "or one beyond Latin-1)")
    return None


def _never_sent(exc):
    """Whether the request failed before any of it could reach the service (no connection was made)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    # NewConnectionError (refused, unreachable, name not resolved) is a ConnectTimeoutError in urllib3.
    return isinstance(exc, requests.ConnectionError) and isinstance(reason, ConnectTimeoutError)


def _connection_reason(exc):
    if isinstance(exc, requests.Timeout):
        return "timed out"
    text = str(exc)
    # "[Errno 111] Connection refused", or "RemoteDisconnected('Remote end closed connection without response')"
    match = (re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
             or re.search(r"(?:Error|Disconnected)\((?:-?\d+, )?'([^']+)'", text))
    return match.group(1).strip() if match else type(exc).__name__


def error_message(response):
    """The `error` of a JSON error body, or the start of whatever else the server answered."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"]
    text = " ".join(response.text.split())[:200]
    return f"unexpected answer from the server: {text or response.reason}"
