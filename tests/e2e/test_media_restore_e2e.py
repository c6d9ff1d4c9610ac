"""A revision whose media `wis gc --delete` removed is restorable once the same files are uploaded again
(docs/operations.md), end to end: real gunicorn, the `wis` command for uploads, gc and restore, on both backends."""
import requests

from service.interface import MB
from support.media import sha256, sha256_of, write_mp4, write_png
from support.servers import run_wis
from support.tokens import HEADERS, TOKEN

PROCESS = "weld_bracket"


def save_process(url, step):
    response = requests.post(f"{url}/graph/v2", headers=HEADERS, timeout=30, json={
        "query": "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }",
        "variables": {"input": {"process": {"id": PROCESS, "name": "Weld the bracket", "steps": [step]}}}})
    assert response.status_code == 200 and "errors" not in response.json(), response.text


def media_of(url):
    """(revision, image path, video path) of the process as stored now."""
    response = requests.post(f"{url}/graph/v2", headers=HEADERS, timeout=30, json={
        "query": "query($id: String!) { process(id: $id) { revision steps { primaryImage { path } video { path } } } }",
        "variables": {"id": PROCESS}})
    process = response.json()["data"]["process"]
    step = process["steps"][0]
    return process["revision"], (step["primaryImage"] or {}).get("path"), (step["video"] or {}).get("path")


def wis(env, *args):
    done = run_wis(*args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_revision_whose_media_were_collected_restores_once_they_are_uploaded_again(tmp_path, backend,
                                                                                    start_gunicorn):
    server = start_gunicorn(tmp_path / "data", backend=backend)
    env = {"WIS_URL": server.url, "WIS_TOKEN": TOKEN, "WIS_DATA_DIR": str(server.data_dir),
           **backend.environment(server.settings)}
    files = {"stepImage": write_png(tmp_path / "weld spot.png", 200_000),
             # over 10 MB: `wis upload` sends it as a chunk stream
             "stepVideo": write_mp4(tmp_path / "weld.mp4", 10 * MB + 1000)}

    def upload_all():
        return [wis(env, "upload", str(file), "--destination", destination, "--chunk-size", "4M",
                    "--state-dir", str(tmp_path / "state"))[0] for destination, file in files.items()]

    image, video = upload_all()
    save_process(server.url, {"id": "tack", "primaryImage": {"path": image}, "video": {"path": video}})
    save_process(server.url, {"id": "tack"})  # revision 2 names no media

    assert sorted(wis(env, "gc", "--delete", "--min-age-hours", "0")) == [f"default\t{image}", f"default\t{video}"]
    assert [requests.get(server.url + path, headers=HEADERS, timeout=30).status_code for path in (image, video)] == [
        404, 404]
    refused = run_wis("restore", "process", PROCESS, "1", env=env)
    assert refused.returncode != 0 and image in refused.stderr

    assert upload_all() == [image, video]
    wis(env, "restore", "process", PROCESS, "1")
    assert media_of(server.url) == (3, image, video)
    for path, file in ((image, files["stepImage"]), (video, files["stepVideo"])):
        served = requests.get(server.url + path, headers=HEADERS, timeout=30)
        assert served.status_code == 200 and sha256(served.content) == sha256_of(file)
