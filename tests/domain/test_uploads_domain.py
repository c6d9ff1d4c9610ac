"""Upload rules without HTTP: format sniffing, the 413 message, media names."""
import re

import pytest

from service.domain.uploads import check_size, clean_stem, media_name, new_media_prefix, size_in_mb
from service.interface import DESTINATIONS, MB, made_media_name_problem, sniff_format
from service.errors import FileTooLarge
from service.storage.files import FileRepository

from support.paths import REPOSITORY


@pytest.mark.parametrize("head, expected", [
    (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01", "jpeg"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0d", "png"),
    (b"GIF87a\x01\x00\x01\x00\x00\x00", "gif"),
    (b"GIF89a\x01\x00\x01\x00\x00\x00", "gif"),
    (b"\x00\x00\x00\x18ftypmp42", "mp4"),
    (b"\x00\x00\x00\x20ftypisom", "mp4"),
    (b"\xff\xd8\x00\x00", None),          # two bytes of JPEG are not enough
    (b"\x89PNG\r\n\x1a\x00", None),
    (b"GIF90a", None),
    (b"RIFF\x00\x00\x00\x00WEBP", None),
    (b"<html><body>", None),
    (b"", None),
])
def test_sniff_format_reads_magic_numbers_only(head, expected):
    assert sniff_format(head) == expected


@pytest.mark.parametrize("size, shown", [
    (8 * MB + 1, "8.1"),
    (8 * MB, "8"),
    (10 * MB + 1, "10.1"),
    (int(8.1 * MB), "8.1"),
    (int(8.1 * MB) + 1, "8.2"),
    (1, "0.1"),
    (500 * MB + 1, "500.1"),
    # Sizes a client can declare (Content-Length, fileSize, Upload-Length), far past what a float holds exactly.
    (2**63 - 1, "8796093022208"),
    (2**63, "8796093022208"),
    (2**63 + 1, "8796093022208.1"),
    (10**23, "95367431640625000"),
    (10**23 + 1, "95367431640625000.1"),
    (12_345_678_901_234_567 * MB // 10, "1234567890123456.7"),
])
def test_size_in_mb_rounds_up_to_one_decimal_and_drops_trailing_zero(size, shown):
    assert size_in_mb(size) == shown


def test_a_declared_size_near_2_to_the_63_is_named_exactly():
    with pytest.raises(FileTooLarge) as raised:
        check_size(2**63 + 1, 500 * MB)
    assert raised.value.message == "file of size 8796093022208.1MB is larger than 500MB"


def test_limits_are_inclusive():
    check_size(8 * MB, 8 * MB, 10 * MB)


def test_one_byte_over_names_the_limit():
    with pytest.raises(FileTooLarge) as raised:
        check_size(8 * MB + 1, 8 * MB, 10 * MB)
    assert raised.value.message == "file of size 8.1MB is larger than 8MB"


def test_two_limits_broken_names_the_smaller():
    with pytest.raises(FileTooLarge) as raised:
        check_size(10 * MB + 1, 8 * MB, 10 * MB)
    assert raised.value.message == "file of size 10.1MB is larger than 8MB"


def test_request_limit_named_when_only_it_is_broken():
    with pytest.raises(FileTooLarge) as raised:
        check_size(10 * MB + 1, 500 * MB, 10 * MB)
    assert raised.value.message == "file of size 10.1MB is larger than 10MB"


@pytest.mark.parametrize("original, stem", [
    ("photo.jpg", "photo"),
    ("my photo (1).png", "my_photo_1"),
    ("../../etc/passwd", "passwd"),
    ("..\\..\\windows\\win.ini", "win"),
    ("..", "upload"),
    ("...", "upload"),
    ("", "upload"),
    (None, "upload"),
    ("a..b.png", "a.b"),
    (".bashrc", "bashrc"),
    ("café.gif", "cafe"),
    ("日本語.png", "upload"),
    ("x" * 300 + ".mp4", "x" * 100),
])
def test_clean_stem_keeps_only_safe_characters(original, stem):
    assert clean_stem(original) == stem


@pytest.mark.parametrize("original", ["photo.jpg", "my photo (1).png", "../../etc/passwd", "..", "", None,
                                      "a..b.png", ".bashrc", "-_.x._-.png", "日本語.png", "x" * 300 + ".mp4",
                                      "a" * 99 + ".-b.gif"])
def test_every_name_the_service_gives_media_has_the_shape_an_archive_is_checked_against(original):
    """A restore and `wis import` refuse media named otherwise (service.interface.made_media_name_problem)."""
    for destination in DESTINATIONS.values():
        for fmt in destination.formats:
            assert made_media_name_problem(destination.kind, media_name(original, fmt, "0123456789abcdef")) is None


def test_media_name_takes_the_extension_of_the_sniffed_format(tmp_path):
    repo = FileRepository(tmp_path)
    name = media_name("x.jpg", "png", new_media_prefix(repo))
    prefix, rest = name.split("-", 1)
    assert rest == "x.png" and re.fullmatch("[0-9a-f]{16}", prefix)
    assert media_name("x.jpg", "png", new_media_prefix(repo)) != name


def test_the_docs_table_of_media_names_is_what_the_service_makes():
    import re

    docs = (REPOSITORY / "docs" / "uploads.md").read_text()
    table = docs.split("<!-- media names -->", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `(.+?)`(?: \((\w+) bytes\))? \| `<16 hex>-(.+?)` \|$", table, re.M)
    assert len(rows) >= 5
    formats = {".png": "png", ".jpg": "jpeg", ".gif": "gif", ".mp4": "mp4"}
    for sent, sniffed, expected in rows:
        fmt = sniffed.lower() if sniffed else formats[expected[expected.rindex("."):]]
        assert media_name(sent, fmt, "0" * 16) == f"{'0' * 16}-{expected}", sent
