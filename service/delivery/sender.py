"""One attempt's HTTP request (CONTRACT 15): a POST to the checked address (never the name again), with the URL's Host,
TLS checking the URL's host name, a Content-Length body, no proxy (environment variables are not read), no redirect
followed, and a hard deadline: whatever the receiver does (answers a byte at a time, never answers), the attempt ends
after WIS_WEBHOOK_TIMEOUT_SECONDS, when the deadline watch shuts its connection.

The answer's head decides: a whole head within the deadline is the answer (a 2xx succeeds), and its body is read only
as long as the deadline allows (for the log's 1 KB, and to keep the connection); a head the deadline cut short is no
answer, even though http.client reads the shut socket's end as the end of a head.

Connections are urllib3's (HTTPConnection, HTTPSConnection with server_hostname and assert_hostname), kept alive per
destination and reused by the next attempt, as a receiver taking 100 deliveries a second expects.
"""
import heapq
import http.client
import itertools
import socket
import threading
import time

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection

from service.domain.webhook_outcomes import LOGGED_BODY, AttemptResult

# What a response may hold and still leave its connection for the next attempt; a longer one closes it.
DRAINED_BODY = 64 * 1024
# Idle connections kept per destination, and for how long.
IDLE_PER_DESTINATION, IDLE_SECONDS = 2, 30.0


class DeadlineWatch:
    """One thread per process that shuts the connections whose attempt is past its deadline."""

    def __init__(self):
        self._lock = threading.Condition()
        self._heap = []
        self._numbers = itertools.count()
        self._thread = None

    def watch(self, connection, deadline):
        """Shut `connection` at `deadline` (monotonic) unless `unwatch` comes first; a handle for `unwatch`."""
        entry = [deadline, next(self._numbers), connection, False]  # the last: shut by the watch
        with self._lock:
            heapq.heappush(self._heap, entry)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="webhook deadlines", daemon=True)
                self._thread.start()
            self._lock.notify()
        return entry

    def unwatch(self, entry):
        with self._lock:
            entry[2] = None  # left in the heap, skipped when its time comes

    def shut(self, entry):
        """True once the watch has shut the entry's connection: its deadline passed."""
        with self._lock:
            return entry[3]

    def _run(self):
        with self._lock:
            while True:
                while self._heap and self._heap[0][2] is None:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._lock.wait(60)
                    if not self._heap:
                        self._thread = None
                        return
                    continue
                left = self._heap[0][0] - time.monotonic()
                if left > 0:
                    self._lock.wait(left)
                    continue
                entry = heapq.heappop(self._heap)
                entry[3] = True
                _shut(entry[2])


def _shut(connection):
    sock = getattr(connection, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Sender:
    """Sends attempts (service.domain.webhook_outcomes.AttemptResult is what it answers); thread-safe."""

    def __init__(self, timeout, deadlines=None):
        self.timeout = timeout
        self._deadlines = deadlines or DeadlineWatch()
        self._lock = threading.Lock()
        self._idle = {}  # destination -> [(connection, idle since)]

    def send(self, target, headers, body):
        destination = (target.scheme, target.address, target.port, target.host)
        connection, reused = self._connection(destination, target)
        result = self._send_on(connection, target, headers, body)
        if reused and result.status is None and result.failure_kind == "connection":
            # The receiver closed an idle kept-alive connection; a new one is not a second attempt.
            result = self._send_on(self._new(target), target, headers, body)
        return result

    def _send_on(self, connection, target, headers, body):
        deadline = time.monotonic() + self.timeout
        handle = self._deadlines.watch(connection, deadline)
        keep = False
        try:
            connection.request("POST", target.request_target, body=body,
                               headers={"Host": target.host_header, **headers, "Content-Length": str(len(body))},
                               preload_content=False)
            response = connection.getresponse()
            if self._deadlines.shut(handle):
                raise TimeoutError  # the head ended where the watch shut the socket, not with its blank line
            start, keep = _body_start(response)
            return AttemptResult(response.status, response.headers.get("Retry-After"),
                                 response.headers.get("Location"), start, in_allowed_net=target.in_allowed_net)
        except (OSError, urllib3.exceptions.HTTPError, http.client.HTTPException) as error:
            # http.client says an answer is not HTTP (a bad status line, more than 100 headers, a line over 64 KiB)
            # with an HTTPException that is no OSError; RemoteDisconnected is both, and is a connection's failure.
            timed_out = self._deadlines.shut(handle) or time.monotonic() >= deadline or \
                isinstance(error, (TimeoutError, socket.timeout))
            if timed_out:
                return AttemptResult(failure=f"no answer within {self.timeout:g} s (WIS_WEBHOOK_TIMEOUT_SECONDS)",
                                     failure_kind="timeout", in_allowed_net=target.in_allowed_net)
            if isinstance(error, http.client.HTTPException) and not isinstance(error, OSError):
                return AttemptResult(failure=_not_http(error), failure_kind="malformed",
                                     in_allowed_net=target.in_allowed_net)
            return AttemptResult(failure=_words(error, target), failure_kind="connection",
                                 in_allowed_net=target.in_allowed_net)
        finally:
            self._deadlines.unwatch(handle)
            if keep and time.monotonic() < deadline:
                self._keep(target, connection)
            else:
                connection.close()

    def _connection(self, destination, target):
        """(an idle connection to the destination, True), or (a new one, False)."""
        now = time.monotonic()
        with self._lock:
            idle = self._idle.get(destination, [])
            while idle:
                connection, since = idle.pop()
                if now - since < IDLE_SECONDS:
                    return connection, True
                connection.close()
        return self._new(target), False

    def _new(self, target):
        if target.scheme == "https":
            return HTTPSConnection(target.address, target.port, timeout=self.timeout, server_hostname=target.host,
                                   assert_hostname=target.host, cert_reqs="CERT_REQUIRED")
        return HTTPConnection(target.address, target.port, timeout=self.timeout)

    def _keep(self, target, connection):
        destination = (target.scheme, target.address, target.port, target.host)
        with self._lock:
            idle = self._idle.setdefault(destination, [])
            if len(idle) < IDLE_PER_DESTINATION:
                idle.append((connection, time.monotonic()))
                return
        connection.close()


def _body_start(response):
    """(the start of the answer's body for the log, whether its connection can carry the next attempt), read while the
    attempt's deadline allows: the head has decided the outcome, so a body that stalls or breaks off loses only what
    the log would have kept."""
    start = b""
    try:
        while len(start) < LOGGED_BODY and (piece := response.read1(LOGGED_BODY - len(start), decode_content=False)):
            start += piece  # (read1: what has come, so that a body cut short still shows its start)
        return start, _drained(response) and not response.headers.get("Connection", "").lower() == "close"
    except (OSError, urllib3.exceptions.HTTPError, http.client.HTTPException):
        return start, False


def _drained(response):
    """Read the rest of a short answer, so that its connection can carry the next attempt; False for a long one."""
    rest = response.read(DRAINED_BODY, decode_content=False)
    return len(rest) < DRAINED_BODY and response.read(1, decode_content=False) == b""


def _words(error, target):
    """Why a connection failed, in words, without the exception's class names (e.g. "connection refused")."""
    text = str(error.__context__ or error) if isinstance(error, urllib3.exceptions.HTTPError) else str(error)
    text = text.split("] ", 1)[-1] if text.startswith("[") else text
    where = "the address" if target.in_allowed_net else f"{target.address} port {target.port}"
    return f"could not send to {where}: {text[:300] or type(error).__name__}"


def _not_http(error):
    """Why an answer is not HTTP, in words: http.client's own, the received line quoted (at most 100 characters)."""
    if isinstance(error, http.client.BadStatusLine):
        why = f"its first line is {error.line.strip()[:100]!r}"
    elif isinstance(error, http.client.UnknownProtocol):
        why = f"its first line names the protocol {error.version[:100]!r}"
    else:
        why = str(error)[:300] or type(error).__name__
    return f"the receiver's answer is not HTTP: {why}"
