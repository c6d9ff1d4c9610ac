"""The archive of `wis export` / `wis import` (service.interface.archive, format 1): what the writer makes reads back equal, and
every kind of bad archive is refused, as a whole or entry by entry, with the entry named."""
import gzip
import hashlib
import io
import json
import os
import re
import stat
import subprocess
import tarfile
import threading
import tracemalloc

import pytest

from service.interface import archive as archive_module
from service.interface.archive import ArchiveError, ArchiveReader, ArchiveWriter
from service.client import transfer
from service.domain import snapshots
from support.media import MP4, png, random_blob
from support.tar_blocks import MB, end_of_tar, header, long_name, pax_chain, tar_end, with_tail

ORG = "acme"
IMAGE = "/api/v1/images/00000000000000aa-photo.png"
VIDEO = "/api/v1/videos/00000000000000bb-clip.mp4"
STATION = {"id": "st_1", "name": "Station 1"}
PROCESS = {"id": "p_1", "name": "Process 1", "steps": [{"id": "s_1", "name": "Step", "image": {"path": IMAGE}}]}
PRODUCT = {"id": "prod_1", "name": "Product", "finalProcessId": "p_1"}


def write_archive(path, media=None):
    media = {IMAGE: png(3000, seed=1), VIDEO: random_blob(MP4, 5000, seed=2)} if media is None else media
    with ArchiveWriter(path, ORG) as writer:
        writer.add_object("stations", "st_1", STATION)
        writer.add_object("processes", "p_1", PROCESS)
        writer.add_object("products", "prod_1", PRODUCT)
        for media_path, data in media.items():
            writer.add_media(media_path, io.BytesIO(data), len(data))
    return media


def entries_of(path):
    """[(TarInfo, bytes)] of every entry of an archive."""
    with tarfile.open(path, "r:gz") as archive:
        return [(entry, archive.extractfile(entry).read() if entry.isreg() else b"") for entry in archive]


def forge(path, entries):
    """Write a .tar.gz of [(TarInfo, bytes)] as given, however wrong."""
    with tarfile.open(path, "w:gz") as archive:
        for entry, data in entries:
            entry.size = len(data) if entry.isreg() else 0
            archive.addfile(entry, io.BytesIO(data) if entry.isreg() else None)
    return path


def file_entry(name, data):
    return tarfile.TarInfo(name), data


def manifest_of(entries):
    return json.loads(next(data for entry, data in entries if entry.name == "manifest.json"))


def with_manifest(entries, **changes):
    """The entries with the manifest's fields changed."""
    manifest = dict(manifest_of(entries), **changes)
    return [(entry, json.dumps(manifest).encode() if entry.name == "manifest.json" else data)
            for entry, data in entries]


def test_what_is_written_reads_back_equal(tmp_path):
    media = write_archive(tmp_path / "a.tar.gz")
    reader = ArchiveReader(tmp_path / "a.tar.gz")
    contents = reader.check()
    assert (contents.org, contents.problems) == (ORG, [])
    assert contents.counts == {"stations": 1, "processes": 1, "products": 1, "media": 2}
    assert contents.ids == {"stations": ["st_1"], "processes": ["p_1"], "products": ["prod_1"]}
    assert list(reader.objects("processes")) == [("p_1", PROCESS)]
    assert list(reader.objects("stations")) == [("st_1", STATION)]
    read = {}
    for entry in reader.media():
        with open(entry.file, "rb") as file:
            read[entry.path] = file.read()
        assert entry.sha256 == hashlib.sha256(read[entry.path]).hexdigest()
    assert read == media
    names = [entry.name for entry, _ in entries_of(tmp_path / "a.tar.gz")]
    assert names == ["stations/st_1.json", "processes/p_1.json", "products/prod_1.json",
                     "media/images/00000000000000aa-photo.png", "media/videos/00000000000000bb-clip.mp4",
                     "manifest.json"]
    manifest = manifest_of(entries_of(tmp_path / "a.tar.gz"))
    assert manifest["format"] == 1 and manifest["org"] == ORG and manifest["exportedAt"].endswith("Z")
    assert manifest["media"]["images/00000000000000aa-photo.png"] == {
        "size": 3000, "sha256": hashlib.sha256(media[IMAGE]).hexdigest()}


def test_a_truncated_archive_is_refused_whole(tmp_path):
    write_archive(tmp_path / "a.tar.gz")
    data = (tmp_path / "a.tar.gz").read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 5):
        (tmp_path / "cut.tar.gz").write_bytes(data[:cut])
        with pytest.raises(ArchiveError, match="not a whole .tar.gz archive"):
            ArchiveReader(tmp_path / "cut.tar.gz").check()


def test_a_file_that_is_not_an_archive_is_refused(tmp_path):
    (tmp_path / "x.tar.gz").write_bytes(b"hello")
    with pytest.raises(ArchiveError, match="not a whole .tar.gz archive"):
        ArchiveReader(tmp_path / "x.tar.gz").check()
    with pytest.raises(ArchiveError, match="no such file"):
        ArchiveReader(tmp_path / "missing.tar.gz").check()


def test_a_wrong_format_number_is_refused(tmp_path):
    write_archive(tmp_path / "a.tar.gz")
    forge(tmp_path / "b.tar.gz", with_manifest(entries_of(tmp_path / "a.tar.gz"), format=2))
    with pytest.raises(ArchiveError, match="manifest.json: format 2; this version reads format 1 only"):
        ArchiveReader(tmp_path / "b.tar.gz").check()


def test_an_archive_without_manifest_or_with_wrong_counts_is_refused(tmp_path):
    write_archive(tmp_path / "a.tar.gz")
    entries = entries_of(tmp_path / "a.tar.gz")
    forge(tmp_path / "b.tar.gz", [(entry, data) for entry, data in entries if entry.name != "manifest.json"])
    with pytest.raises(ArchiveError, match="manifest.json: missing"):
        ArchiveReader(tmp_path / "b.tar.gz").check()
    forge(tmp_path / "c.tar.gz", [(entry, data) for entry, data in entries if entry.name != "processes/p_1.json"])
    with pytest.raises(ArchiveError, match="manifest.json: counts"):
        ArchiveReader(tmp_path / "c.tar.gz").check()


@pytest.mark.parametrize("name, message", [
    ("/etc/passwd", "/etc/passwd: an absolute name"),
    ("processes/../../x.json", r"processes/../../x.json: a name with '..'"),
    ("../manifest.json", r"../manifest.json: a name with '..'"),
    ("notes.txt", "notes.txt: outside the archive's folders"),
    ("processes/sub/p_2.json", "processes/sub/p_2.json: outside the archive's folders"),
    ("processes/p 2.json", "processes/p 2.json: outside the archive's folders"),
    ("media/audio/x.mp3", "media/audio/x.mp3: outside the archive's folders"),
    ("orgs/other/processes/p_2.json", "orgs/other/processes/p_2.json: outside the archive's folders"),
])
def test_an_entry_outside_its_folders_is_refused_whole(tmp_path, name, message):
    write_archive(tmp_path / "a.tar.gz")
    forge(tmp_path / "b.tar.gz", [file_entry(name, b"{}"), *entries_of(tmp_path / "a.tar.gz")])
    with pytest.raises(ArchiveError, match=message):
        ArchiveReader(tmp_path / "b.tar.gz").check()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.DIRTYPE,
                                  tarfile.FIFOTYPE])
def test_links_devices_and_folders_are_refused_whole(tmp_path, kind):
    write_archive(tmp_path / "a.tar.gz")
    entry = tarfile.TarInfo("processes/p_2.json")
    entry.type, entry.linkname = kind, "/etc/passwd"
    forge(tmp_path / "b.tar.gz", [(entry, b""), *entries_of(tmp_path / "a.tar.gz")])
    with pytest.raises(ArchiveError, match="processes/p_2.json: not a regular file"):
        ArchiveReader(tmp_path / "b.tar.gz").check()


def test_an_entry_twice_is_refused_whole(tmp_path):
    write_archive(tmp_path / "a.tar.gz")
    entries = entries_of(tmp_path / "a.tar.gz")
    forge(tmp_path / "b.tar.gz", [entries[1], *entries])
    with pytest.raises(ArchiveError, match="processes/p_1.json: the archive holds this entry twice"):
        ArchiveReader(tmp_path / "b.tar.gz").check()


def test_media_whose_sha256_differs_from_the_manifest_is_refused_alone(tmp_path):
    media = write_archive(tmp_path / "a.tar.gz")
    forged = [(entry, data[:-1] + b"!" if entry.name.endswith("photo.png") else data)
              for entry, data in entries_of(tmp_path / "a.tar.gz")]
    reader = ArchiveReader(forge(tmp_path / "b.tar.gz", forged))
    contents = reader.check()
    [problem] = contents.problems
    assert problem.entry == "media/images/00000000000000aa-photo.png"
    assert problem.message.startswith("its SHA-256 is ") and "as the manifest says" in problem.message
    assert [entry.path for entry in reader.media()] == [VIDEO]
    assert contents.ids["processes"] == ["p_1"]  # what becomes of a process using it is the importer's decision
    del media


def test_media_of_another_size_or_unknown_to_the_manifest_or_missing_is_refused_alone(tmp_path):
    write_archive(tmp_path / "a.tar.gz")
    entries = entries_of(tmp_path / "a.tar.gz")
    forged = [(entry, data + b"more" if entry.name.endswith("clip.mp4") else data) for entry, data in entries]
    forged = [file_entry("media/images/00000000000000cc-extra.png", png(100, seed=3)), *forged]
    manifest = manifest_of(entries)
    manifest["media"]["images/00000000000000dd-gone.png"] = {"size": 1, "sha256": "0" * 64}
    manifest["counts"]["media"] = 3
    forged = with_manifest(forged, **manifest)
    reader = ArchiveReader(forge(tmp_path / "b.tar.gz", forged))
    assert sorted(reader.check().problems) == [
        ("media/images/00000000000000cc-extra.png", "the manifest has no record of it"),
        ("media/images/00000000000000dd-gone.png", "listed in the manifest but not in the archive"),
        ("media/videos/00000000000000bb-clip.mp4", "5004 bytes, not 5000 as the manifest says"),
    ]
    assert [entry.path for entry in reader.media()] == [IMAGE]


NOT_MADE = "not a name the service gives media (16 hex digits, '-', at most 100 letters, digits, '.', '_' or '-' with"


@pytest.mark.parametrize("name, message", [
    ("images/aaaa-..", NOT_MADE), ("images/00000000000000aa-photo..png", NOT_MADE),
    ("images/00000000000000aa-.png", NOT_MADE), ("images/00000000000000AA-photo.png", NOT_MADE),
    ("images/00000000000000aa-photo.PNG", NOT_MADE), ("images/00000000000000aa-" + "p" * 101 + ".png", NOT_MADE),
    ("images/00000000000000aa-photo.mp4", "images are named with .jpg or .png, not .mp4"),
    ("videos/00000000000000aa-clip.png", "videos are named with .gif or .mp4, not .png"),
])
def test_media_under_a_name_the_service_never_gives_is_refused_alone(tmp_path, name, message):
    """Such media restored or imported was accepted, then every GET of it was 404 (and `aaaa-..` made `wis import`
    say the archive was truncated or corrupt)."""
    data = png(300, seed=5)
    write_archive(tmp_path / "a.tar.gz", media={IMAGE: png(3000, seed=1), "/api/v1/" + name: data})
    reader = ArchiveReader(tmp_path / "a.tar.gz")
    [problem] = reader.check().problems
    assert problem.entry == "media/" + name and problem.message.startswith(message)
    assert [entry.path for entry in reader.media()] == [IMAGE]


def test_a_local_copy_that_cannot_be_written_is_said_as_such_not_as_a_damaged_archive(tmp_path, monkeypatch):
    write_archive(tmp_path / "a.tar.gz")
    reader = ArchiveReader(tmp_path / "a.tar.gz")
    reader.check()

    def full_disk(file, copy=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(archive_module, "size_and_sha256", full_disk)
    with pytest.raises(OSError) as raised:
        next(reader.media())
    assert not isinstance(raised.value, ArchiveError)
    assert raised.value.strerror == "No space left on device (copying media/images/00000000000000aa-photo.png out of " \
                                    "the archive)"
    assert raised.value.filename.endswith("/photo.png")


@pytest.mark.parametrize("body, message", [
    ({**PROCESS, "id": "p_9"}, "its id is 'p_9', not 'p_1' as its file name says"),
    ({**PROCESS, "org": "other"}, "it claims org 'other'; this archive is org 'acme''s"),
    ([1, 2], "not a JSON object"),
    ("just a string", "not a JSON object"),
])
def test_an_object_entry_that_is_wrong_is_refused_alone(tmp_path, body, message):
    write_archive(tmp_path / "a.tar.gz")
    forged = [(entry, json.dumps(body).encode() if entry.name == "processes/p_1.json" else data)
              for entry, data in entries_of(tmp_path / "a.tar.gz")]
    reader = ArchiveReader(forge(tmp_path / "b.tar.gz", forged))
    contents = reader.check()
    assert contents.problems == [("processes/p_1.json", message)]
    assert contents.ids == {"stations": ["st_1"], "processes": [], "products": ["prod_1"]}
    assert list(reader.objects("processes")) == []
    assert list(reader.objects("products")) == [("prod_1", PRODUCT)]


def test_an_object_entry_not_json_or_too_large_is_refused_alone(tmp_path, monkeypatch):
    write_archive(tmp_path / "a.tar.gz")
    forged = [(entry, b"{not json" if entry.name == "stations/st_1.json" else data)
              for entry, data in entries_of(tmp_path / "a.tar.gz")]
    monkeypatch.setattr(archive_module, "MAX_JSON_ENTRY", 100)
    contents = ArchiveReader(forge(tmp_path / "b.tar.gz", forged)).check()
    assert [problem.entry for problem in contents.problems] == ["processes/p_1.json", "stations/st_1.json"]
    assert contents.problems[0].message.endswith("more than the 100 an entry of JSON may have")
    assert contents.problems[1].message.startswith("not JSON")


def bad_entries_archive(path, count):
    """An archive of `count` empty object entries (each refused as not JSON) and its manifest."""
    entries = [file_entry(f"processes/p_{number:06d}.json", b"") for number in range(count)]
    manifest = {"format": 1, "org": ORG, "exportedAt": "2026-01-01T00:00:00Z",
                "counts": {"stations": 0, "processes": count, "products": 0, "media": 0}, "media": {}}
    return forge(path, [*entries, file_entry("manifest.json", json.dumps(manifest).encode())])


def test_an_archive_of_more_entries_than_a_snapshot_may_hold_is_refused_there(tmp_path, monkeypatch):
    """200,000 empty entries cost `wis import` 37 s and 219 MB before it printed a line for each."""
    assert archive_module.MAX_ARCHIVE_ENTRIES == snapshots.MAX_ARCHIVE_ENTRIES == 100_000  # one bound for both
    monkeypatch.setattr(archive_module, "MAX_ARCHIVE_ENTRIES", 5)
    assert len(ArchiveReader(bad_entries_archive(tmp_path / "a.tar.gz", 4)).check().problems) == 4  # and a manifest
    with pytest.raises(ArchiveError, match=r"^manifest.json: more than 5 entries; an archive has at most that many$"):
        ArchiveReader(bad_entries_archive(tmp_path / "b.tar.gz", 5)).check()


@pytest.mark.parametrize("count", [30, 300])
def test_an_import_tells_the_first_20_refused_entries_then_how_many_more(tmp_path, count):
    told = []
    results = transfer.import_archive(None, bad_entries_archive(tmp_path / "a.tar.gz", count), on_result=told.append)
    assert len(results) == count and all(result.error.startswith("not JSON") for result in results)
    assert told[:20] == results[:20]
    assert told[20:] == [
        (f"{count - 20} more entries", None, "refused in the archive as well (the first 20 are above)")]


def test_a_long_name_is_refused_before_it_is_read_whatever_its_size(tmp_path):
    """tarfile read a GNU long name whole: 200 MB of name cost 840 MB from a 200 KB archive."""
    peaks = {}
    for size in (1024 * 1024, 8 * 1024 * 1024):
        (tmp_path / "a.tar.gz").write_bytes(gzip.compress(long_name(size) + tar_end()))
        tracemalloc.start()
        try:
            refused = re.escape(f"an extended header (a long name, or pax records) of {size} bytes")
            with pytest.raises(ArchiveError, match=refused):
                ArchiveReader(tmp_path / "a.tar.gz").check()
            peaks[size] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert max(peaks.values()) < 1024 * 1024, peaks


@pytest.mark.parametrize("blocks, message", [
    (pax_chain(3000), "3 in a row before one entry"),  # was a RecursionError
    (pax_chain(2), "an extended header (a long name, or pax records) of 10 bytes, 3 in a row before one entry"),
    (header("x", tarfile.XGLTYPE), "a global pax header ('x'); an archive holds plain files only"),
    (header("x", tarfile.GNUTYPE_SPARSE), "a sparse file ('x'); an archive holds plain files only"),
])
def test_extended_headers_in_a_row_are_refused(tmp_path, blocks, message):
    (tmp_path / "a.tar.gz").write_bytes(gzip.compress(blocks + long_name(10) + tar_end()))  # the 10-byte name 3rd
    with pytest.raises(ArchiveError, match=re.escape(message)):
        ArchiveReader(tmp_path / "a.tar.gz").check()


@pytest.mark.parametrize("where", ["a gzip bomb", "its end block", "the padding of its last record",
                                   "after that padding"])
def test_anything_after_the_last_entry_but_its_zero_padding_is_refused_whole(tmp_path, where):
    """Each of the reader's three passes unpacked what follows the tar's end to the end, uncounted: 4 GiB of zeros
    in a 4 MB archive were 8.7 s a pass. 64 MB of zeros (a 65 KB file) stand for them: refused after the first MB."""
    write_archive(tmp_path / "a.tar.gz")
    raw = gzip.decompress((tmp_path / "a.tar.gz").read_bytes())
    end = end_of_tar(raw)
    if where == "a gzip bomb":
        changed = with_tail((tmp_path / "a.tar.gz").read_bytes(), zeros=64 * MB)
        message = (f"more than 1,048,576 bytes after the archive's last entry (from byte {end:,} of the unpacked "
                   "tar): an archive ends with zero blocks, at most that many, and nothing follows them")
    else:
        at = {"its end block": end + 100, "the padding of its last record": len(raw) - 1,
              "after that padding": len(raw)}[where]
        changed = with_tail((tmp_path / "a.tar.gz").read_bytes(), lambda raw: raw[:at] + b"x" + raw[at + 1:])
        message = (f"data after the archive's last entry (byte {at:,} of the unpacked tar is not zero): an archive "
                   "ends with zero blocks, and nothing follows them")
    (tmp_path / "b.tar.gz").write_bytes(changed)
    with pytest.raises(ArchiveError) as refused:
        ArchiveReader(tmp_path / "b.tar.gz").check()
    assert str(refused.value) == f"{tmp_path / 'b.tar.gz'}: {message}"


@pytest.mark.parametrize("blocking", [1, 20, 2048])
def test_an_archive_gnu_tar_packed_again_reads_whatever_its_record_size(tmp_path, blocking):
    """GNU tar pads its last record with zeros (20 blocks: 10 KB, as tarfile; -b 2048: records of 1 MB, as large as the
    padding may be)."""
    write_archive(tmp_path / "a.tar.gz")
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "unpacked", filter="data")
    subprocess.run(["tar", "czf", str(tmp_path / "b.tar.gz"), "-b", str(blocking), "-C", str(tmp_path / "unpacked"),
                    "--no-recursion", *names], check=True)
    assert len(gzip.decompress((tmp_path / "b.tar.gz").read_bytes())) % (blocking * 512) == 0
    reader = ArchiveReader(tmp_path / "b.tar.gz")
    assert reader.check().problems == []
    assert [identifier for identifier, _ in reader.objects("processes")] == ["p_1"]


def test_an_object_nested_deeper_than_100_levels_is_refused_alone(tmp_path):
    write_archive(tmp_path / "a.tar.gz")
    deep = b'{"id": "p_1", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    forged = [(entry, deep if entry.name == "processes/p_1.json" else data)
              for entry, data in entries_of(tmp_path / "a.tar.gz")]
    reader = ArchiveReader(forge(tmp_path / "b.tar.gz", forged))
    assert reader.check().problems == [("processes/p_1.json", "nested deeper than 100 levels")]


def test_an_archive_changed_after_its_check_is_refused(tmp_path):
    write_archive(tmp_path / "a.tar.gz")
    reader = ArchiveReader(tmp_path / "a.tar.gz")
    reader.check()
    forged = [(entry, data[:-1] + b"!" if entry.name.endswith("photo.png") else data)
              for entry, data in entries_of(tmp_path / "a.tar.gz")]
    forge(tmp_path / "a.tar.gz", forged)
    with pytest.raises(ArchiveError, match="media/images/00000000000000aa-photo.png: changed since"):
        list(reader.media())


def test_the_writer_refuses_what_a_reader_would(tmp_path):
    with pytest.raises(ValueError, match="added twice"):
        with ArchiveWriter(tmp_path / "a.tar.gz", ORG) as writer:
            writer.add_object("stations", "st_1", STATION)
            writer.add_object("stations", "st_1", STATION)
    # Interrupted: nothing is left at the path (the archive was written aside), nor aside.
    assert list(tmp_path.iterdir()) == []
    with ArchiveWriter(tmp_path / "b.tar.gz", ORG) as writer:
        with pytest.raises(ValueError):
            writer.add_object("stations", "st 1", {"id": "st 1"})
        with pytest.raises(ValueError):
            writer.add_media("/etc/passwd", io.BytesIO(b""), 0)
        with pytest.raises(OSError):
            writer.add_media(IMAGE, io.BytesIO(b"short"), 100)


def test_an_interrupted_writer_leaves_the_archive_at_its_path_as_it_was(tmp_path):
    """`wis export` over an archive that then fails (a refused token, a server gone, a full disk) must not destroy the
    archive it would have replaced: the new one is written aside and renamed over it only when whole."""
    write_archive(tmp_path / "a.tar.gz")
    (tmp_path / "a.tar.gz").chmod(0o600)
    before = (tmp_path / "a.tar.gz").read_bytes()
    with pytest.raises(ConnectionError):
        with ArchiveWriter(tmp_path / "a.tar.gz", ORG) as writer:
            writer.add_object("stations", "st_2", {**STATION, "id": "st_2"})
            raise ConnectionError("the server went away")
    assert (tmp_path / "a.tar.gz").read_bytes() == before
    assert [path.name for path in tmp_path.iterdir()] == ["a.tar.gz"]
    # Through a symbolic link, the file it names is replaced (and the link kept); a replaced file keeps its mode.
    (tmp_path / "link.tar.gz").symlink_to(tmp_path / "a.tar.gz")
    with ArchiveWriter(tmp_path / "link.tar.gz", ORG) as writer:
        writer.add_object("stations", "st_2", {**STATION, "id": "st_2"})
    assert (tmp_path / "link.tar.gz").is_symlink()
    assert ArchiveReader(tmp_path / "a.tar.gz").check().ids["stations"] == ["st_2"]
    assert (tmp_path / "a.tar.gz").stat().st_mode & 0o777 == 0o600
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.tar.gz", "link.tar.gz"]


def test_the_writer_writes_into_a_pipe_at_a_path_as_it_is(tmp_path):
    """A FIFO (or /dev/stdout) is not a file to keep: it is written directly, never renamed over."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    with ArchiveWriter(fifo, ORG) as writer:
        writer.add_object("stations", "st_1", STATION)
    reader.join(30)
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and [path.name for path in tmp_path.iterdir()] == ["pipe"]
    (tmp_path / "a.tar.gz").write_bytes(received[0])
    assert ArchiveReader(tmp_path / "a.tar.gz").check().ids["stations"] == ["st_1"]


def test_the_writer_streams_into_any_binary_file(tmp_path):
    # As a server writes one: into a file object it already holds (a response body, a file of a snapshot folder).
    buffer = io.BytesIO()
    with ArchiveWriter(buffer, ORG) as writer:
        writer.add_object("stations", "st_1", STATION)
        writer.add_media(IMAGE, io.BytesIO(png(1000, seed=5)), 1000)
    (tmp_path / "a.tar.gz").write_bytes(buffer.getvalue())
    contents = ArchiveReader(tmp_path / "a.tar.gz").check()
    assert contents.ids["stations"] == ["st_1"] and list(contents.media) == [IMAGE]
