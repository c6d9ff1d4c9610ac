"""The multipart decoder of the uploads (service.web.uploads.multipart._Decoder) answers exactly as werkzeug's
MultipartDecoder, which it changes only to copy less: the same events with the same data, for bodies whose file data
is full of line breaks and near-boundaries, cut into pieces anywhere, including bodies that end early."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug.sansio.multipart import Epilogue, MultipartDecoder, NeedData

from service.web.uploads.multipart import _Decoder

BOUNDARY = b"----bound-7f3a"
# Bytes that make a part's data look like the start of a boundary, in pieces.
TRICKY = [b"\r", b"\n", b"\r\n", b"-", b"--", b"\r\n--", b"\r\n--" + BOUNDARY[:6], b"\n--" + BOUNDARY, b"x" * 100]


def body(fields, data, ending):
    head = b"".join(b'--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (BOUNDARY, name, value)
                    for name, value in fields)
    head += (b'--%s\r\nContent-Disposition: form-data; name="file"; filename="c"\r\n'
             b"Content-Type: application/octet-stream\r\n\r\n" % BOUNDARY)
    return head + data + ending


def events(decoder_class, pieces):
    """What the decoder answers, piece by piece: (kind, its fields), or the error it raised."""
    decoder, seen = decoder_class(BOUNDARY, max_parts=100), []
    try:
        for piece in [*pieces, None]:
            decoder.receive_data(piece)
            event = decoder.next_event()
            while not isinstance(event, (NeedData, Epilogue)):
                seen.append((type(event).__name__, getattr(event, "name", None), getattr(event, "data", None),
                             getattr(event, "more_data", None)))
                event = decoder.next_event()
            if isinstance(event, Epilogue):
                seen.append(("Epilogue", event.data))
                break
    except ValueError as error:
        seen.append(("ValueError", str(error)))
    return seen


data_pieces = st.lists(st.one_of(st.sampled_from(TRICKY), st.binary(max_size=40)), max_size=30).map(b"".join)
endings = st.sampled_from([b"\r\n--" + BOUNDARY + b"--\r\n", b"\r\n--" + BOUNDARY + b"--", b"\n--" + BOUNDARY + b"--",
                           b"\r\n--" + BOUNDARY[:-2], b"", b"\r\n--" + BOUNDARY + b"\r\nbroken"])


@pytest.mark.exhaustive  # 300 generated bodies
@settings(max_examples=300, deadline=None)
@given(fields=st.lists(st.tuples(st.sampled_from([b"chunkIndex", b"totalChunks", b"note"]), data_pieces), max_size=3),
       data=data_pieces, ending=endings, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_the_decoder_answers_as_werkzeugs_for_any_body_cut_anywhere(fields, data, ending, cuts):
    whole = body(fields, data, ending)
    positions = sorted({cut % (len(whole) + 1) for cut in cuts})
    pieces = [whole[start:end] for start, end in zip([0, *positions], [*positions, len(whole)])]
    assert events(_Decoder, pieces) == events(MultipartDecoder, pieces)


# Pieces as the uploads read them (1 MB, the last one shorter) and smaller. (With pieces of a few bytes werkzeug's
# decoder, and so ours, can repeat a CR held back as the start of a boundary: the uploads never read so little.)
@pytest.mark.parametrize("piece_size, data_size", [(4096, 1024 * 1024), (65_537, 2 * 1024 * 1024),
                                                   (1024 * 1024, 3 * 1024 * 1024 + 11)])
def test_megabytes_of_data_with_line_breaks_come_out_whole_and_equal(piece_size, data_size):
    generator = random.Random(piece_size)
    data = bytes(generator.choices(b"\r\n-ab", k=data_size))
    whole = body([(b"chunkIndex", b"0")], data, b"\r\n--" + BOUNDARY + b"--\r\n")
    pieces = [whole[start:start + piece_size] for start in range(0, len(whole), piece_size)]
    ours = events(_Decoder, pieces)
    assert ours == events(MultipartDecoder, pieces)
    file_events = ours[[kind for kind, *_ in ours].index("File") + 1:]
    assert b"".join(event[2] for event in file_events if event[0] == "Data") == data
    assert file_events[-1][0] == "Epilogue"
