"""`wis gc` on a data directory (no server running): expired streams, unreferenced media."""
import time

import pytest

from service.cli import main
from service.domain.media_gc import unreferenced_media
from service.interface.media_references import referenced_media
from service.storage import get_repository
from support.media import PNG
from support.uploads import expire_every_stream, uploaded_path

PROCESS_MUTATION = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"


def create_process(client, headers, process):
    response = client.post("/graph/v2", headers=headers, json={"query": PROCESS_MUTATION,
                                                               "variables": {"input": {"process": process}}})
    assert response.get_json() == {"data": {"processCreate": "CREATED"}}


def open_stream(client, headers):
    response = client.post("/uploads", headers=headers, json={
        "destinationId": "stepVideo", "fileName": "long.mp4", "fileSize": 20 * 1024 * 1024, "sha": "a" * 64})
    assert response.status_code == 201
    return response.get_json()["streamId"]


@pytest.fixture
def data(app, client, auth, other_auth, monkeypatch):
    """Media of two orgs, one of them used by a process, and one open upload stream; `wis gc` is pointed at the same
    stores (on the shared backend through the environment, as an operator would)."""
    for variable, key in (("WIS_DATABASE_URL", "DATABASE_URL"), ("WIS_S3_BUCKET", "S3_BUCKET"),
                          ("WIS_S3_PREFIX", "S3_PREFIX")):
        if app.config[key]:
            monkeypatch.setenv(variable, app.config[key])
    used = uploaded_path(client, auth, PNG + bytes(100), name="used.png")
    unused = uploaded_path(client, auth, PNG + bytes(100), name="unused.png")
    others = uploaded_path(client, other_auth, PNG + bytes(100), name="theirs.png")
    create_process(client, auth, {"id": "press", "name": "Press",
                                  "steps": [{"id": "load", "primaryImage": {"path": used}}]})
    stream = open_stream(client, auth)
    return {"dir": app.config["DATA_DIR"], "used": used, "unused": unused, "others": others, "stream": stream}


def status_of(client, path, headers):
    with client.get(path, headers=headers) as response:
        return response.status_code


def gc(capsys, data_dir, *options):
    code = main(["gc", "--data-dir", data_dir, *options])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def test_gc_lists_unreferenced_media_of_every_org(data, client, auth, other_auth, capsys):
    code, out, err = gc(capsys, data["dir"], "--min-age-hours", "0")

    assert code == 0
    assert out == sorted([f"default\t{data['unused']}", f"other\t{data['others']}"])
    assert err[-1] == "2 unreferenced media file(s) found (use --delete to delete them)"
    assert status_of(client, data["unused"], headers=auth) == 200


def test_gc_delete_removes_only_unreferenced_media(data, client, auth, other_auth, capsys):
    code, out, err = gc(capsys, data["dir"], "--min-age-hours", "0", "--delete")

    assert (code, len(out), err[-1]) == (0, 2, "2 unreferenced media file(s) deleted")
    assert status_of(client, data["unused"], headers=auth) == 404
    assert status_of(client, data["others"], headers=other_auth) == 404
    assert status_of(client, data["used"], headers=auth) == 200
    assert gc(capsys, data["dir"], "--min-age-hours", "0")[1] == []


def test_gc_spares_recent_uploads_by_default(data, capsys):
    code, out, err = gc(capsys, data["dir"])

    assert (code, out) == (0, [])


def test_gc_removes_expired_streams(data, client, auth, capsys, monkeypatch):
    assert status_of(client, f"/uploads/{data['stream']}", headers=auth) == 200
    if client.application.config["DATABASE_URL"]:
        # One clock (CONTRACT 13): a stream expires by the database's clock and its own time-to-live, whatever the
        # WIS_STREAM_TTL_HOURS of the host running `wis gc`.
        expire_every_stream(get_repository(client.application))
    else:
        # The shortest time-to-live there is (0 is refused: a stream created under it would expire as it is made).
        monkeypatch.setenv("WIS_STREAM_TTL_HOURS", "1e-9")
        time.sleep(0.01)

    code, out, err = gc(capsys, data["dir"])

    assert (code, err[0]) == (0, "removed 1 expired upload stream(s)")
    assert status_of(client, f"/uploads/{data['stream']}", headers=auth) == 404


def test_gc_keeps_streams_within_their_lifetime(data, client, auth, capsys):
    code, out, err = gc(capsys, data["dir"])

    assert (code, err[0]) == (0, "removed 0 expired upload stream(s)")
    assert status_of(client, f"/uploads/{data['stream']}", headers=auth) == 200


def test_gc_of_a_missing_data_directory_is_one_line(tmp_path, capsys):
    code, out, err = gc(capsys, str(tmp_path / "nowhere"))

    assert (code, out, err) == (1, [], [f"error: data directory {tmp_path / 'nowhere'} does not exist"])


def test_referenced_media_are_found_at_any_depth():
    document = {
        "id": "p", "image": {"path": "/api/v1/images/a.png"},
        "steps": [{"primaryImage": {"path": "/api/v1/images/b.png"}, "video": {"path": "/api/v1/videos/c.mp4"},
                   "actions": [{"description": {"text": "image"}}], "alerts": []}],
    }
    assert referenced_media(document) == {"/api/v1/images/a.png", "/api/v1/images/b.png", "/api/v1/videos/c.mp4"}


def test_gc_delete_keeps_media_a_process_starts_using_after_the_listing(data, client, auth, other_auth, capsys,
                                                                          monkeypatch):
    """A process pushed between `wis gc`'s listing and its delete keeps its media (CONTRACT 13): each deletion checks
    the references again under the org's references lock, which process writes naming media take too."""
    import service.cli.operations

    def listing_then_a_new_process(repo, older_than=None):
        garbage = unreferenced_media(repo, older_than)
        assert (("default", data["unused"]) in garbage)
        create_process(client, auth, {"id": "late", "name": "Late",
                                      "steps": [{"id": "load", "primaryImage": {"path": data["unused"]}}]})
        return garbage

    monkeypatch.setattr(service.cli.operations, "unreferenced_media", listing_then_a_new_process)
    code, out, err = gc(capsys, data["dir"], "--min-age-hours", "0", "--delete")

    assert (code, out) == (0, [f"other\t{data['others']}"])
    assert status_of(client, data["others"], headers=other_auth) == 404
    assert status_of(client, data["unused"], headers=auth) == 200
    response = client.post("/graph/v2", headers=auth, json={
        "query": '{ process(id: "late") { steps { primaryImage { path } } } }'})
    assert response.get_json()["data"]["process"]["steps"][0]["primaryImage"]["path"] == data["unused"]


@pytest.mark.parametrize("hours", ["-1", "-inf", "inf", "nan", "soon"])
def test_an_age_that_is_no_finite_number_of_hours_is_refused_and_nothing_is_removed(data, client, auth, capsys,
                                                                                     hours):
    """A negative age made every medium old enough: --delete removed what was uploaded a moment ago."""
    with pytest.raises(SystemExit) as exited:
        main(["gc", "--data-dir", data["dir"], f"--min-age-hours={hours}", "--delete"])
    assert exited.value.code == 2
    assert "--min-age-hours" in capsys.readouterr().err
    assert status_of(client, data["unused"], auth) == 200
