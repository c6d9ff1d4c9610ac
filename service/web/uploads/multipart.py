"""Streaming multipart/form-data parsing for uploads, on werkzeug's sans-IO `MultipartDecoder`.

Werkzeug's own `MultiPartParser` does not fit an upload of 10 MB per request:
- it reads the body 64 KB at a time, and a larger read trips its form-memory limit, which it applies to every
  read rather than to the form fields. Here the body arrives in the blocks of `request_body.RequestBody` (1 MB,
  received from the socket without gunicorn's reader, which copies every byte several times) and only the fields
  count against `FORM_FIELD_LIMIT`;
- it tells the stream factory nothing of the fields parsed so far. Here `open_file(fields)` gets the fields sent
  before the file part, so a chunk that continues a stream in order can be written straight onto the stream.
And the decoder (`_Decoder`) copies less than werkzeug's, which makes three copies of every megabyte of a part's data
(a slice to look for a partial boundary at its end, then a slice and its bytes) after the one into its buffer: what
of a block is surely a part's data (all of it, or what comes before the first boundary in it) is handed to the part's
file where it was received; the rest (a part's head, a boundary) is decoded by werkzeug's rules, its data copied out
once. On the chunk path, where each request carries megabytes, the copies cost as much CPU as hashing the bytes.
"""
import itertools

from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.http import parse_options_header
from werkzeug.sansio.multipart import LINE_BREAK_RE, Data, Epilogue, Field, File, MultipartDecoder, NeedData, State

from service.errors import BodyTooLarge, InvalidRequest, MalformedBody
from service.interface import FORM_FIELD_LIMIT

MAX_PARTS = 100
# The one part of an upload form that is a file; every other part is a form field.
FILE_PART = "file"


class _Decoder(MultipartDecoder):
    """werkzeug's MultipartDecoder, fed by `events(block)`, which hands a part's data on in place, and with
    `_parse_data` (its one method that takes a part's data from the buffer) answering the same without copying the
    buffer: the partial boundary is looked for in the buffer's tail only, a boundary from the first delimiter on, and
    the data is copied out once.
    tests/web/uploads/test_uploads_multipart.py holds it to werkzeug's answers."""

    def events(self, block):
        """The events that `block` (bytes-like; None when the body has ended) brings, as `receive_data` and then
        `next_event` until it needs data would give them, the Epilogue last. In a part's data, what of `block` is
        surely data (all of it up to where a boundary cut short could begin, or up to the line break before the first
        delimiter in it) comes out as Data of the few bytes held back before it, then of the block itself, a view of
        it; the rest of a block with a delimiter is decoded by werkzeug's rules. The same bytes as werkzeug's Data
        events, cut in other places."""
        if block is not None and self.state is State.DATA and (surely_data := self._surely_data(block)):
            end, delimiter_found = surely_data
            held = bytes(self.buffer)
            self.buffer[:] = block[end:]  # what is left to decode: a boundary's start, or the bytes to hold back
            if held:
                yield Data(data=held, more_data=True)
            if end:
                yield Data(data=memoryview(block)[:end], more_data=True)
            if not delimiter_found:
                return
        else:
            self.receive_data(block)
        while not isinstance(event := self.next_event(), NeedData):
            yield event
            if isinstance(event, Epilogue):
                return

    def _surely_data(self, block):
        """(how much of `block`'s start is surely the part's data, whether a delimiter follows it in the block), or
        None when the block is left to werkzeug's rules: a block that cannot be searched without a copy (a memoryview
        has no `find`), no longer than a boundary, or with a delimiter in the bytes held back or across its start, or
        within two bytes of its start. No boundary begins before the line break (at most two bytes) before the first
        delimiter, so what comes before it is data."""
        delimiter = b"--" + self.boundary
        if not isinstance(block, (bytes, bytearray)) or len(block) <= len(b"\r\n" + delimiter):
            return None
        if (bytes(self.buffer) + block[:len(delimiter)]).find(delimiter) != -1:
            return None
        delimiter_at = block.find(delimiter)
        if delimiter_at == -1:
            return self._partial_boundary_start(block, 0), False
        if delimiter_at < len(b"\r\n"):
            return None
        return delimiter_at - len(b"\r\n"), True

    def _parse_data(self, data, *, start):
        data_start = LINE_BREAK_RE.match(data).end() if start else 0
        delimiter_at = data.find(b"--" + self.boundary)
        if delimiter_at == -1:
            data_end = del_index = self._partial_boundary_start(data, data_start)
            more_data = True
        else:
            # A boundary is its delimiter after a line break of at most two bytes, so none starts before that: the
            # regular expression (which has no fast scan, 2.8 ms a megabyte) is not run over the data before it.
            match = self.boundary_re.search(data, max(0, delimiter_at - len(b"\r\n")))
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


def parse(blocks, content_type, open_file):
    """Parse a multipart body arriving in `blocks` (bytes-like, each used before the next is asked for: what
    `RequestBody.in_place` gives); return (fields, files).

    `fields` maps each field name to its first value (as werkzeug's `MultiDict.to_dict()` would); `files` maps each
    file part's name to (filename, what `open_file(fields so far)` returned, with the part's bytes written to it).
    `open_file` keeps track of what it opens: after an error the caller tidies those up. Only the part named
    FILE_PART may be a file (have a filename): any other file part is a 400 naming it, raised as its head arrives.
    """
    boundary = parse_options_header(content_type)[1].get("boundary")
    if not boundary:
        raise MalformedBody("the multipart/form-data body has no boundary in its Content-Type")
    decoder = _Decoder(boundary.encode("latin-1"), max_parts=MAX_PARTS)
    fields, files = {}, {}
    part = sink = None
    try:
        for block in itertools.chain(blocks, [None]):
            for event in decoder.events(block):
                if isinstance(event, Field):
                    part, sink = event, bytearray()
                elif isinstance(event, File):
                    if event.name != FILE_PART:
                        # Refused before anything is opened for it: on the chunk path a stray file part took the
                        # chunk's place on the stream, and a `sha` sent as a file was never checked.
                        raise InvalidRequest(f"{event.name}: must be a form field, not a file (only `{FILE_PART}` is "
                                             "sent with a filename)")
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
                elif isinstance(event, Epilogue):
                    return fields, files
    except RequestEntityTooLarge:
        raise MalformedBody(f"the multipart/form-data body has more than {MAX_PARTS} parts") from None
    except ValueError:
        # The decoder found the body cut short, or not framed by the boundary its Content-Type names.
        message = ("the multipart/form-data body is malformed or cut short: each part must start with --<boundary> "
                   "as its Content-Type names it, and the body end with --<boundary>--")
        raise MalformedBody(message) from None
    raise AssertionError("a body that ended was decoded to its Epilogue or refused")  # werkzeug raises at its end


class ByteCounter:
    """A file sink that keeps nothing: it counts the bytes of a file part that is too large to store."""

    def __init__(self):
        self.size = 0

    def write(self, data):
        self.size += len(data)
