"""`wis` on the box that runs the service: the embedded default token is found; --token and WIS_TOKEN still win."""
import os

import pytest

from service.client import Client
from support.client import downloaded_sha
from support.media import GIF, JPEG, sha256_of, write_mp4, write_png
from support.servers import run_wis



@pytest.fixture(scope="module")
def box(tmp_path_factory, start_module_gunicorn):
    """A directory whose ./data is the data directory of a service started without WIS_API_TOKENS."""
    root = tmp_path_factory.mktemp("box")
    server = start_module_gunicorn(root / "data", workers=1, env={"WIS_API_TOKENS": ""})
    server.root = root
    server.default_token = (root / "data" / "default-token").read_text().strip()
    return server


def wis(box, *args, cwd=None, **env):
    """Run `wis` from `cwd` (default: the box) with no token or data directory in the environment but `env`."""
    environment = {key: value for key, value in os.environ.items() if key not in ("WIS_TOKEN", "WIS_DATA_DIR")}
    environment.update(env)
    return run_wis(*args, "--url", box.url, "--no-progress", "--state-dir", str(box.root / "state"),
                   env=environment, replace_env=True, cwd=cwd or box.root)


def test_upload_finds_the_default_token_in_the_working_directory_data(box):
    image = write_png(box.root / "photo.png")

    done = wis(box, "upload", str(image))

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("/api/v1/images/")
    assert downloaded_sha(Client(box.url, box.default_token), done.stdout.strip()) == sha256_of(image)


def test_data_dir_option_and_environment_point_at_the_token(box, tmp_path):
    image = write_png(tmp_path / "photo.png")

    by_option = wis(box, "upload", str(image), "--data-dir", str(box.root / "data"), cwd=tmp_path)
    by_environment = wis(box, "upload", str(image), cwd=tmp_path, WIS_DATA_DIR=str(box.root / "data"))

    assert (by_option.returncode, by_environment.returncode) == (0, 0), by_option.stderr + by_environment.stderr


def test_environment_token_wins_over_the_file(box):
    image = write_png(box.root / "photo.png")

    done = wis(box, "upload", str(image), WIS_TOKEN="not-the-token")

    assert done.returncode == 1
    assert "(HTTP 401)" in done.stderr


def test_token_option_wins_over_the_environment(box):
    image = write_png(box.root / "photo.png")

    refused = wis(box, "upload", str(image), "--token", "not-the-token", WIS_TOKEN=box.default_token)
    accepted = wis(box, "upload", str(image), "--token", box.default_token, WIS_TOKEN="not-the-token")

    assert (refused.returncode, accepted.returncode) == (1, 0)


def test_no_token_anywhere_says_where_it_looked(box, tmp_path):
    done = wis(box, "upload", str(write_png(tmp_path / "a.png")), cwd=tmp_path)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: no API token: no --token, WIS_TOKEN is not set, and {tmp_path / 'data' / 'default-token'} does not "
        "exist (a service started without WIS_API_TOKENS keeps its token there; point --data-dir or WIS_DATA_DIR at "
        "its data directory)"]


@pytest.mark.parametrize("name, content, prefix, suffix", [
    ("a.png", None, "/api/v1/images/", ".png"),
    ("b.jpeg", JPEG + bytes(500), "/api/v1/images/", ".jpg"),
    ("c.mp4", None, "/api/v1/videos/", ".mp4"),
    ("d.gif", GIF + bytes(500), "/api/v1/videos/", ".gif"),
    ("big.mp4", None, "/api/v1/videos/", ".mp4"),  # over 10 MB: a stream
])
def test_upload_without_destination_goes_where_the_content_says(box, tmp_path, name, content, prefix, suffix):
    file = tmp_path / name
    if content is not None:
        file.write_bytes(content)
    elif name.endswith(".png"):
        write_png(file)
    else:
        write_mp4(file, 11 * 1024 * 1024 if name == "big.mp4" else 5000)

    done = wis(box, "upload", str(file), "--data-dir", str(box.root / "data"))

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(prefix) and done.stdout.strip().endswith(suffix)
    assert downloaded_sha(Client(box.url, box.default_token), done.stdout.strip()) == sha256_of(file)


def test_upload_of_an_unknown_format_asks_for_a_destination(box, tmp_path):
    file = tmp_path / "clip.avi"
    file.write_bytes(b"RIFF....AVI " + bytes(100))

    done = wis(box, "upload", str(file))

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: cannot tell the destination of {file} from its content: uploads accept JPEG or PNG -> stepImage, "
        "MP4 -> stepVideo, GIF -> stepVideoGif; this is none of these"]


def test_chunk_size_over_the_limit_is_one_line(box, tmp_path):
    done = wis(box, "upload", str(write_mp4(tmp_path / "c.mp4", 11 * 1024 * 1024)), "--chunk-size", "11M")

    assert done.returncode == 1
    assert done.stderr.splitlines() == ["error: chunk size must be between 1 byte and 10 MB, not 11534336"]
