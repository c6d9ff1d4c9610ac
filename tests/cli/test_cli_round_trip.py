"""The round trip of CONTRACT 10 through `wis`, on real gunicorn: an org exported from one backend and imported into an
empty server of the other reads back equal (inputs with media paths rewritten, media bytes); a second import changes
nothing; dry runs (`import --dry-run`, `push --dry-run`) write nothing; `wis delete`, `restore` and `history`."""
import json

import pytest

from service.interface.archive import ArchiveReader
from service.cli import main
from service.client import Client
from support.backends import FileBackend
from support.client import downloaded_sha
from support.datadir import media_names_of
from support.media import GIF, MP4, png, random_blob, sha256
from support.tokens import TOKEN

KINDS = ("station", "process", "product")


@pytest.fixture
def source(tmp_path, backend, start_gunicorn):
    return start_gunicorn(tmp_path / "source", backend=backend)


@pytest.fixture
def other_backend(backend, request):
    return request.getfixturevalue("shared_backend") if backend.name == "file" else FileBackend()


@pytest.fixture
def target(tmp_path, other_backend, start_gunicorn):
    """An empty server of the other backend."""
    return start_gunicorn(tmp_path / "target", backend=other_backend)


def wis(capsys, server, *argv):
    code = main([*map(str, argv), "--url", server.url, "--token", TOKEN, "--no-progress"])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def fill(server):
    """An org of a station, two processes with an image, an MP4 and a GIF, and a product; the media's bytes by path."""
    media = {}
    with Client(server.url, TOKEN) as client:
        for name, data in (("frame.png", png(4000, seed=1)), ("clip.mp4", random_blob(MP4, 30_000, seed=2)),
                           ("spin.gif", random_blob(GIF, 3000, seed=3))):
            response = client.session.post(server.url + "/uploads", files={"file": (name, data)}, timeout=30,
                                           data={"destinationId": {"png": "stepImage", "mp4": "stepVideo",
                                                                   "gif": "stepVideoGif"}[name[-3:]]})
            media[response.json()["path"]] = data
        image, video, spin = media
        client.create_station({"id": "line_1", "name": "Line 1"})
        client.create_process({"id": "frame_weld", "name": "Frame", "image": {"path": image},
                               "steps": [{"id": "weld", "name": "Weld", "primaryImage": {"path": image},
                                          "video": {"path": video, "title": "How", "autoplay": True}}]})
        client.create_process({"id": "assembly", "name": "Assembly",
                               "steps": [{"id": "spin", "name": "Spin", "video": {"path": spin}}]})
        client.create_product({"id": "bike", "name": "Bike", "finalProcessId": "assembly",
                               "dependencies": [{"processId": "assembly", "upstreamProcessId": "frame_weld",
                                                 "quantity": 2}]})
    return media


def inputs(server):
    """{(kind, id): (revision, input)} of everything the org holds."""
    with Client(server.url, TOKEN) as client:
        return {(kind, found["id"]): (found["revision"], found["input"])
                for kind in KINDS for found in client.list_inputs(kind, first=1000)}


def media_count(server):
    return len(media_names_of(server, "images")) + len(media_names_of(server, "videos"))


def test_export_then_import_into_the_other_backend_reads_back_equal(source, target, capsys, tmp_path):
    media = fill(source)
    code, out, err = wis(capsys, source, "export", tmp_path / "org.tar.gz", "--org", "acme")
    assert code == 0, err
    assert "exported 1 station(s), 2 process(es), 1 product(s) and 3 media file(s) of org acme" in err

    code, out, err = wis(capsys, target, "import", tmp_path / "org.tar.gz")
    assert code == 0, (out, err)
    moved = dict(line.removeprefix("media ").split(": ") for line in out if line.startswith("media "))
    assert set(moved) == set(media)
    exported, imported = inputs(source), inputs(target)
    expected = {}
    for key, (_, value) in exported.items():
        text = json.dumps(value)
        for old, new in moved.items():
            text = text.replace(json.dumps(old), json.dumps(new))
        expected[key] = json.loads(text)
    assert {key: value for key, (_, value) in imported.items()} == expected
    with Client(target.url, TOKEN) as client:
        for path, data in media.items():
            assert downloaded_sha(client, moved[path]) == sha256(data)

    # A second import changes nothing: no new media, no revision bumped.
    code, out, err = wis(capsys, target, "import", tmp_path / "org.tar.gz")
    assert code == 0, (out, err)
    assert inputs(target) == imported
    assert media_count(target) == 3


def test_a_dry_run_import_writes_nothing_and_says_what_would_wait(source, target, capsys, tmp_path):
    fill(source)
    assert wis(capsys, source, "export", tmp_path / "org.tar.gz")[0] == 0
    code, out, err = wis(capsys, target, "import", tmp_path / "org.tar.gz", "--dry-run")
    assert code == 0, (out, err)
    assert "(dry run: nothing is written)" in err
    assert sum(line.endswith("(checked locally)") for line in out) == 3
    assert "station line_1: CREATED (dry run)" in out
    # Their media are not on the target yet: the server's check of exactly those fields is what waits.
    assert any(line.startswith("process frame_weld: VALID (dry run; 3 field(s) wait") for line in out)
    assert any(line.startswith("product bike: VALID (dry run; ") for line in out)
    assert inputs(target) == {} and media_count(target) == 0


def test_a_dry_run_import_answers_as_the_write_would_and_changes_nothing(source, target, capsys, tmp_path):
    fill(source)
    with Client(source.url, TOKEN) as client:
        client.create_process({"id": "lonely", "name": "Lonely", "steps": [{"id": "s_1", "name": "S"}]})
    assert wis(capsys, source, "export", tmp_path / "org.tar.gz")[0] == 0
    with Client(target.url, TOKEN) as client:
        client.create_process({"id": "lonely", "name": "Other", "steps": [{"id": "s_1", "name": "S"}]})
        revision = client.get_process("lonely")["revision"]
    code, out, err = wis(capsys, target, "import", tmp_path / "org.tar.gz", "--dry-run")
    assert "process lonely: UPDATED (dry run)" in out
    with Client(target.url, TOKEN) as client:
        assert client.get_process("lonely")["name"] == "Other"
        assert client.get_process("lonely")["revision"] == revision


def test_push_dry_run_writes_nothing(source, capsys, tmp_path):
    folder = tmp_path / "instructions"
    folder.mkdir()
    (folder / "frame.png").write_bytes(png(2000, seed=5))
    (folder / "all.json").write_text(json.dumps([
        {"station": {"id": "line_1", "name": "Line 1"}},
        {"process": {"id": "frame_weld", "name": "Frame", "steps": [{"id": "w_1", "name": "W",
                                                                        "primaryImage": {"path": "frame.png"}}]}},
        {"process": {"id": "bad_one", "name": "", "steps": []}},
        {"product": {"id": "bike", "name": "Bike", "finalProcessId": "frame_weld", "dependencies": []}},
    ]))
    code, out, err = wis(capsys, source, "push", folder, "--dry-run")
    assert code == 1
    every = folder / "all.json"
    assert f"station line_1 ({every}[0]): CREATED (dry run)" in out
    assert f"process frame_weld ({every}[1]): VALID (dry run; 1 field(s) wait for what the push creates first)" in out
    assert any(line.startswith(f"process bad_one ({every}[2]): error: process.name") for line in out)
    assert f"product bike ({every}[3]): VALID (dry run; 1 field(s) wait for what the push creates first)" in out
    assert inputs(source) == {} and media_count(source) == 0


def test_delete_history_and_restore_from_the_command_line(source, capsys):
    fill(source)
    code, out, err = wis(capsys, source, "delete", "process", "frame_weld")
    assert code == 1 and "CONFLICT" not in err and "bike" in err  # a product still refers to it
    assert wis(capsys, source, "delete", "product", "bike", "--dry-run")[1] == ["product bike: DELETED (dry run)"]
    assert wis(capsys, source, "delete", "product", "bike", "--if-revision", "1",
               "--comment", "not built any more")[1] == ["product bike: DELETED"]
    code, out, err = wis(capsys, source, "delete", "product", "bike")
    assert code == 1 and err.startswith("error: ")
    history = wis(capsys, source, "history", "product", "bike")[1]
    # revision, savedAt, change, author (the token's name: the first of WIS_API_TOKENS), comment
    assert [line.split("\t")[:1] + line.split("\t")[2:] for line in history] == [
        ["2", "DELETED", "env-1", "not built any more"], ["1", "CREATED", "env-1", ""]]
    assert wis(capsys, source, "restore", "product", "bike", "1")[1] == ["product bike: CREATED from revision 1"]
    with Client(source.url, TOKEN) as client:
        assert client.get_product("bike")["name"] == "Bike"
    code, out, err = wis(capsys, source, "restore", "product", "bike", "99")
    assert code == 1 and err.startswith("error: ")


@pytest.mark.file_backend_only("media removed with `wis gc --delete` on the server's data directory")
def test_restoring_a_revision_whose_media_were_removed_names_the_field(source, capsys):
    with Client(source.url, TOKEN) as client:
        old = client.session.post(source.url + "/uploads", files={"file": ("old.png", png(2000, seed=7))},
                                  data={"destinationId": "stepImage"}, timeout=30).json()["path"]
        client.create_process({"id": "frame_weld", "name": "Frame", "image": {"path": old},
                               "steps": [{"id": "s_1", "name": "S"}]})
        client.create_process({"id": "frame_weld", "name": "Frame", "steps": [{"id": "s_1", "name": "S"}]})
    assert main(["gc", "--data-dir", str(source.data_dir), "--min-age-hours", "0", "--delete"]) == 0
    capsys.readouterr()
    code, out, err = wis(capsys, source, "restore", "process", "frame_weld", "1")
    assert (code, out) == (1, [])
    assert err.startswith("error: process.image.path: ") and old in err
    with Client(source.url, TOKEN) as client:
        assert client.get_process("frame_weld")["revision"] == 2


@pytest.mark.file_backend_only("a media file removed from the server's data directory behind its back")
def test_an_export_whose_media_is_gone_reports_it_and_writes_the_rest(source, capsys, tmp_path):
    media = fill(source)
    gone = next(path for path in media if path.endswith(".gif"))
    next((source.data_dir / "orgs").rglob(gone.rsplit("/", 1)[1])).unlink()
    code, out, err = wis(capsys, source, "export", tmp_path / "org.tar.gz")
    assert code == 1
    assert out == [f"media {gone}: error: not exported: media not found (HTTP 404)"]
    assert "2 media file(s)" in err
    contents = ArchiveReader(tmp_path / "org.tar.gz").check()
    assert contents.problems == [] and set(contents.media) == set(media) - {gone}
