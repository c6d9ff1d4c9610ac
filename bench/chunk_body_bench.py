"""CPU of receiving a 5 MB multipart chunk body from a socket and parsing it, in-process (no HTTP server, no disk), by
the two ways a request's thread can read it under gunicorn (run by hand).

The body (the chunk API's fields, then a 5 MB file part of random bytes, behind the 64 KB that gunicorn's event loop
holds before a thread takes the request) is sent through a socketpair by a thread, and received and parsed by
service/web/uploads/multipart.py:
  (a) `gunicorn's reader`: read 1 MB at a time through gunicorn's Body and LengthReader, as the chunk path read
      wsgi.input before 2026-11-29;
  (b) `in place`: `RequestBody.in_place` (service/web/uploads/request_body.py): straight from the socket into a reused
      1 MB buffer, as the chunk path reads it now;
  (c) `recv_into alone`: the socket read into that buffer, nothing parsed (the floor of both).
The file part goes to a sink that hashes it (SHA-256, as the service's files do) and the script checks the digest.
The ways alternate, body by body; the first round is a warm-up and discarded; the figure is the median, in CPU
milliseconds of the receiving thread (time.thread_time) per body.

    .venv/bin/python bench/chunk_body_bench.py [--rounds 9] [--bodies-per-round 10] [--size-mb 5]
"""
import argparse
import hashlib
import os
import socket
import statistics
import threading
import time

from gunicorn.http.body import Body, LengthReader
from gunicorn.http.unreader import SocketUnreader

from service.web.uploads import multipart
from service.web.uploads.request_body import READ_SIZE, RequestBody

BOUNDARY = b"----chunk-bench-boundary-7f3a"
CONTENT_TYPE = "multipart/form-data; boundary=" + BOUNDARY.decode()
# What gunicorn holds of a body when a thread takes the request (service.server.arrival.HANDOFF_BYTES).
HELD = 64 * 1024


def chunk_body(payload):
    head = b"".join(b'--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (BOUNDARY, name, value)
                    for name, value in ((b"chunkIndex", b"3"), (b"totalChunks", b"40")))
    head += b'--%s\r\nContent-Disposition: form-data; name="file"; filename="c"\r\n\r\n' % BOUNDARY
    return head + payload + b"\r\n--%s--\r\n" % BOUNDARY


class HashingSink:
    def __init__(self):
        self.digest = hashlib.sha256()

    def write(self, data):
        self.digest.update(data)


def gunicorn_reader(sock, unreader, length):
    stream = Body(LengthReader(unreader, length))
    return iter(lambda: stream.read(READ_SIZE), b"")


def in_place(sock, unreader, length):
    return RequestBody({"wsgi.input": Body(LengthReader(unreader, length)), "gunicorn.socket": sock},
                       length).in_place()


def receive(way, body):
    """CPU seconds of the receiving thread for one body received (and parsed) the given way; the file's digest."""
    sender, receiver = socket.socketpair()
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    thread = threading.Thread(target=sender.sendall, args=(body,))
    thread.start()
    try:
        unreader = SocketUnreader(receiver)
        held = b""
        while len(held) < HELD:
            held += receiver.recv(HELD - len(held))
        unreader.unread(held)
        started = time.thread_time()
        sink = HashingSink()
        if way is None:
            buffer = memoryview(bytearray(READ_SIZE))
            left = len(body) - HELD
            while left:
                left -= receiver.recv_into(buffer[:min(READ_SIZE, left)])
        else:
            multipart.parse(way(receiver, unreader, len(body)), CONTENT_TYPE, lambda fields: sink)
        return time.thread_time() - started, sink.digest.hexdigest()
    finally:
        thread.join()
        sender.close()
        receiver.close()


def main():
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--rounds", type=int, default=9)
    arguments.add_argument("--bodies-per-round", type=int, default=10)
    arguments.add_argument("--size-mb", type=int, default=5)
    options = arguments.parse_args()
    payload = os.urandom(options.size_mb * 1024 * 1024)
    expected, body = hashlib.sha256(payload).hexdigest(), chunk_body(payload)
    ways = {"gunicorn's reader": gunicorn_reader, "in place": in_place, "recv_into alone": None}
    milliseconds = {name: [] for name in ways}
    for round_ in range(options.rounds):
        for _ in range(options.bodies_per_round):
            for name, way in ways.items():
                seconds, digest = receive(way, body)
                if way is not None and digest != expected:
                    raise SystemExit(f"{name}: the file part's SHA-256 is {digest}, not {expected}")
                if round_:  # the first round warms up
                    milliseconds[name].append(seconds * 1000)
    print(f"{len(body)} bytes a body, {options.bodies_per_round} bodies a round, {options.rounds - 1} rounds after a "
          "warm-up; CPU ms of the receiving thread per body (the file part hashed with SHA-256 but by the last)")
    for name, values in milliseconds.items():
        print(f"  {name:18} median {statistics.median(values):.2f} ms (min {min(values):.2f}, max {max(values):.2f})")
    reader, placed = (statistics.median(milliseconds[name]) for name in ("gunicorn's reader", "in place"))
    print(f"in place / gunicorn's reader: {placed / reader:.2f} x the CPU")


if __name__ == "__main__":
    main()
