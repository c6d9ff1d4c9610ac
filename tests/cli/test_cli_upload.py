"""`wis upload` against real gunicorn: the printed path, resuming an interrupted run, one-line errors."""
import io
import json
import sys

import pytest

from service.cli import main
from service.client import MB, Client
from service.errors import Unauthenticated
from support.client import Interrupted, downloaded_sha, interrupt_after
from support.media import sha256_of, write_mp4, write_png
from support.ports import free_port
from support.servers import run_wis
from support.tokens import TOKEN

pytestmark = pytest.mark.file_backend_only("the client's own behaviour (requests, retries, progress, resuming); the server's answers are tested on both backends")


def test_upload_prints_the_path_of_the_uploaded_file(server, tmp_path):
    image = write_png(tmp_path / "photo.png", 50_000)

    done = run_wis("upload", str(image), "--destination", "stepImage", "--state-dir", str(tmp_path / "state"),
                   env={"WIS_URL": server.url, "WIS_TOKEN": TOKEN})

    assert done.returncode == 0, done.stderr
    [path] = done.stdout.splitlines()
    assert path.startswith("/api/v1/images/") and path.endswith("-photo.png")
    assert downloaded_sha(Client(server.url, TOKEN), path) == sha256_of(image)


def test_rerun_resumes_an_interrupted_upload(server, tmp_path):
    video = write_mp4(tmp_path / "film.mp4", 14 * MB)
    state_dir = tmp_path / "state"
    api = Client(server.url, TOKEN, backoff=0)
    with pytest.raises(Interrupted):
        api.upload(video, "stepVideo", chunk_size=MB, parallel=2, progress=interrupt_after(4), state_dir=state_dir)
    [state_file] = state_dir.iterdir()
    stream_id = json.loads(state_file.read_text())["streamId"]
    assert api.stream_status(stream_id)["state"] == "open"

    done = run_wis("upload", str(video), "--destination", "stepVideo", "--chunk-size", "1M", "--url", server.url,
                   "--token", TOKEN, "--state-dir", str(state_dir))

    assert done.returncode == 0, done.stderr
    [path] = done.stdout.splitlines()
    status = api.stream_status(stream_id)
    assert (status["state"], status["path"]) == ("complete", path)  # the same stream was finished
    assert downloaded_sha(api, path) == sha256_of(video)
    assert not state_file.exists()


def test_server_error_is_one_line_without_traceback(server, tmp_path):
    too_big = write_png(tmp_path / "big.png", 8 * MB + 1)

    done = run_wis("upload", str(too_big), "--destination", "stepImage", "--url", server.url, "--token", TOKEN)

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["error: file of size 8.1MB is larger than 8MB (HTTP 413)"]


@pytest.mark.parametrize("case", ["bad token", "no token", "missing file", "refused", "too big stream",
                                  "unusable state dir"])
def test_expected_failures_are_one_line(server, tmp_path, capsys, monkeypatch, case):
    monkeypatch.delenv("WIS_TOKEN", raising=False)
    monkeypatch.delenv("WIS_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./data/default-token here
    file = write_png(tmp_path / "a.png")
    url, token, destination = server.url, TOKEN, "stepImage"
    if case == "bad token":
        token = "not-a-token"
        expected = f"error: {Unauthenticated.message} (HTTP 401)"
    elif case == "no token":
        token = None
        expected = (f"error: no API token: no --token, WIS_TOKEN is not set, and {tmp_path / 'data' / 'default-token'} "
                    "does not exist (a service started without WIS_API_TOKENS keeps its token there; point "
                    "--data-dir or WIS_DATA_DIR at its data directory)")
    elif case == "missing file":
        file = tmp_path / "missing.png"
        expected = f"error: No such file or directory: {file}"
    elif case == "refused":
        url = f"http://127.0.0.1:{free_port()}"
        expected = f"error: cannot reach {url}: Connection refused"
    elif case == "too big stream":
        file = write_png(tmp_path / "huge.png", 12 * MB)
        expected = "error: file of size 12MB is larger than 8MB (HTTP 413)"
    else:
        file, destination = write_mp4(tmp_path / "clip.mp4", 11 * MB), "stepVideo"
        state_dir = write_png(tmp_path / "state")  # a file where the directory should be
        expected = f"error: File exists: {state_dir}"
    argv = ["upload", str(file), "--destination", destination, "--url", url, "--retries", "0",
            "--state-dir", str(tmp_path / "state")] + (["--token", token] if token else [])

    code = main(argv)

    out, err = capsys.readouterr()
    assert (code, out, err.splitlines()) == (1, "", [expected])


class Terminal(io.StringIO):
    """What `wis` writes to stderr, as a terminal would receive it."""

    def isatty(self):
        return True


@pytest.mark.parametrize("where", ["terminal", "terminal, --no-progress", "pipe"])
def test_the_progress_bar_is_drawn_on_a_terminal_only(server, tmp_path, monkeypatch, where):
    video = write_mp4(tmp_path / "film.mp4", 11 * MB)
    stderr = Terminal() if where.startswith("terminal") else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)

    code = main(["upload", str(video), "--url", server.url, "--token", TOKEN, "--state-dir", str(tmp_path / "state"),
                 *(["--no-progress"] if "no-progress" in where else [])])

    assert code == 0
    if where == "terminal":
        assert "film.mp4" in stderr.getvalue() and "%|" in stderr.getvalue()
    else:
        assert stderr.getvalue() == ""
