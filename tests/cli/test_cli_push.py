"""`wis push` against real gunicorn: a directory of stations, processes and products with local media."""
import json

import pytest
import yaml

from service.cli import main
from support.client import downloaded_sha
from support.media import GIF, sha256_of, write_mp4, write_png
from support.ports import free_port
from support.tokens import TOKEN


pytestmark = pytest.mark.file_backend_only("the client's own behaviour (requests, retries, progress, resuming); the server's answers are tested on both backends")


@pytest.fixture
def server(gunicorn_server):
    """A fresh server per test: each test starts from no stored objects."""
    return gunicorn_server


def push(server, capsys, *paths):
    code = main(["push", *map(str, paths), "--url", server.url, "--token", TOKEN])
    out, err = capsys.readouterr()
    return code, out.splitlines()


def write_gif(path):
    path.write_bytes(GIF + bytes(200))
    return path


@pytest.fixture
def instructions(tmp_path):
    """A directory whose file names sort products first, to show the apply order is by kind."""
    root = tmp_path / "instructions"
    media = root / "media"
    media.mkdir(parents=True)
    write_png(media / "frame.png")
    write_mp4(media / "clip.mp4", 30_000)
    write_gif(media / "spin.gif")
    (root / "a_products.yaml").write_text(yaml.safe_dump([{"product": {
        "id": "bike", "name": "Bike", "finalProcessId": "assembly",
        "dependencies": [{"processId": "assembly", "upstreamProcessId": "frame_weld", "quantity": 1}],
    }}]))
    (root / "processes.json").write_text(json.dumps([
        {"process": {"id": "frame_weld", "name": "Frame", "image": {"path": "media/frame.png"},
                     "steps": [{"id": "weld", "primaryImage": {"path": "media/frame.png"},
                                "video": {"path": "media/clip.mp4"}}]}},
        {"process": {"id": "assembly", "name": "Assembly",
                     "steps": [{"id": "spin", "video": {"path": "media/spin.gif"}}]}},
    ]))
    (root / "lines").mkdir()
    (root / "lines" / "line.yml").write_text("station:\n  id: line_1\n  name: Line 1\n")
    (root / "README.txt").write_text("not an instruction file")
    return root


def test_push_applies_stations_processes_then_products(server, api, capsys, instructions):
    code, lines = push(server, capsys, instructions)

    assert code == 0
    assert lines == [f"station line_1 ({instructions}/lines/line.yml): CREATED",
                     f"process frame_weld ({instructions}/processes.json[0]): CREATED",
                     f"process assembly ({instructions}/processes.json[1]): CREATED",
                     f"product bike ({instructions}/a_products.yaml[0]): CREATED"]


def test_push_uploads_local_media_once_and_references_them(server, api, capsys, instructions):
    push(server, capsys, instructions)

    frame = api.get_process("frame_weld")
    image = frame["image"]["path"]
    step = frame["steps"][0]
    assert image.startswith("/api/v1/images/") and step["primaryImage"]["path"] == image
    assert step["video"]["path"].startswith("/api/v1/videos/") and step["video"]["path"].endswith(".mp4")
    assert downloaded_sha(api, image) == sha256_of(instructions / "media" / "frame.png")
    assert downloaded_sha(api, step["video"]["path"]) == sha256_of(instructions / "media" / "clip.mp4")
    gif = api.get_process("assembly")["steps"][0]["video"]["path"]
    assert gif.startswith("/api/v1/videos/") and gif.endswith(".gif")


def test_second_push_updates(server, capsys, instructions):
    push(server, capsys, instructions)

    code, lines = push(server, capsys, instructions / "processes.json", instructions / "lines" / "line.yml")

    assert code == 0
    assert lines == [f"station line_1 ({instructions}/lines/line.yml): UPDATED",
                     f"process frame_weld ({instructions}/processes.json[0]): UPDATED",
                     f"process assembly ({instructions}/processes.json[1]): UPDATED"]


def test_push_reports_each_failure_and_applies_the_rest(server, api, capsys, tmp_path):
    (tmp_path / "mixed.yaml").write_text(yaml.safe_dump([
        {"process": {"id": "good_one", "name": "Good"}},
        {"process": {"id": "bad_one", "name": "Bad", "steps": [{"id": "no spaces allowed"}]}},
        {"process": {"id": "no_media", "name": "No media", "steps": [{"id": "s1", "primaryImage": {"path": "gone.png"}}]}},
        {"widget": {"id": "w1"}},
        {"product": {"id": "orphan", "name": "Orphan", "finalProcessId": "nowhere", "dependencies": []}},
    ]))
    (tmp_path / "broken.json").write_text("{not json")

    mixed = tmp_path / "mixed.yaml"
    code, lines = push(server, capsys, mixed, tmp_path / "broken.json")

    assert code == 1
    assert lines[0] == (f"{tmp_path / 'mixed.yaml'}[3]: error: expected one object of the form "
                        '{"station": {...}}, {"process": {...}} or {"product": {...}}')
    assert lines[1].startswith(f"{tmp_path / 'broken.json'}: error: cannot read: Expecting property name")
    assert lines[2] == f"process good_one ({mixed}[0]): CREATED"
    assert lines[3].startswith(f"process bad_one ({mixed}[1]): error: ") and "process.steps[0].id" in lines[3]
    assert lines[4] == (f"process no_media ({mixed}[2]): error: process.steps[0].primaryImage.path: gone.png: no such "
                        f"file (looked for {tmp_path / 'gone.png'})")
    assert lines[5].startswith(f"product orphan ({mixed}[4]): error: ") and "nowhere" in lines[5]
    assert len(lines) == 6
    assert api.get_process("good_one") is not None
    assert api.get_process("bad_one") is None


def test_push_refuses_a_video_that_is_neither_mp4_nor_gif(server, capsys, tmp_path):
    (tmp_path / "clip.avi").write_bytes(b"RIFF")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({"process": {
        "id": "avi_video", "name": "P", "steps": [{"id": "s1", "video": {"path": "clip.avi"}}]}}))

    code, lines = push(server, capsys, tmp_path / "p.yaml")

    assert code == 1
    assert lines == [f"process avi_video ({tmp_path / 'p.yaml'}): error: process.steps[0].video.path: clip.avi: a video "
                     "file must be MP4 or GIF; this is not a recognised image or video file"]


def test_push_stops_at_the_first_unreachable_server_error(capsys, instructions):
    url = f"http://127.0.0.1:{free_port()}"

    code = main(["push", str(instructions), "--url", url, "--token", TOKEN, "--retries", "0"])

    out, err = capsys.readouterr()
    assert (code, out, err.splitlines()) == (1, "", [f"error: cannot reach {url}: Connection refused"])


def test_push_goes_by_content_not_by_name(server, api, capsys, tmp_path):
    write_gif(tmp_path / "spin.video")
    write_png(tmp_path / "photo.mp4")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump([
        {"process": {"id": "gif_named_oddly", "name": "P",
                     "steps": [{"id": "step_1", "video": {"path": "spin.video"}}]}},
        {"process": {"id": "png_as_video", "name": "P",
                     "steps": [{"id": "step_1", "video": {"path": "photo.mp4"}}]}},
    ]))

    code, lines = push(server, capsys, tmp_path / "p.yaml")

    assert code == 1
    assert lines == [f"process gif_named_oddly ({tmp_path / 'p.yaml'}[0]): CREATED",
                     f"process png_as_video ({tmp_path / 'p.yaml'}[1]): error: process.steps[0].video.path: photo.mp4: "
                     "a video file must be MP4 or GIF; this is a PNG file"]
    assert api.get_process("gif_named_oddly")["steps"][0]["video"]["path"].endswith(".gif")


def test_client_push_returns_a_result_per_entry(server, api, instructions):
    seen = []

    results = api.push([instructions], on_result=seen.append, state_dir=instructions / ".state")

    assert results == seen
    assert [(r.label, r.outcome, r.error) for r in results] == [
        (f"station line_1 ({instructions}/lines/line.yml)", "CREATED", None),
        (f"process frame_weld ({instructions}/processes.json[0])", "CREATED", None),
        (f"process assembly ({instructions}/processes.json[1])", "CREATED", None),
        (f"product bike ({instructions}/a_products.yaml[0])", "CREATED", None)]
    assert [api.get_station("line_1")["id"], api.get_process("frame_weld")["id"], api.get_process("assembly")["id"],
            api.get_product("bike")["id"]] == ["line_1", "frame_weld", "assembly", "bike"]


def test_each_line_names_the_file_and_position_of_its_object(server, capsys, tmp_path):
    noid = tmp_path / "noid"
    noid.mkdir()
    (noid / "a.yaml").write_text("- station: {name: B}\n")
    (noid / "b.yaml").write_text("- station: {id: press_2, name: P2}\n- station: {nme: C}\n")

    code, lines = push(server, capsys, noid)

    assert code == 1
    assert lines[0].startswith(f"station ? ({noid / 'a.yaml'}[0]): error: station.id: ")
    assert lines[1] == f"station press_2 ({noid / 'b.yaml'}[0]): CREATED"
    assert lines[2].startswith(f"station ? ({noid / 'b.yaml'}[1]): error: ")
    assert len(lines) == 3


def test_values_json_cannot_carry_are_errors_naming_file_entry_and_field_and_the_rest_is_pushed(
        server, api, capsys, tmp_path):
    (tmp_path / "f.yaml").write_text("- station: {id: date_1, name: 2024-01-01}\n"
                                     "- station: {id: fine_1, name: Fine}\n"
                                     "- process: {id: bin_1, name: B, steps: [{id: step_1, name: !!binary aGk=}]}\n"
                                     "- station: {id: key_1, name: K, on: x}\n")
    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000)
    (tmp_path / "deep.yaml").write_text("station: {id: deep_1, name: D, x: " + "[" * 150 + "]" * 150 + "}\n")

    code, lines = push(server, capsys, tmp_path / "f.yaml", tmp_path / "deep.json", tmp_path / "deep.yaml")

    file = tmp_path / "f.yaml"
    assert code == 1
    assert lines == [
        f"station date_1 ({file}[0]): error: station.name: 2024-01-01 is a date; quote it to send it as text",
        f"process bin_1 ({file}[2]): error: process.steps[0].name: b'hi' is binary data (!!binary), which JSON "
        "cannot carry",
        f"station key_1 ({file}[3]): error: station: a key read as true (YAML reads an unquoted yes, no, on or off "
        "so); field names are text: quote it",
        f"{tmp_path / 'deep.json'}: error: cannot read: nested deeper than 100 levels",
        f"station deep_1 ({tmp_path / 'deep.yaml'}): error: nested deeper than 100 levels",
        f"station fine_1 ({file}[1]): CREATED",
    ]
    assert api.get_station("date_1") is None and api.get_station("fine_1")["name"] == "Fine"


def test_the_same_kind_and_id_twice_in_a_push_is_an_error_naming_both_places_and_sends_neither(
        server, api, capsys, tmp_path):
    (tmp_path / "dup.yaml").write_text("- station: {id: press_4, name: P4}\n- station: {id: press_4, name: P4 dup}\n"
                                       "- process: {id: press_4, name: Not a station}\n")
    (tmp_path / "more.yaml").write_text("- station: {id: press_5, name: P5}\n")
    (tmp_path / "again.yaml").write_text("- station: {id: press_5, name: P5 again}\n")
    dup, more, again = (tmp_path / name for name in ("dup.yaml", "more.yaml", "again.yaml"))

    for _ in range(2):
        code, lines = push(server, capsys, dup, more, again, dup)

        assert code == 1
        assert lines[:4] == [
            f"station press_4 ({dup}[0]): error: station press_4 is also at {dup}[1]: an object goes once in a push; "
            "none of its copies is sent",
            f"station press_4 ({dup}[1]): error: station press_4 is also at {dup}[0]: an object goes once in a push; "
            "none of its copies is sent",
            f"station press_5 ({more}[0]): error: station press_5 is also at {again}[0]: an object goes once in a "
            "push; none of its copies is sent",
            f"station press_5 ({again}[0]): error: station press_5 is also at {more}[0]: an object goes once in a "
            "push; none of its copies is sent"]
        assert lines[4].startswith(f"process press_4 ({dup}[2]): ")  # another kind: not a copy; dup.yaml read once
        assert len(lines) == 5
    assert api.get_station("press_4") is None and api.get_station("press_5") is None
    assert api.get_process("press_4")["revision"] == 1


def test_a_dry_run_leaves_out_only_the_errors_on_local_files_the_real_run_uploads(server, api, capsys, tmp_path):
    write_png(tmp_path / "my photo ü.png")
    (tmp_path / "f.yaml").write_text('- process: {id: pd, name: D, steps: [{id: s1, primaryImage: {path: "my photo '
                                     'ü.png"}}]}\n- process: {id: pd_ok, name: D, image: {path: "my photo ü.png"}, '
                                     'steps: [{id: s_1, primaryImage: {path: "my photo ü.png"}}]}\n')

    code = main(["push", str(tmp_path / "f.yaml"), "--dry-run", "--url", server.url, "--token", TOKEN])

    lines = capsys.readouterr().out.splitlines()
    real = main(["push", str(tmp_path / "f.yaml"), "--url", server.url, "--token", TOKEN])
    real_lines = capsys.readouterr().out.splitlines()
    assert (code, real) == (1, 1)
    assert lines[0].startswith(f"process pd ({tmp_path / 'f.yaml'}[0]): error: process.id: ")
    assert "process.steps[0].id: " in lines[0] and "primaryImage" not in lines[0]
    assert lines[0] == real_lines[0]  # reported as the real run reports it
    assert lines[1] == (f"process pd_ok ({tmp_path / 'f.yaml'}[1]): VALID (dry run; 2 field(s) wait for what the "
                        "push creates first)")
    assert len(lines) == 2
