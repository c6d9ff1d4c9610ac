"""What a killed process leaves (a node's spooled request bodies, a gunicorn master's metrics directory) is removed
when the next process starts, including when the killed process is a zombie nobody reaps: in a container whose pid 1
never reaps, a worker whose master was killed with it stays a zombie, and its pid still has a /proc entry."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.storage.common.process_ids import process_gone
from service.storage.shared.streams.spool import remove_orphans


def _state(pid):
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def zombie():
    """The pid of a child that has exited and is not reaped (yet): a zombie, until the fixture reaps it."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while _state(child.pid) != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.02)
    yield child.pid
    child.wait()


def test_a_zombie_is_gone(zombie):
    assert Path(f"/proc/{zombie}").exists()
    assert process_gone(zombie)


def test_a_running_process_and_this_one_are_not_gone():
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as sleeper:
        try:
            assert not process_gone(sleeper.pid)
            assert not process_gone(os.getpid())
        finally:
            sleeper.kill()


def test_the_spool_files_of_a_zombie_are_removed_and_those_of_live_processes_kept(tmp_path, zombie):
    of_zombie = tmp_path / f"tus-{zombie}-abc"
    of_this_process = tmp_path / f"chunk-{os.getpid()}-def"
    not_a_spool_file = tmp_path / "notes.txt"
    for path in (of_zombie, of_this_process, not_a_spool_file):
        path.write_bytes(b"x")
    remove_orphans(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([of_this_process.name, not_a_spool_file.name])
