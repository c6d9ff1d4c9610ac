"""Streaming multipart/form-data parsing for uploads, on werkzeug's sans-IO `MultipartDecoder`.

Werkzeug's own `MultiPartParser` does not fit an upload of 10 MB per request:
- it reads the body 64 KB at a time, and a larger read trips its form-memory limit, which it applies to every
  read rather than to the form fields. Here the body is read `READ_SIZE` at a time (gunicorn then receives it
  from the socket in pieces that large) and only the fields count against `FORM_FIELD_LIMIT`;
- it tells the stream factory nothing of the fields parsed so far. Here `open_file(fields)` gets the fields sent
  before the file part, so a chunk that continues a stream in order can be written straight onto the stream.
And the decoder (`_Decoder`) takes a part's data from its buffer in one copy, where werkzeug's makes three of every
megabyte (a slice to look for a partial boundary at its end, then a slice and its bytes): on the chunk path, where
each request carries megabytes, those copies cost as much CPU as hashing the bytes.
"""
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.http import parse_options_header
from werkzeug.sansio.multipart import LINE_BREAK_RE, Data, Epilogue, Field, File, MultipartDecoder, NeedData, State

from service.errors import BodyTooLarge, MalformedBody
from service.interface import FORM_FIELD_LIMIT

READ_SIZE = 1024 * 1024
MAX_PARTS = 100


class _Decoder(MultipartDecoder):
    """werkzeug's MultipartDecoder, with `_parse_data` (its one method that takes a part's data from the buffer)
    answering the same without copying the buffer: the partial boundary is looked for in the buffer's tail only, and
    the data is copied out once. tests/web/uploads/test_uploads_multipart.py holds it to werkzeug's answers."""

    def _parse_data(self, data, *, start):
        data_start = LINE_BREAK_RE.match(data).end() if start else 0
        if data.find(b"--" + self.boundary) == -1:
            data_end = del_index = self._partial_boundary_start(data, data_start)
            more_data = True
        else:
            match = self.boundary_re.search(data)
            if match is not None:
                self.state = State.EPILOGUE if match.group(1).startswith(b"--") else State.PART
                data_end, del_index = match.start(), match.end()
            else:
                data_end = del_index = self._partial_boundary_start(data, data_start)
            more_data = match is None
        # The views are released before the caller deletes from the buffer (a bytearray with a view cannot resize).
        with memoryview(data) as view, view[data_start:data_end] as part:
            return bytes(part), del_index, more_data

    def _partial_boundary_start(self, data, data_start):
        """Where, from `data_start` on, a boundary cut short by the end of `data` could begin (its line break, within
        a boundary's length of the end), else the end: werkzeug's `_last_partial_boundary_index`, without a copy."""
        end = len(data)
        tail = max(data_start, end - len(b"\r\n--" + self.boundary))
        found = [index for index in (data.rfind(b"\n", tail), data.rfind(b"\r", tail)) if index != -1]
        return min(found, default=end)


def parse(stream, content_type, content_length, open_file):
    """Parse a multipart body from `stream`; return (fields, files).

    `fields` maps each field name to its first value (as werkzeug's `MultiDict.to_dict()` would); `files` maps each
    file part's name to (filename, what `open_file(fields so far)` returned, with the part's bytes written to it).
    `open_file` keeps track of what it opens: after an error the caller tidies those up.
    """
    boundary = parse_options_header(content_type)[1].get("boundary")
    if not boundary:
        raise MalformedBody("the multipart/form-data body has no boundary in its Content-Type")
    decoder = _Decoder(boundary.encode("latin-1"), max_parts=MAX_PARTS)
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
