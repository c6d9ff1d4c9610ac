"""Ctrl-C during `wis upload` of a chunked stream over a slow link (real gunicorn behind a proxy of the test's own that
holds the upload to 50 KB/s): the first SIGINT ends the command at once, saying how to resume, and running the same
command again finishes the same stream."""
import json
import signal
import subprocess
import time

import pytest

from service.cli.transfers import RESUME
from service.client import MB, Client
from support.client import downloaded_sha
from support.media import sha256_of, write_mp4
from support.proxy import Proxy
from support.servers import WIS, run_wis
from support.tokens import TOKEN
from support.waiting import wait_until

pytestmark = pytest.mark.file_backend_only("the client's own behaviour (requests, retries, progress, resuming); the server's answers are tested on both backends")

# A chunk of 1 MB takes 20 s through the proxy: the command used to end only when the chunks in flight had.
RATE = 50_000


def test_the_first_ctrl_c_ends_a_chunked_upload_at_once_and_the_same_command_resumes_it(server, tmp_path):
    video = write_mp4(tmp_path / "v.mp4", 12 * MB)
    state_dir = tmp_path / "state"
    with Proxy(server.url, upload_rate=RATE) as slow:
        command = ["upload", str(video), "--chunk-size", "1M", "--parallel", "2", "--url", slow.url, "--token", TOKEN,
                   "--state-dir", str(state_dir), "--no-progress"]
        process = subprocess.Popen([str(WIS), *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: sum(method == "PATCH" for method, _, _ in slow.requests_seen()) >= 2, seconds=30)
            time.sleep(0.5)  # the two chunks are on their way
            interrupted = time.monotonic()
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
            took = time.monotonic() - interrupted
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

        assert (process.returncode, out) == (130, "")
        assert err.splitlines() == [RESUME]
        assert took < 5, f"the command ended {took:.1f} s after Ctrl-C"
        [state_file] = state_dir.iterdir()
        stream_id = json.loads(state_file.read_text())["streamId"]
        slow.drop()  # the chunks the command abandoned end cut off at the server
        slow.upload_rate = None

        done = run_wis(*command)

    assert done.returncode == 0, done.stderr
    [path] = done.stdout.splitlines()
    api = Client(server.url, TOKEN)
    status = api.stream_status(stream_id)
    assert (status["state"], status["path"]) == ("complete", path)  # the same stream was finished
    assert downloaded_sha(api, path) == sha256_of(video)
