"""Streaming multipart/form-data parsing for uploads, on werkzeug's sans-IO `MultipartDecoder`.

Werkzeug's own `MultiPartParser` does not fit an upload of 10 MB per request:
- it reads the body 64 KB at a time, and a larger read trips its form-memory limit, which it applies to every
  read rather than to the form fields. Here the body is read `READ_SIZE` at a time (gunicorn then receives it
  from the socket in pieces that large) and only the fields count against `FORM_FIELD_LIMIT`;
- it tells the stream factory nothing of the fields parsed so far. Here `open_file(fields)` gets the fields sent
  before the file part, so a chunk that continues a stream in order can be written straight onto the stream.
"""
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.http import parse_options_header
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData

from service.errors import BodyTooLarge, MalformedBody
from service.interface import FORM_FIELD_LIMIT

READ_SIZE = 1024 * 1024
MAX_PARTS = 100


def parse(stream, content_type, content_length, open_file):
    """Parse a multipart body from `stream`; return (fields, files).

    `fields` maps each field name to its first value (as werkzeug's `MultiDict.to_dict()` would); `files` maps each
    file part's name to (filename, what `open_file(fields so far)` returned, with the part's bytes written to it).
    `open_file` keeps track of what it opens: after an error the caller tidies those up.
    """
    boundary = parse_options_header(content_type)[1].get("boundary")
    if not boundary:
        raise MalformedBody("the multipart/form-data body has no boundary in its Content-Type")
    decoder = MultipartDecoder(boundary.encode("latin-1"), max_parts=MAX_PARTS)
    fields, files = {}, {}
    remaining = content_length
    part = sink = None
    while True:
        data = stream.read(READ_SIZE if remaining is None else min(READ_SIZE, remaining))
        if remaining is not None:
            remaining -= len(data)
        try:
            decoder.receive_data(data or None)
            event = decoder.next_event()
            while not isinstance(event, (NeedData, Epilogue)):
                if isinstance(event, Field):
                    part, sink = event, bytearray()
                elif isinstance(event, File):
                    part, sink = event, open_file(dict(fields))
                    files.setdefault(part.name, (part.filename, sink))
                elif isinstance(event, Data):
                    if isinstance(part, Field):
                        sink += event.data
                        if len(sink) > FORM_FIELD_LIMIT:
                            raise BodyTooLarge(f"{part.name}: a form field is at most {FORM_FIELD_LIMIT // 1024} KB")
                        if not event.more_data:
                            fields.setdefault(part.name, sink.decode("utf-8", "replace"))
                    else:
                        sink.write(event.data)
                event = decoder.next_event()
        except RequestEntityTooLarge:
            raise MalformedBody(f"the multipart/form-data body has more than {MAX_PARTS} parts") from None
        except ValueError:
            # The decoder found the body cut short, or not framed by the boundary its Content-Type names.
            message = ("the multipart/form-data body is malformed or cut short: each part must start with --<boundary> "
                       "as its Content-Type names it, and the body end with --<boundary>--")
            raise MalformedBody(message) from None
        if isinstance(event, Epilogue) or not data:
            return fields, files


class ByteCounter:
    """A file sink that keeps nothing: it counts the bytes of a file part that is too large to store."""

    def __init__(self):
        self.size = 0

    def write(self, data):
        self.size += len(data)
