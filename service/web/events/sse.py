"""Server-Sent Events as the wire carries them (HTML's `text/event-stream`): lines ending in `\\n`, a message's fields
then a blank line. Both streams write with these: GET /events and GraphQL subscriptions (service.web.events.view,
service.web.events.subscriptions)."""
import orjson

CONTENT_TYPE = "text/event-stream; charset=utf-8"
# Headers of every stream: nothing may keep or buffer it (nginx buffers an answer unless told not to).
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
# How long a client waits before it connects again after its stream ended or broke (the stream's first line).
RETRY_MILLISECONDS = 3000
# How often a stream with nothing to say writes a comment line: proxies and clients see it is alive (at least every
# 15 s, CONTRACT 14), and a write to a client that went away without a word fails.
KEEPALIVE_SECONDS = 12
KEEPALIVE = b": keepalive\n\n"
RETRY = f"retry: {RETRY_MILLISECONDS}\n\n".encode()


def message(event, data, seq=None):
    """One message: `id: <seq>` (when given), `event: <event>`, `data: <data as one line of JSON>` (None: an empty
    data line), then a blank line."""
    head = f"id: {seq}\n" if seq is not None else ""
    body = b"" if data is None else b" " + orjson.dumps(data)
    return f"{head}event: {event}\ndata:".encode() + body + b"\n\n"
