"""The body of an upload request (a tus PATCH or creation-with-upload, a multipart chunk or file), read from the
server's input in large blocks."""
import threading

# The body is received in blocks this large. On the tus path each is written and hashed
# (service.storage.common.write_behind) while the next arrives: 1 MB blocks measured 1.15 x the throughput of 4 MB ones
# (a shorter wait for the last block's writing and hashing before the fdatasync; medians of 7 alternated 500 MB
# uploads) and hold less memory.
READ_SIZE = 1024 * 1024


class RequestBody:
    """A request body read from the server's input, `READ_SIZE` at a time, up to its Content-Length (or to the end of
    a chunked body). After iterating, `cut_off` tells whether the client went away before the end.

    Under gunicorn, a body of known length is received straight from the connection's socket into one reusable
    buffer (`recv_into`), after the bytes gunicorn already holds: its own reader would copy every byte several times
    through BytesIO buffers. Gunicorn's reader is told how much was taken, so it stays right about the connection
    (a body left unread is drained by gunicorn as before)."""

    def __init__(self, environ, length):
        self._environ = environ
        self.length = length
        self.cut_off = False

    def __iter__(self):
        """The body's blocks as bytes, each the caller's to keep (the tus path hands them to other threads)."""
        for block in self._blocks(own_last_block=False):
            yield bytes(block)  # no copy of a block that is bytes already

    def in_place(self):
        """The body's blocks without a copy, each valid only until the next one is asked for: the receive buffer
        itself (a bytearray) when a block fills it, a bytearray of its own for the last, shorter block (which the
        multipart decoder can then search where it was received: a memoryview has no `find`), a memoryview when the
        body was cut off, or bytes. For a caller that is done with each block before it asks for the next (the
        multipart parser writes and hashes it in the request's thread)."""
        return self._blocks(own_last_block=True)

    def _blocks(self, own_last_block):
        direct = _gunicorn_body(self._environ) if self.length is not None else None
        return self._from_socket(*direct, own_last_block) if direct else self._from_input(self._environ["wsgi.input"])

    def _from_input(self, stream):
        remaining = self.length
        while remaining is None or remaining > 0:
            try:
                block = stream.read(READ_SIZE if remaining is None else min(READ_SIZE, remaining))
            except Exception:
                # The connection broke mid-body (reset, timeout), or its chunked framing did (gunicorn raises its own
                # ParseException subclasses for that, not OSError): what arrived before is kept.
                self.cut_off = True
                return
            if not block:
                self.cut_off = remaining is not None
                return
            if remaining is not None:
                remaining -= len(block)
            yield block

    def _from_socket(self, sock, held, reader, own_last_block):
        if held:
            yield held
        buffer = _buffers.take()
        try:
            with memoryview(buffer) as whole:
                while reader.length > 0 and not self.cut_off:
                    if reader.length >= len(buffer):
                        block = buffer
                    else:
                        # The last block: in a bytearray of its own length when asked for (allocating it costs a
                        # caller that copies each block anyway more than it saves), else in the buffer.
                        block = bytearray(reader.length) if own_last_block else whole[:reader.length]
                    got = self._receive(sock, reader, block)
                    if got == len(block):
                        yield block
                    elif got:
                        yield memoryview(block)[:got]
        finally:
            _buffers.give_back(buffer)

    def _receive(self, sock, reader, block):
        """Receive up to len(`block`) bytes of the body into `block` (a bytearray or a memoryview); how many arrived
        (fewer when it was cut off)."""
        got = 0
        try:
            with memoryview(block) as view:
                while got < len(block):
                    received = sock.recv_into(view[got:])
                    if not received:
                        break
                    got += received
                    reader.length -= received
        except OSError:
            # The connection broke mid-body: what arrived before is kept.
            pass
        self.cut_off = got < len(block)
        return got


class _BufferPool:
    """Receive buffers reused from one request to the next: a fresh buffer per PATCH cost a memset and a page fault
    per 4 KB (about a tenth of a worker's time in a perf profile). At most `keep` idle ones are kept, so a worker
    that once served many uploads at a time does not hold on to their memory."""

    def __init__(self, size, keep):
        self._size, self._keep = size, keep
        self._idle = []
        self._lock = threading.Lock()

    def take(self):
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return bytearray(self._size)

    def give_back(self, buffer):
        with self._lock:
            if len(self._idle) < self._keep:
                self._idle.append(buffer)


# Per worker process (a cache of scratch memory, not state): the buffers of a few uploads at a time.
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
