"""`wis serve`: gunicorn with the service's config, the app factory, and the command-line options."""
import errno
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests

from service import storage
from service.cli import main
from service.errors import ConfigurationError
from support.ports import free_port
from support.tokens import HEADERS, TOKENS

WIS = Path(sys.executable).with_name("wis")


def test_serve_runs_gunicorn_with_the_service_config(tmp_path, server_process):
    port = free_port()
    data_dir = tmp_path / "served-data"
    process = server_process(
        [str(WIS), "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--data-dir", str(data_dir)],
        env=dict(os.environ, WIS_API_TOKENS=TOKENS), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = requests.get(f"http://127.0.0.1:{port}/uploads/nothing",
                                      headers=HEADERS, timeout=1)
                break
            except requests.ConnectionError:
                assert process.poll() is None and time.monotonic() < deadline, "wis serve did not start"
                time.sleep(0.1)
        assert answer.status_code == 404 and answer.json() == {"error": "stream not found"}
        assert (data_dir / "orgs").is_dir()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0


def test_dev_mode_is_one_reloading_worker(monkeypatch, tmp_path):
    executed = []
    monkeypatch.setattr(os, "execv", lambda program, argv: executed.append(argv))
    monkeypatch.setenv("WIS_DATA_DIR", "unchanged")

    main(["serve", "--dev", "--data-dir", str(tmp_path), "--bind", "127.0.0.1:9999"])

    [argv] = executed
    assert argv[1:] == ["-m", "gunicorn", "-c", "python:service.gunicorn_config", "--bind", "127.0.0.1:9999",
                        "--reload", "--workers", "1", "service:create_app()"]
    assert os.environ["WIS_DATA_DIR"] == str(tmp_path)


@pytest.mark.parametrize("setting, named", [
    ({"WIS_WORKERS": "many"}, "WIS_WORKERS"),
    ({"WIS_API_TOKENS": "acme:short"}, "WIS_API_TOKENS"),
    ({"WIS_API_TOKENS": "acme:a-long-enough-token,acme:another-long-token:owner"},
     "WIS_API_TOKENS, entry 2 (org 'acme'): unknown scope 'owner'"),
    ({"WIS_STREAM_TTL_HOURS": "soon"}, "WIS_STREAM_TTL_HOURS"),
    # Passed start-up before, then every tus creation was a 500.
    ({"WIS_STREAM_TTL_HOURS": "inf"}, "invalid value for WIS_STREAM_TTL_HOURS: 'inf' (must be a number of hours"),
    # Passed start-up before, then every login was a 500, and a body arriving in two pieces.
    ({"WIS_SESSION_HOURS": "100000000"}, "invalid value for WIS_SESSION_HOURS: '100000000' (must be a number of hours"),
    ({"WIS_REQUEST_BODY_TIMEOUT": "1e300"}, "invalid value for WIS_REQUEST_BODY_TIMEOUT: '1e300' (must be a number"),
    # A worker boot's traceback (exit 3), the master's traceback, gunicorn's own lines not naming the variable.
    ({"WIS_THREADS": "0"}, "invalid value for WIS_THREADS: '0' (must be a whole number from 1, at most 1024)"),
    ({"WIS_WORKER_CLASS": "nonsense"}, "invalid value for WIS_WORKER_CLASS: 'nonsense' (must be a gunicorn worker"),
    ({"WIS_WORKERS": "-1"}, "invalid value for WIS_WORKERS: '-1' (must be a whole number from 1, at most 256)"),
    ({"WIS_ERROR_LOG": "/nonexistent/x"}, "invalid value for WIS_ERROR_LOG: '/nonexistent/x' (must be '-' or a file"),
])
def test_a_malformed_setting_stops_serve_with_one_line_naming_it(tmp_path, setting, named, server_process):
    environment = {name: value for name, value in os.environ.items() if not name.startswith("WIS_")}
    done = server_process.run([str(WIS), "serve", "--bind", f"127.0.0.1:{free_port()}"], cwd=tmp_path, timeout=60,
                              env={**environment, **setting}, capture_output=True, text=True)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("work-instruction service: ") and named in line and "Traceback" not in done.stderr


PROCFILE_WEB = Path(__file__).parents[2].joinpath("Procfile").read_text().split("web: ", 1)[1].split("\n")[0]


@pytest.mark.parametrize("tokens", [None, TOKENS])  # without: the master makes the default token; with: the workers
@pytest.mark.parametrize("command", ["wis serve", "Procfile"])
@pytest.mark.parametrize("data_dir, reason", [
    ("a-file/data", "cannot make the data directory {path}: Not a directory"),
    ("a-file", "cannot make the data directory {path}: Not a directory"),
])
def test_an_unusable_data_directory_stops_serve_with_one_line_naming_it(tmp_path, server_process, tokens, command,
                                                                        data_dir, reason):
    """It was a NotADirectoryError traceback from the master (making the default token) or from every worker that
    failed to boot; now one line naming the setting and the system's reason, exit status 1, as a malformed setting."""
    (tmp_path / "a-file").write_text("not a directory")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("WIS_")}
    environment.update({"WIS_API_TOKENS": tokens} if tokens else {})
    port = free_port()
    if command == "wis serve":
        argv = [str(WIS), "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--data-dir", data_dir]
    else:
        # The Procfile's own command line, as a platform runs it (bash, $PORT), with WIS_DATA_DIR; on 127.0.0.1 only.
        line = PROCFILE_WEB.replace("gunicorn", f"{sys.executable} -m gunicorn", 1).replace("0.0.0.0", "127.0.0.1")
        argv = ["bash", "-c", f"exec {line}"]
        environment.update(PORT=str(port), WIS_DATA_DIR=data_dir, WIS_WORKERS="1")
    done = server_process.run(argv, cwd=tmp_path, timeout=60, env=environment, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "work-instruction service: WIS_DATA_DIR (wis serve --data-dir): "
        + reason.format(path=tmp_path / data_dir)], done.stderr


def test_a_data_directory_that_cannot_be_written_is_named_with_the_reason(tmp_path, monkeypatch):
    """Permission denied or a read-only file system (made here by refusing the probe: the tests run as root, whom no
    mode stops)."""
    def refused(**options):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), options["dir"])

    monkeypatch.setattr(tempfile, "TemporaryFile", refused)
    with pytest.raises(ConfigurationError) as refusal:
        storage.check_data_dir({"DATA_DIR": str(tmp_path / "data")})
    assert str(refusal.value) == (f"WIS_DATA_DIR (wis serve --data-dir): cannot write in the data directory "
                                  f"{tmp_path / 'data'}: Permission denied")


# Hides the shared backend's packages, as on a machine where the `shared` extra was not installed.
WITHOUT_SHARED_EXTRA = '''
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"psycopg", "psycopg_pool", "boto3", "botocore"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NotInstalled())
'''


def test_serve_with_a_database_but_without_the_shared_extra_names_the_install_command(tmp_path, server_process):
    (tmp_path / "sitecustomize.py").write_text(WITHOUT_SHARED_EXTRA)
    environment = {name: value for name, value in os.environ.items() if not name.startswith("WIS_")}
    environment.update(PYTHONPATH=str(tmp_path), WIS_API_TOKENS=TOKENS, WIS_S3_BUCKET="wis",
                       WIS_DATABASE_URL=f"postgresql://wis@127.0.0.1:{free_port()}/wis")
    done = server_process.run([str(WIS), "serve", "--bind", f"127.0.0.1:{free_port()}"], cwd=tmp_path, timeout=60,
                              env=environment, capture_output=True, text=True)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line == ("work-instruction service: the shared backend (WIS_DATABASE_URL is set) needs psycopg, "
                    "psycopg_pool, boto3, not installed: pip install 'work-instruction-service[shared]' (from a "
                    "checkout: pip install '.[shared]')")
