"""Whether a request has arrived far enough for a thread to take it: bytes in, a decision out (no sockets here).

A thread takes a request once its head is whole and either its whole body is here or `HANDOFF_BYTES` of the request
are (a large upload then streams on in the thread as before). The head is parsed by gunicorn's own parser, so its
limits (limit_request_line, limit_request_fields, limit_request_field_size) and its idea of a valid request decide;
the parse is tried only when a blank line has arrived, so a head that trickles in is not parsed again for every byte.
Whatever gunicorn makes of the bytes, it makes again in the thread from the same bytes, and answers there.
"""
import re

from gunicorn.http.body import ChunkedReader, LengthReader
from gunicorn.http.errors import NoMoreData
from gunicorn.http.message import Request
from gunicorn.http.unreader import IterUnreader

# The most a request may hold of the event loop's memory before a thread takes it (head and body together): large
# enough that a client must send this much to get a thread, small enough that a connection held at the limit costs
# little (64 KB is also what a stalled connection may leave in the kernel's receive buffer anyway).
HANDOFF_BYTES = 64 * 1024


class RequestArrival:
    """The bytes of one request received so far, and whether a thread can take it."""

    def __init__(self, cfg, peer_addr, number, limit=HANDOFF_BYTES):
        """`cfg` is gunicorn's configuration, `number` the request's place on its connection (1 for the first)."""
        self.received = bytearray()
        # Set once the head is whole: gunicorn's decision that the client waits for "100 Continue" before its body.
        self.expects_continue = False
        self._cfg, self._peer_addr, self._number, self._limit = cfg, peer_addr, number, limit
        self._blank_line_searched = 0
        self._body = None
        self._malformed = False

    @property
    def room(self):
        """How many more bytes this request may hold before a thread takes it."""
        return self._limit - len(self.received)

    @property
    def head_whole(self):
        return self._body is not None

    def add(self, data):
        """Take bytes that arrived; True when a thread can take the request now."""
        self.received += data
        return self.ready()

    def ready(self):
        """True when a thread can take the request: its head is whole and so is its body or `limit` bytes arrived, or
        the bytes are not a request gunicorn would serve (it answers them in the thread without waiting for more)."""
        if self._body is None and not self._malformed:
            self._parse_head()
        if self._malformed or self.room <= 0:
            return True
        return self._body is not None and self._body.ended(self.received)

    def _parse_head(self):
        blank_line = self.received.find(b"\r\n\r\n", self._blank_line_searched)
        if blank_line < 0:
            # Only the last three bytes can start a blank line that the next bytes complete.
            self._blank_line_searched = max(0, len(self.received) - 3)
            return
        # If this blank line does not end the head (a PROXY protocol header before it), the next one may.
        self._blank_line_searched = blank_line + 1
        # Up to the blank line only: bytes behind it (a body, a pipelined request) are not copied for the parse.
        head_end = blank_line + 4
        unreader = IterUnreader([bytes(self.received[:head_end])])
        try:
            request = Request(self._cfg, unreader, self._peer_addr, self._number)
        except NoMoreData:
            return
        except Exception:  # noqa: BLE001 (gunicorn's parse errors and anything else: the loop must outlive any bytes)
            self._malformed = True
            return
        body_start = head_end - len(unreader.take_buffered())
        reader = request.body.reader
        if isinstance(reader, LengthReader):
            self._body = _LengthBody(body_start + reader.length)
        elif isinstance(reader, ChunkedReader):
            self._body = _ChunkedBody(body_start)
        else:
            self._malformed = True  # gunicorn reads no request body to the end of the connection: not seen here
        # gunicorn keeps this decision (Expect: 100-continue on HTTP/1.1) in a private attribute; without it a loop
        # that sends no "100 Continue" would wait for a body the client holds back.
        self.expects_continue = bool(getattr(request, "_expected_100_continue", False))


class _LengthBody:
    """A body of known length: whole once the bytes reach its end."""

    def __init__(self, end):
        self._end = end

    def ended(self, received):
        return len(received) >= self._end


# A chunk-size line as far as finding the body's end needs (hex digits, then whitespace and extensions): gunicorn
# checks each line strictly when the body is read in the thread, and answers a bad one there.
_CHUNK_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]+)[ \t]*(?:;[^\r\n]*)?")


class _ChunkedBody:
    """A chunked body, followed as it arrives so that each byte is looked at about once: from a chunk-size line it
    skips the chunk's data to the next line; after the last chunk (size 0) the trailers end at a blank line.

    Gunicorn's own ChunkedReader cannot do this: it pulls bytes from a blocking reader and cannot stop to wait for
    more, so it would have to start again from the first chunk whenever bytes arrive."""

    def __init__(self, start):
        self._line = start  # where the next chunk-size line starts
        self._searched = start  # where the search for the end of that line (or of the trailers) resumes
        self._last_chunk = False

    def ended(self, received):
        while not self._last_chunk:
            line_end = received.find(b"\r\n", self._searched)
            if line_end < 0:
                self._searched = max(self._line, len(received) - 1)
                return False
            match = _CHUNK_SIZE_LINE.fullmatch(received, self._line, line_end)
            if match is None:
                return True  # not chunked framing: gunicorn answers it in the thread from the bytes already here
            size = int(match.group(1), 16)
            if size == 0:
                self._last_chunk = True
                self._searched = line_end  # the CRLF of this line starts the blank line of an empty trailer section
            else:
                self._line = self._searched = line_end + 2 + size + 2  # the data, then its CRLF
        trailers_end = received.find(b"\r\n\r\n", self._searched)
        if trailers_end < 0:
            self._searched = max(self._searched, len(received) - 3)
            return False
        return True
