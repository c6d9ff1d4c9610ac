"""The HTTP side of tus 1.0 (CONTRACT 7): which requests are tus requests, their headers parsed and checked, the
headers of the answers, and the PATCH body read from the server's input in large blocks."""
import base64
import binascii
import re
import threading
from email.utils import formatdate

from service.errors import InvalidRequest, TusVersionUnsupported, UnsupportedChecksum
from service.interface import (
    TUS_CHECKSUM_ALGORITHMS, TUS_CONTENT_TYPE, TUS_EXTENSIONS, TUS_MAX_SIZE, TUS_VERSION,
)

# The body is received in blocks this large, each written and hashed (service.storage.write_behind) while the next
# arrives: 1 MB blocks measured 1.15 x the throughput of 4 MB ones (a shorter wait for the last block's writing and
# hashing before the fdatasync; medians of 7 alternated 500 MB uploads) and hold less memory.
READ_SIZE = 1024 * 1024
DIGITS = re.compile(r"[0-9]{1,19}")
METADATA_KEY = re.compile(r"[^\s,]+")
# Headers whose presence makes a request a tus request (a chunk API request sends none of them).
TUS_HEADERS = ("Tus-Resumable", "Upload-Length", "Upload-Offset", "Upload-Metadata", "Upload-Defer-Length",
               "Upload-Concat", "Upload-Checksum")

OPTIONS_HEADERS = {
    "Tus-Resumable": TUS_VERSION,
    "Tus-Version": TUS_VERSION,
    "Tus-Extension": ",".join(TUS_EXTENSIONS),
    "Tus-Max-Size": str(TUS_MAX_SIZE),
    "Tus-Checksum-Algorithm": ",".join(TUS_CHECKSUM_ALGORITHMS),
}


def is_tus_request(headers, mimetype):
    """A request that speaks tus: any tus header, or a body of type application/offset+octet-stream."""
    return mimetype == TUS_CONTENT_TYPE or any(name in headers for name in TUS_HEADERS)


def require_version(headers):
    """412 unless `Tus-Resumable: 1.0.0`."""
    if headers.get("Tus-Resumable") != TUS_VERSION:
        sent = headers.get("Tus-Resumable")
        raise TusVersionUnsupported("Tus-Resumable: this server speaks tus 1.0.0 only; send Tus-Resumable: 1.0.0"
                                    + (f" (not {sent!r})" if sent is not None else ""))


def integer_header(headers, name):
    """A non-negative integer header, or 400 naming it."""
    value = headers.get(name)
    if value is None:
        raise InvalidRequest(f"{name}: is required")
    if not DIGITS.fullmatch(value.strip()):
        raise InvalidRequest(f"{name}: must be a non-negative integer, not {value!r}")
    return int(value)


def creation_length(headers):
    """Upload-Length of a creation request; deferred length and concatenation are refused."""
    if "Upload-Defer-Length" in headers:
        raise InvalidRequest("Upload-Defer-Length: not supported; send Upload-Length (the creation-defer-length "
                             "extension is not offered)")
    if "Upload-Concat" in headers:
        raise InvalidRequest("Upload-Concat: not supported (the concatenation extension is not offered)")
    return integer_header(headers, "Upload-Length")


def parse_metadata(raw):
    """Decode Upload-Metadata (`key base64value` pairs, comma-separated; a key may come alone) into {key: text}."""
    metadata = {}
    for pair in (raw or "").split(","):
        pair = pair.strip()
        if not pair:
            continue
        key, _, value = pair.partition(" ")
        value = value.strip()
        if not METADATA_KEY.fullmatch(key) or " " in value:
            raise InvalidRequest(f"Upload-Metadata: {pair!r} is not 'key base64value'")
        if key in metadata:
            raise InvalidRequest(f"Upload-Metadata: key {key!r} is sent twice")
        try:
            metadata[key] = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidRequest(f"Upload-Metadata: the value of {key!r} is not valid base64 of UTF-8 text") from None
    return metadata


def parse_checksum(raw):
    """(algorithm, digest bytes) of an Upload-Checksum header, or None when absent."""
    if raw is None:
        return None
    algorithm, _, encoded = raw.strip().partition(" ")
    if algorithm not in TUS_CHECKSUM_ALGORITHMS:
        raise UnsupportedChecksum(f"Upload-Checksum: algorithm {algorithm!r} is not supported; use one of "
                                  f"{', '.join(TUS_CHECKSUM_ALGORITHMS)}")
    try:
        return algorithm, base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("Upload-Checksum: the checksum is not valid base64") from None


def require_body_type(mimetype):
    if mimetype != TUS_CONTENT_TYPE:
        raise InvalidRequest(f"Content-Type: a tus PATCH body is {TUS_CONTENT_TYPE}")


def http_date(timestamp):
    """An HTTP date (RFC 9110), as Upload-Expires carries it."""
    return formatdate(timestamp, usegmt=True)


def upload_headers(offset=None, expires=None, media_path=None):
    """The headers of a tus answer about one upload."""
    headers = {"Tus-Resumable": TUS_VERSION}
    if offset is not None:
        headers["Upload-Offset"] = str(offset)
    if expires is not None:
        headers["Upload-Expires"] = http_date(expires)
    if media_path is not None:
        headers["Media-Path"] = media_path
    return headers


class RequestBody:
    """A PATCH body read from the server's input, `READ_SIZE` at a time, up to its Content-Length (or to the end of a
    chunked body). After iterating, `cut_off` tells whether the client went away before the end.

    Under gunicorn, a body of known length is received straight from the connection's socket into one reusable
    buffer (`recv_into`), after the bytes gunicorn already holds: its own reader would copy every byte several times
    through BytesIO buffers. Gunicorn's reader is told how much was taken, so it stays right about the connection
    (a body left unread is drained by gunicorn as before)."""

    def __init__(self, environ, length):
        self._environ = environ
        self.length = length
        self.cut_off = False

    def __iter__(self):
        direct = _gunicorn_body(self._environ) if self.length is not None else None
        return self._from_socket(*direct) if direct else self._from_input(self._environ["wsgi.input"])

    def _from_input(self, stream):
        remaining = self.length
        while remaining is None or remaining > 0:
            try:
                block = stream.read(READ_SIZE if remaining is None else min(READ_SIZE, remaining))
            except (OSError, ValueError):
                # The connection broke mid-body (reset, timeout, bad chunk framing): what arrived before is kept.
                self.cut_off = True
                return
            if not block:
                self.cut_off = remaining is not None
                return
            if remaining is not None:
                remaining -= len(block)
            yield block

    def _from_socket(self, sock, held, reader):
        if held:
            yield held
        buffer = _buffers.take()
        try:
            yield from self._receive(sock, reader, buffer)
        finally:
            _buffers.give_back(buffer)

    def _receive(self, sock, reader, buffer):
        while reader.length > 0:
            want = min(len(buffer), reader.length)
            got = 0
            try:
                while got < want:
                    received = sock.recv_into(buffer[got:want])
                    if not received:
                        break
                    got += received
                    reader.length -= received
            except OSError:
                # The connection broke mid-body: what arrived before is kept.
                self.cut_off = True
            if got < want:
                self.cut_off = True
            if got:
                # One copy: the block is written and hashed by the append's thread while the next is received here.
                yield bytes(buffer[:got])
            if self.cut_off:
                return


class _BufferPool:
    """Receive buffers reused from one PATCH to the next: a fresh buffer per PATCH cost a memset and a page fault
    per 4 KB (about a tenth of a worker's time in a perf profile). At most `keep` idle ones are kept, so a worker
    that once served many PATCHes at a time does not hold on to their memory."""

    def __init__(self, size, keep):
        self._size, self._keep = size, keep
        self._idle = []
        self._lock = threading.Lock()

    def take(self):
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return memoryview(bytearray(self._size))

    def give_back(self, buffer):
        with self._lock:
            if len(self._idle) < self._keep:
                self._idle.append(buffer)


# Per worker process (a cache of scratch memory, not state): the buffers of a few PATCHes at a time.
_buffers = _BufferPool(READ_SIZE, keep=2)


def _gunicorn_body(environ):
    """(socket, bytes gunicorn holds of the body already, its LengthReader) when the body can be received straight
    from the socket (gunicorn's Body over a LengthReader over a SocketUnreader, nothing read yet), else None."""
    body, sock = environ.get("wsgi.input"), environ.get("gunicorn.socket")
    reader = getattr(body, "reader", None)
    unreader = getattr(reader, "unreader", None)
    if sock is None or type(reader).__name__ != "LengthReader" or type(unreader).__name__ != "SocketUnreader" \
            or not hasattr(unreader, "take_buffered") or body.buf.tell():
        return None
    ahead = unreader.take_buffered()
    held, rest = ahead[:reader.length], ahead[reader.length:]
    if rest:
        # A pipelined next request: it stays with gunicorn.
        unreader.unread(rest)
    reader.length -= len(held)
    return sock, held, reader
