"""CPU per GB of two multipart parsers on a chunk body of the upload API, in-process (no HTTP, no disk).

The body is what requests sends for one chunk (`data={"chunkIndex", "totalChunks"}, files={"file": ...}`: the two
fields, then a 5 MB file part of random bytes). It is copied 1 MB at a time into one reused bytearray, as
service/web/uploads/request_body.py receives it from the socket (recv_into), and parsed by
  (a) the service's own parser, service/web/uploads/multipart.py (werkzeug's sans-IO MultipartDecoder; fields into a
      bytearray, file data written to a sink), and
  (b) streaming-form-data's compiled StreamingFormDataParser, with a Target that writes the file part to the same
      kind of sink and ValueTargets for the two fields.
The sink counts bytes (and the script checks the count and the fields). A third entry, the 1 MB copies alone, shows
what the loop costs before any parsing. They alternate, round by round; the first round is a
warm-up and discarded; the figure is the median over the rest, in CPU seconds (process_time) per GB of body.

    .venv/bin/python bench/multipart_parsers.py [--rounds 9] [--bodies-per-round 40] [--size-mb 5]
"""
import argparse
import os
import statistics
import time

import requests
from streaming_form_data import StreamingFormDataParser
from streaming_form_data.targets import BaseTarget, ValueTarget

from service.web.uploads import multipart
from service.web.uploads.request_body import READ_SIZE

_buffer = bytearray(READ_SIZE)


def blocks_in_place(body):
    """The body in READ_SIZE blocks copied into one reused buffer, each valid until the next (RequestBody.in_place)."""
    view = memoryview(_buffer)
    for start in range(0, len(body), READ_SIZE):
        size = min(READ_SIZE, len(body) - start)
        view[:size] = body[start:start + size]
        yield _buffer if size == READ_SIZE else view[:size]


def chunk_body(size):
    """(content type, body bytes) of one chunk as requests encodes it."""
    request = requests.Request("PATCH", "http://127.0.0.1/uploads/x", data={"chunkIndex": 3, "totalChunks": 40},
                               files={"file": ("c", os.urandom(size))}).prepare()
    return request.headers["Content-Type"], request.body


class Sink:
    def __init__(self):
        self.size = 0

    def write(self, data):
        self.size += len(data)


def parse_werkzeug(body, content_type):
    """The service's own parser (service/web/uploads/multipart.py, over werkzeug's sans-IO MultipartDecoder)."""
    fields, files = multipart.parse(blocks_in_place(body), content_type, lambda fields_so_far: Sink())
    return fields, files["file"][1]


class SinkTarget(BaseTarget):
    """A streaming-form-data Target writing the part's bytes to a sink."""

    def __init__(self, sink):
        super().__init__()
        self.sink = sink

    def on_data_received(self, chunk):
        self.sink.write(chunk)


def parse_sfd(body, content_type):
    parser = StreamingFormDataParser(headers={"Content-Type": content_type})
    sink = Sink()
    values = {name: ValueTarget() for name in ("chunkIndex", "totalChunks")}
    for name, target in values.items():
        parser.register(name, target)
    parser.register("file", SinkTarget(sink))
    for block in blocks_in_place(body):
        parser.data_received(bytes(block))  # it takes bytes only
    return {name: target.value.decode() for name, target in values.items()}, sink


def copies_only(body, content_type):
    """The copies alone, no parsing: what the loop costs before either parser does anything."""
    sink = Sink()
    for block in blocks_in_place(body):
        sink.write(block)
    return sink


def main():
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--rounds", type=int, default=9)
    arguments.add_argument("--bodies-per-round", type=int, default=40)
    arguments.add_argument("--size-mb", type=int, default=5)
    arguments.add_argument("--distinct", type=int, default=1,
                           help="distinct bodies to cycle through (e.g. 40: 200 MB, so the body is not cache-hot)")
    options = arguments.parse_args()
    size = options.size_mb * 1024 * 1024
    bodies = [chunk_body(size) for _ in range(options.distinct)]
    content_type, body = bodies[0]
    parsers = {"werkzeug MultipartDecoder": parse_werkzeug, "streaming-form-data": parse_sfd}
    for name, parse in list(parsers.items()):
        fields, sink = parse(body, content_type)
        assert fields == {"chunkIndex": "3", "totalChunks": "40"}, (name, fields)
        assert sink.size == size, (name, sink.size)
    parsers["1 MB copies alone (baseline)"] = copies_only
    seconds = {name: [] for name in parsers}
    gigabytes = len(body) * options.bodies_per_round / 1e9
    for round_ in range(options.rounds):
        order = list(parsers.items())[::1 if round_ % 2 == 0 else -1]
        for name, parse in order:
            start = time.process_time()
            for index in range(options.bodies_per_round):
                parse(*bodies[index % len(bodies)][::-1])
            if round_:  # the first round warms up
                seconds[name].append((time.process_time() - start) / gigabytes)
    print(f"body {len(body)} bytes ({len(bodies)} distinct), copied {READ_SIZE} at a time; "
          f"{options.bodies_per_round} bodies per round, "
          f"{options.rounds - 1} rounds after a warm-up")
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, values in seconds.items():
        print(f"{name:28s} median {medians[name]:.3f} CPU s/GB  (min {min(values):.3f}, max {max(values):.3f}, "
              f"{1 / medians[name]:.2f} GB/CPU s)")
    werkzeug, sfd = medians["werkzeug MultipartDecoder"], medians["streaming-form-data"]
    print(f"streaming-form-data / werkzeug CPU per GB: {sfd / werkzeug:.2f} "
          f"({abs(1 - sfd / werkzeug) * 100:.0f} % {'less' if sfd < werkzeug else 'more'})")


if __name__ == "__main__":
    main()
