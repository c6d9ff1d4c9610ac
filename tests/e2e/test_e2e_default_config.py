"""The service started exactly as the README and the Procfile say, with the default configuration: no WIS_DATA_DIR
(or a relative one), no WIS_API_TOKENS, from a directory that is not the package's. Media uploaded through it are
served back byte for byte.

Every other end-to-end test hands the server an absolute data directory, which hid a relative `./data` being
resolved against the package folder by Flask's send_file (every media GET answered 500).
"""
import hashlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from service.client import Client
from service.interface import TOKEN_HEADER
from support.ports import free_port
from support.paths import REPOSITORY

BIN = Path(sys.executable).parent
REPOSITORY = REPOSITORY
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
# Over the 10 MB single-request limit, so the client sends it as a chunked stream.
MP4 = b"\0\0\0\x18ftypmp42" + hashlib.sha256(b"video").digest() * (11 * 1024 * 1024 // 32)
TOKEN_LINE = re.compile(re.escape(TOKEN_HEADER) + r": (\S+)")


def procfile_command(port):
    """The Procfile's web command for PORT, listening on loopback only (the Procfile's 0.0.0.0 is for hosting)."""
    line = next(line for line in (REPOSITORY / "Procfile").read_text().splitlines() if line.startswith("web:"))
    argv = shlex.split(line.removeprefix("web:").replace("$PORT", str(port)))
    return [arg.replace("0.0.0.0:", "127.0.0.1:") for arg in argv]


class ServedAsDocumented:
    """A server started by a command line in a working directory, with the environment a new user has."""

    def __init__(self, start, argv, cwd, port, env):
        """`start` is the server_process fixture."""
        environment = {name: value for name, value in os.environ.items()
                       if not name.startswith("WIS_") and name not in {"PORT", "PROMETHEUS_MULTIPROC_DIR"}}
        environment.update(env, PATH=f"{BIN}{os.pathsep}{environment.get('PATH', '')}")
        self.url = f"http://127.0.0.1:{port}"
        self._stderr = Path(cwd).parent / "server.stderr"
        with open(self._stderr, "wb") as stderr:
            self.process = start(argv, cwd=cwd, env=environment, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, f"the server exited: {self.stderr_text}"
            assert time.monotonic() < deadline, f"the server did not start: {self.stderr_text}"
            try:
                if requests.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.1)

    @property
    def stderr_text(self):
        return self._stderr.read_bytes().decode(errors="replace")

    def printed_token(self):
        """The token as a user finds it: in the line the server prints at start-up."""
        deadline = time.monotonic() + 10
        while not (found := TOKEN_LINE.search(self.stderr_text)):
            assert time.monotonic() < deadline, f"no token line printed: {self.stderr_text}"
            time.sleep(0.1)
        return found.group(1)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            assert self.process.wait(timeout=30) == 0, self.stderr_text
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


LAUNCHES = {
    # README: `.venv/bin/wis serve` (the listen address from WIS_BIND, so that tests do not collide on port 8000).
    "wis serve, default ./data": (lambda port: [str(BIN / "wis"), "serve"], {}, "data"),
    "wis serve, relative WIS_DATA_DIR": (lambda port: [str(BIN / "wis"), "serve"], {"WIS_DATA_DIR": "var/wis"},
                                         "var/wis"),
    "Procfile web command, default ./data": (procfile_command, {}, "data"),
    # Metrics values in a relative directory too; the workers and the master must agree on where it is.
    "Procfile web command, relative WIS_DATA_DIR and metrics directory": (
        procfile_command, {"WIS_DATA_DIR": "var/wis", "PROMETHEUS_MULTIPROC_DIR": "metrics"}, "var/wis"),
}


@pytest.fixture(params=list(LAUNCHES), ids=list(LAUNCHES))
def documented_server(request, tmp_path, server_process):
    command, env, data_dir = LAUNCHES[request.param]
    port = free_port()
    env = {**env, "PORT": str(port)} if command is procfile_command else {**env, "WIS_BIND": f"127.0.0.1:{port}"}
    workdir = tmp_path / "checkout"
    workdir.mkdir()
    if "PROMETHEUS_MULTIPROC_DIR" in env:
        (workdir / env["PROMETHEUS_MULTIPROC_DIR"]).mkdir()
    server = ServedAsDocumented(server_process, command(port), workdir, port, env)
    server.workdir, server.data_dir = workdir, workdir / data_dir
    yield server
    server.stop()


def test_media_uploaded_with_the_default_configuration_are_served_back(documented_server, tmp_path):
    server = documented_server
    token = server.printed_token()
    assert (server.data_dir / "default-token").read_text().strip() == token
    headers = {TOKEN_HEADER: token}

    # The image as curl sends it, the video through the Python client (a chunked stream).
    answer = requests.post(server.url + "/uploads", headers=headers, data={"destinationId": "stepImage"},
                           files={"file": ("weld spot.png", PNG, "image/png")}, timeout=30)
    assert answer.status_code == 201, answer.text
    image_path = answer.json()["path"]
    video_file = tmp_path / "weld.mp4"
    video_file.write_bytes(MP4)
    with Client(server.url, token) as client:
        video_path = client.upload(video_file, "stepVideo", chunk_size=4 * 1024 * 1024,
                                   state_dir=tmp_path / "state")
        downloaded = tmp_path / "downloaded.mp4"
        assert client.download(video_path, downloaded) == len(MP4)
    assert downloaded.read_bytes() == MP4

    for path, content, content_type in ((image_path, PNG, "image/png"), (video_path, MP4, "video/mp4")):
        whole = requests.get(server.url + path, headers=headers, timeout=30)
        assert whole.status_code == 200, whole.text
        assert whole.content == content and whole.headers["Content-Type"] == content_type
        head = requests.head(server.url + path, headers=headers, timeout=30)
        assert head.status_code == 200 and head.content == b""
        assert int(head.headers["Content-Length"]) == len(content) and head.headers["ETag"] == whole.headers["ETag"]
        ranged = requests.get(server.url + path, headers={**headers, "Range": "bytes=100-1123"}, timeout=30)
        assert ranged.status_code == 206 and ranged.content == content[100:1124]
        # Stored where the README says, under the working directory's data directory.
        segment, name = path.removeprefix("/api/v1/").split("/")
        assert (server.data_dir / "orgs" / "default" / "media" / segment / name).read_bytes() == content

    metrics = requests.get(server.url + "/metrics", timeout=30).text
    served = re.findall(r'wis_http_requests_total\{method="GET",route="/api/v1/<any\(images, videos\):segment>/<path:name>",'
                        r'status="(\d+)"\} (\S+)', metrics)
    assert dict(served) == {"200": "3.0", "206": "2.0"}, metrics

    # `wis gc` on the same box, from the same directory and environment, finds the same data directory.
    environment = {name: value for name, value in os.environ.items() if not name.startswith("WIS_")}
    if (relative := os.path.relpath(server.data_dir, server.workdir)) != "data":
        environment["WIS_DATA_DIR"] = relative
    gc = subprocess.run([str(BIN / "wis"), "gc", "--min-age-hours", "0"], cwd=server.workdir, env=environment,
                        capture_output=True, text=True, timeout=60)
    assert gc.returncode == 0, gc.stderr
    assert sorted(gc.stdout.split()) == sorted(["default", image_path, "default", video_path])
