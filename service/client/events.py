"""Change events from the client (CONTRACT 14): the feed through GraphQL, and `follow`, a generator over the live
stream `GET /events` (Server-Sent Events) that resumes with `Last-Event-ID` whenever the connection drops, so that a
follower gets every event once, in seq order, however often the network or a node fails."""
import json
import re
import time

from service.client.errors import ClientError
from service.client.transport import BROKEN, _connection_reason, error_message

EVENT_FIELDS = "seq type timestamp kind id revision change name author comment"
EVENTS_QUERY = (f"query($after: Int, $first: Int, $types: [String!]) {{ events(after: $after, first: $first, "
                f"types: $types) {{ {EVENT_FIELDS} }} }}")
# The server's keepalive comes at least every 15 s: a connection silent for this long is dead.
READ_TIMEOUT = 45.0
# Until the server's `retry:` says otherwise, and after a 503 without Retry-After.
DEFAULT_RECONNECT_SECONDS = 3.0
MAX_RECONNECT_SECONDS = 60.0
# What is read from the connection at once: a chunked answer (the service's) yields each chunk as it comes, in pieces of
# at most this size, so an event is not held back waiting for more.
READ_SIZE = 512
# The only line ends of Server-Sent Events (HTML's event-stream grammar): not U+2028, U+2029, U+0085 or the other
# breaks str.splitlines() and requests' iter_lines(decode_unicode=True) split on, which a name may hold.
LINE_END = re.compile(rb"\r\n|\r|\n")


def events_page(client, after=None, first=100, types=None):
    """One page of the org's events after `after` (oldest first), as the `events` query answers them."""
    return client.graphql(EVENTS_QUERY, {"after": after, "first": first, "types": types})["events"]


def follow(transport, after=None, types=None, read_timeout=READ_TIMEOUT, sleep=time.sleep, on_outage=None):
    """Yield each event of the stream as its envelope ({"type", "timestamp", "data": {"seq", ...}}), in seq order,
    from the one after `after` (None: only events committed from now on). A dropped connection, a node that died, or a
    server at its cap of streams is met by connecting again with `Last-Event-ID`, after the server's `retry` delay; an
    answer of 4xx but 429 raises ClientError. When the events after the start were pruned (or a test-mode reset
    numbered them again), a {"type": "reset", "data": {"oldest": n}} comes first: re-read the state, then carry on.
    `on_outage(reason)` is told once when connecting fails (no connection, a 5xx or 429 answer), with why, however long
    the failures last, and `on_outage(None)` once a stream is open again."""
    last, delay, outage = after, DEFAULT_RECONNECT_SECONDS, _Outage(on_outage)
    session = transport.new_session()
    try:
        while True:
            headers = {"Accept": "text/event-stream"}
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            try:
                response = session.get(f"{transport.base_url}/events", headers=headers, stream=True,
                                       params={"types": ",".join(types)} if types else None,
                                       timeout=(transport.timeout, read_timeout))
            except BROKEN as error:
                outage.began(f"cannot reach {transport.base_url} ({_connection_reason(error)})")
                sleep(delay)
                continue
            with response:
                if response.status_code in (429, 503) or response.status_code >= 500:
                    outage.began(f"{transport.base_url} answered {error_message(response)} (HTTP "
                                 f"{response.status_code})")
                    sleep(_retry_after(response, delay))
                    continue
                if response.status_code >= 400:
                    raise ClientError(response.status_code, error_message(response))
                outage.ended()
                try:
                    for message in messages(lines_of(response.iter_content(READ_SIZE))):
                        if message.get("retry") is not None:
                            delay = min(message["retry"] / 1000, MAX_RECONNECT_SECONDS)
                        if message.get("id") is not None:
                            last = int(message["id"])
                        if message["event"] == "reset":
                            yield {"type": "reset", "data": json.loads(message["data"])}
                        elif message.get("data"):
                            yield json.loads(message["data"])
                except BROKEN:
                    pass  # dropped: connect again from the last event seen
            sleep(delay)
    finally:
        session.close()


class _Outage:
    """Whether following works, told to `report` when that changes: once when it stops (with why), once when it works
    again; not at every attempt, every few seconds, between the two."""

    def __init__(self, report):
        self.report, self.lasting = report, False

    def began(self, reason):
        if not self.lasting and self.report is not None:
            self.report(reason)
        self.lasting = True

    def ended(self):
        if self.lasting and self.report is not None:
            self.report(None)
        self.lasting = False


def lines_of(chunks):
    """The lines of a Server-Sent Events stream from its bytes as they come (`chunks`), each decoded as UTF-8 (a bad
    sequence becomes U+FFFD, as HTML says), the BOM a stream may start with dropped. A line ends only with CR LF, LF
    or CR, also when a chunk ends between the CR and the LF; a last line without its end is not a line."""
    pieces, after_cr, first = [], False, True
    for chunk in chunks:
        if after_cr and chunk.startswith(b"\n"):
            chunk, after_cr = chunk[1:], False  # the LF of a CR LF the previous chunk ended in
        if not chunk:
            continue
        after_cr = chunk.endswith(b"\r")
        *ends, rest = LINE_END.split(chunk)
        for end in ends:
            line = (b"".join(pieces) + end if pieces else end).decode("utf-8", "replace")
            pieces = []
            if first:
                line, first = line.removeprefix("\ufeff"), False
            yield line
        if rest:
            pieces.append(rest)


def messages(lines):
    """The messages of a Server-Sent Events stream (HTML's event-stream parsing) from its lines: dicts with `event`
    (default "message"), `data` (its lines joined with newlines), and `id` and `retry` when sent, one per blank line
    that ends at least one of them; comments are skipped, and so is a message the stream ends before its blank line."""
    message = {}
    for line in lines:
        if line == "":
            if message.keys() - {"event"}:  # an event name alone is not dispatched
                yield {"event": message.get("event", "message"), **message}
            message = {}
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            message["data"] = message["data"] + "\n" + value if "data" in message else value
        elif field == "event":
            message["event"] = value
        elif field == "id" and "\0" not in value:
            message["id"] = value
        elif field == "retry" and value.isdigit():
            message["retry"] = int(value)


def _retry_after(response, default):
    value = response.headers.get("Retry-After", "")
    return min(float(value), MAX_RECONNECT_SECONDS) if value.isdigit() else default

