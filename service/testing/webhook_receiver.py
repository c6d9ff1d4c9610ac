"""WebhookReceiver: a receiver of webhooks on a free 127.0.0.1 port, for tests of the service's webhooks (CONTRACT 15)
and of an integrator's own handling of them. It records every delivery with its signature checked by the
`standardwebhooks` library, and answers with the faults a test queues: an error status, a timeout, a redirect, a slow
2xx.

    with WebhookReceiver() as receiver:
        client.webhook_subscribe("mes", receiver.url, secret=receiver.secret)
        client.create_station({"id": "press_1", "name": "Press 1"})
        [delivery] = receiver.wait_for(1)
        assert delivery.verified and delivery.json["type"] == "station.created"
        receiver.fail(status=500)              # the next delivery is answered 500 (the service retries it)
"""
import base64
import json
import secrets
import threading
import time
from collections import deque
from typing import NamedTuple

from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from service.interface.webhooks import ID_HEADER, SECRET_PREFIX, SIGNATURE_HEADER, TIMESTAMP_HEADER

WAIT_TIMEOUT = 10.0
PATH = "/hooks"


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args, **kwargs):
        pass  # a line per delivery would drown the output of the test suite


class ReceivedDelivery(NamedTuple):
    """One request the receiver got: its Standard Webhooks headers, its body, whether its signature verified with the
    receiver's secret, and the status it was answered (or None when it was left without an answer)."""
    id: str | None
    timestamp: str | None
    signature: str | None
    body: bytes
    headers: dict
    verified: bool
    status: int | None
    received_at: float  # time.monotonic()
    peer: tuple  # (address, port) the request came from

    @property
    def json(self):
        return json.loads(self.body)


class WebhookReceiver:
    """A threaded werkzeug server on 127.0.0.1 that takes webhooks at `url` (`start()`/`stop()` or `with`)."""

    def __init__(self, secret=None, host="127.0.0.1", port=0):
        self.secret = secret or SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()
        self._lock = threading.Condition()
        self._received = []
        self._faults = deque()
        self._always = {"status": 204}
        self._stopping = threading.Event()
        self._server = make_server(host, port, self._app, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://{host}:{self._server.server_port}{PATH}"
        self._thread = None

    # -- what to answer ------------------------------------------------------------------------------------------------

    def fail(self, status=500, times=1, retry_after=None, body="failed on purpose"):
        """Answer the next `times` deliveries (None: every one from now on) with `status` (410 disables the
        subscription; 429 and 503 with `retry_after` seconds are retried then)."""
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        self._queue(times, {"status": status, "headers": headers, "body": body})

    def hang(self, seconds=60.0, times=1):
        """Answer the next `times` deliveries only after `seconds` (longer than the service waits: a timeout)."""
        self._queue(times, {"delay": seconds, "status": 204, "hang": True})

    def slow(self, seconds, times=1):
        """Answer the next `times` deliveries 204 after `seconds`."""
        self._queue(times, {"delay": seconds, "status": 204})

    def redirect(self, location, status=302, times=1):
        """Answer the next `times` deliveries with a redirect to `location` (the service does not follow it)."""
        self._queue(times, {"status": status, "headers": {"Location": location}, "body": ""})

    def _queue(self, times, fault):
        """The next `times` deliveries get `fault`; with `times=None`, every delivery from now on (until `clear`)."""
        with self._lock:
            if times is None:
                self._faults.clear()
                self._always = fault
            else:
                self._faults.extend([fault] * times)

    # -- what was received ---------------------------------------------------------------------------------------------

    @property
    def deliveries(self):
        """Every request received so far, in order of arrival."""
        with self._lock:
            return list(self._received)

    def wait_for(self, count, timeout=WAIT_TIMEOUT, answered=True):
        """The first `count` deliveries answered with a 2xx (with `answered=False`: any request), once that many came;
        AssertionError after `timeout` seconds, saying what did come."""
        __tracebackhide__ = True
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                found = [delivery for delivery in self._received
                         if not answered or (delivery.status is not None and 200 <= delivery.status < 300)]
                if len(found) >= count:
                    return found[:count]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"expected {count} deliveries within {timeout:g} s, got {len(found)}: "
                                         + ", ".join(f"{delivery.id} -> {delivery.status}" for delivery in
                                                     self._received[-20:]))
                self._lock.wait(left)

    def clear(self):
        """Forget what was received and the faults still queued."""
        with self._lock:
            self._received.clear()
            self._faults.clear()
            self._always = {"status": 204}

    # -- the server ----------------------------------------------------------------------------------------------------

    @Request.application
    def _app(self, request):
        body = request.get_data()
        with self._lock:
            fault = self._faults.popleft() if self._faults else self._always
        if fault.get("hang"):
            self._record(request, body, None)  # the service has given up before the answer comes
        if fault.get("delay"):
            self._stopping.wait(fault["delay"])
        status = fault["status"]
        if not fault.get("hang"):
            self._record(request, body, status)
        return Response(fault.get("body", ""), status=status, headers=fault.get("headers", {}))

    def _record(self, request, body, status):
        from standardwebhooks.webhooks import Webhook, WebhookVerificationError

        headers = {name.lower(): value for name, value in request.headers.items()}
        try:
            Webhook(self.secret).verify(body, headers)
            verified = True
        except WebhookVerificationError:
            verified = False
        delivery = ReceivedDelivery(headers.get(ID_HEADER), headers.get(TIMESTAMP_HEADER),
                                    headers.get(SIGNATURE_HEADER), body, headers, verified, status, time.monotonic(),
                                    (request.remote_addr, request.environ.get("REMOTE_PORT")))
        with self._lock:
            self._received.append(delivery)
            self._lock.notify_all()

    def start(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="webhook receiver",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self):
        self._stopping.set()  # a delayed answer ends now
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()
