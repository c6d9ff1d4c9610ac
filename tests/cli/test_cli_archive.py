"""`wis import` (and `wis export`) against real gunicorn on both backends: media first through deduplicating uploads,
paths rewritten to the target's, objects through the create mutations; a damaged archive sends nothing, a refused
entry is reported with what depends on it and the rest is imported."""
import io
import json
import tarfile

import pytest

from service.interface.archive import ArchiveReader, ArchiveWriter
from service.cli import main
from service.client import Client
from support.client import downloaded_sha
from support.datadir import media_names_of
from support.media import GIF, MP4, png, random_blob, sha256
from support.ports import free_port
from support.tar_blocks import MB, with_tail
from support.tokens import TOKEN

IMAGE = "/api/v1/images/00000000000000aa-frame.png"
VIDEO = "/api/v1/videos/00000000000000bb-clip.mp4"
SPIN = "/api/v1/videos/00000000000000cc-spin.gif"
MEDIA = {IMAGE: png(4000, seed=1), VIDEO: random_blob(MP4, 30_000, seed=2), SPIN: random_blob(GIF, 3000, seed=3)}
STATION = {"id": "line_1", "name": "Line 1"}
FRAME = {"id": "frame_weld", "name": "Frame", "image": {"path": IMAGE},
         "steps": [{"id": "weld", "name": "Weld", "primaryImage": {"path": IMAGE}, "video": {"path": VIDEO}}]}
ASSEMBLY = {"id": "assembly", "name": "Assembly", "steps": [{"id": "spin", "name": "Spin", "video": {"path": SPIN}}]}
BIKE = {"id": "bike", "name": "Bike", "finalProcessId": "assembly",
        "dependencies": [{"processId": "assembly", "upstreamProcessId": "frame_weld", "quantity": 1}]}


@pytest.fixture
def server(gunicorn_server):
    return gunicorn_server


def write_archive(path, media=MEDIA, processes=(FRAME, ASSEMBLY)):
    with ArchiveWriter(path, "acme") as writer:
        writer.add_object("stations", STATION["id"], STATION)
        for process in processes:
            writer.add_object("processes", process["id"], process)
        writer.add_object("products", BIKE["id"], BIKE)
        for media_path, data in media.items():
            writer.add_media(media_path, io.BytesIO(data), len(data))
    return path


def forge(archive, forged, change):
    """Write `forged`: the entries of `archive`, each entry's bytes as change(name, bytes) makes them."""
    with tarfile.open(archive) as source:
        entries = [(entry, source.extractfile(entry).read()) for entry in source]
    with tarfile.open(forged, "w:gz") as target:
        for entry, data in entries:
            data = change(entry.name, data)
            entry.size = len(data)
            target.addfile(entry, io.BytesIO(data))


def wis(capsys, *argv, server=None):
    options = ["--url", server.url, "--token", TOKEN, "--no-progress"] if server else []
    code = main([*map(str, argv), *options])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def media_count(server):
    return len(media_names_of(server, "images")) + len(media_names_of(server, "videos"))


def test_import_uploads_media_rewrites_their_paths_and_creates_the_objects(server, capsys, tmp_path):
    code, out, err = wis(capsys, "import", write_archive(tmp_path / "a.tar.gz"), server=server)
    assert code == 0, (out, err)
    assert "org acme" in err and "3 media file(s)" in err and "7 entries imported, 0 failed" in err
    assert out[3:] == ["station line_1: CREATED", "process frame_weld: CREATED", "process assembly: CREATED",
                       "product bike: CREATED"]
    moved = dict(line.removeprefix("media ").split(": ") for line in out[:3])
    assert set(moved) == set(MEDIA)
    with Client(server.url, TOKEN) as client:
        frame = client.get_process("frame_weld")
        # New prefixes on the target, the cleaned names kept.
        assert frame["image"]["path"] == moved[IMAGE] != IMAGE and moved[IMAGE].endswith("-frame.png")
        assert frame["steps"][0]["primaryImage"]["path"] == moved[IMAGE]
        assert frame["steps"][0]["video"]["path"] == moved[VIDEO]
        assert client.get_process("assembly")["steps"][0]["video"]["path"] == moved[SPIN]
        for path, data in MEDIA.items():
            assert downloaded_sha(client, moved[path]) == sha256(data)
        assert client.get_product("bike")["finalProcessId"] == "assembly"
        assert client.get_station("line_1")["name"] == "Line 1"


def test_a_second_import_uploads_nothing_new(server, capsys, tmp_path):
    archive = write_archive(tmp_path / "a.tar.gz")
    first = wis(capsys, "import", archive, server=server)[1]
    second = wis(capsys, "import", archive, server=server)[1]
    assert first[:3] == second[:3]  # the same media paths answered
    assert media_count(server) == 3


def test_a_refused_entry_is_reported_with_what_depends_on_it_and_the_rest_is_imported(server, capsys, tmp_path):
    forge(write_archive(tmp_path / "a.tar.gz"), tmp_path / "b.tar.gz",
          lambda name, data: data[:-1] + b"!" if name.endswith("clip.mp4") else data)
    code, out, err = wis(capsys, "import", tmp_path / "b.tar.gz", server=server)
    assert code == 1
    assert out[0].startswith("media/videos/00000000000000bb-clip.mp4: error: its SHA-256 is ")
    assert ("process frame_weld: error: process.steps[0].video.path: its media "
            "/api/v1/videos/00000000000000bb-clip.mp4 was not imported (refused in the archive)") in out
    # The product names a process that was not imported: the server says so.
    assert any(line.startswith("product bike: error: ") and "frame_weld" in line for line in out)
    assert "process assembly: CREATED" in out and "station line_1: CREATED" in out
    assert "4 entries imported, 3 failed" in err
    with Client(server.url, TOKEN) as client:
        assert client.get_process("frame_weld") is None
    assert media_count(server) == 2


def test_media_under_a_name_the_service_never_gives_is_refused_naming_it_not_as_a_damaged_archive(
        server, capsys, tmp_path):
    odd = "/api/v1/images/aaaa-.."
    frame = {**FRAME, "image": {"path": odd}}
    code, out, err = wis(capsys, "import", write_archive(tmp_path / "a.tar.gz", media={**MEDIA, odd: png(500, seed=4)},
                                                         processes=(frame, ASSEMBLY)), server=server)
    assert code == 1
    assert out[0].startswith("media/images/aaaa-..: error: not a name the service gives media (16 hex digits")
    assert ("process frame_weld: error: process.image.path: its media /api/v1/images/aaaa-.. was not imported "
            "(refused in the archive)") in out
    assert "process assembly: CREATED" in out and "truncated or corrupt" not in err + "".join(out)
    assert media_count(server) == 3


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[: len(data) // 2], "not a whole .tar.gz archive"),
    (lambda data: b"not an archive", "not a whole .tar.gz archive"),
    # 64 MB of zeros after the tar's end (a gzip bomb: 4 GiB took 8.7 s of each of the three passes), or data there.
    (lambda data: with_tail(data, zeros=64 * MB), "more than 1,048,576 bytes after the archive's last entry"),
    (lambda data: with_tail(data, lambda raw: raw + b"x"), "data after the archive's last entry"),
])
def test_a_damaged_archive_sends_nothing(server, capsys, tmp_path, damage, message):
    archive = write_archive(tmp_path / "a.tar.gz")
    archive.write_bytes(damage(archive.read_bytes()))
    code, out, err = wis(capsys, "import", archive, server=server)
    assert code == 1 and out == []
    assert err.startswith(f"error: {archive}: {message}")
    with Client(server.url, TOKEN) as client:
        assert client.list_processes() == [] and client.list_stations() == []
    assert media_count(server) == 0


def test_an_archive_of_another_format_sends_nothing(server, capsys, tmp_path):
    forge(write_archive(tmp_path / "a.tar.gz"), tmp_path / "b.tar.gz",
          lambda name, data: json.dumps(dict(json.loads(data), format=2)).encode() if name == "manifest.json" else data)
    code, out, err = wis(capsys, "import", tmp_path / "b.tar.gz", server=server)
    assert (code, out) == (1, [])
    assert err == "error: manifest.json: format 2; this version reads format 1 only\n"
    assert media_count(server) == 0


@pytest.mark.file_backend_only("the client's archive file; the server's answers are tested on both backends")
def test_a_failed_export_leaves_the_archive_it_would_replace_as_it_was(server, capsys, tmp_path):
    """`--help` says the archive is replaced if it exists: only by a whole one. A refused token or a server that is not
    there used to leave an 88-byte archive without a manifest in its place, which `wis import` refuses."""
    with Client(server.url, TOKEN) as client:
        client.create_station(STATION)
    archive = tmp_path / "exports" / "org.tar.gz"
    archive.parent.mkdir()
    assert wis(capsys, "export", archive, server=server)[0] == 0
    before = archive.read_bytes()
    for url, token in ((server.url, "not-the-token"), (f"http://127.0.0.1:{free_port()}", TOKEN)):
        code = main(["export", str(archive), "--url", url, "--token", token, "--retries", "0", "--no-progress"])
        err = capsys.readouterr().err
        assert code == 1 and err.startswith("error: "), err
        assert archive.read_bytes() == before
    assert [path.name for path in archive.parent.iterdir()] == ["org.tar.gz"]
    assert ArchiveReader(archive).check().ids["stations"] == ["line_1"]


def test_the_verbs_refuse_bad_arguments_before_asking_a_server(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["delete", "widget", "p_1"])
    assert exited.value.code == 2
    assert "invalid choice: 'widget'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["restore", "process", "p_1", "0"])
    assert "must be at least 1" in capsys.readouterr().err


def test_an_object_claiming_another_org_is_refused_and_the_rest_imported(server, capsys, tmp_path):
    forge(write_archive(tmp_path / "a.tar.gz"), tmp_path / "b.tar.gz", lambda name, data: json.dumps(
        {**ASSEMBLY, "org": "other"}).encode() if name == "processes/assembly.json" else data)
    code, out, err = wis(capsys, "import", tmp_path / "b.tar.gz", server=server)
    assert code == 1
    assert out[0] == "processes/assembly.json: error: it claims org 'other'; this archive is org 'acme''s"
    assert "process frame_weld: CREATED" in out and "station line_1: CREATED" in out
    with Client(server.url, TOKEN) as client:
        assert client.get_process("assembly") is None
