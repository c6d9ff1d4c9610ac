"""The file backend's locks (service/storage/common/disk.py DiskLock): exclusive between threads of one worker and between
worker processes, released by the kernel when a holder dies, bounded waits that end in a clear 503, and a lock file
removed under a waiter (a stream deleted) never leaves two holders."""
import fcntl
import os
import subprocess
import sys
import threading
import time

import pytest

from service.errors import http_status
from service.storage.common.disk import LockTimeout, lock
from support.disk import on_flock

HOLD_IN_CHILD = """
import sys, time
from service.storage.common.disk import lock
held = lock(sys.argv[1], timeout=5).acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_a_lock_excludes_another_thread_until_released(tmp_path):
    first = lock(tmp_path / "doc").acquire()
    with pytest.raises(LockTimeout):
        lock(tmp_path / "doc").acquire(timeout=0)
    first.release()
    with lock(tmp_path / "doc", timeout=0):
        pass


def test_a_waiter_gets_the_lock_as_soon_as_it_is_released(tmp_path):
    holder = lock(tmp_path / "doc").acquire()
    order = []

    def wait_for_it():
        with lock(tmp_path / "doc", timeout=10):
            order.append("waiter")

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    time.sleep(0.05)
    order.append("holder")
    holder.release()
    waiter.join(10)
    assert order == ["holder", "waiter"]


def test_an_unbounded_wait_sleeps_in_the_kernel_until_the_lock_is_released(tmp_path, monkeypatch):
    """acquire(timeout=-1) (a writer waiting for the group commit's lock) does not poll: it makes one blocking flock,
    woken when the holder releases (the bounded waits try again and again)."""
    holder = lock(tmp_path / "doc").acquire()
    tries = []
    on_flock(monkeypatch, lambda path, operation: tries.append((threading.get_ident(), operation)))
    waiter = threading.Thread(target=lambda: lock(tmp_path / "doc").acquire(timeout=-1).release())
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive()
    holder.release()
    waiter.join(10)
    assert not waiter.is_alive()
    assert [operation for thread, operation in tries if thread == waiter.ident] == [fcntl.LOCK_EX]


def test_a_bounded_wait_ends_in_a_503_that_says_nothing_was_changed(tmp_path):
    holder = lock(tmp_path / "doc").acquire()
    started = time.monotonic()
    with pytest.raises(LockTimeout) as raised:
        lock(tmp_path / "doc", timeout=0.2).acquire()
    assert 0.2 <= time.monotonic() - started < 5
    assert http_status(raised.value) == 503
    assert "did not take effect" in raised.value.message
    holder.release()


def test_another_process_is_excluded_and_its_death_releases_the_lock(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", HOLD_IN_CHILD, str(tmp_path / "doc")], stdout=subprocess.PIPE,
                             text=True, cwd=os.getcwd())
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeout):
            lock(tmp_path / "doc").acquire(timeout=0.1)
        child.kill()
        child.wait(10)
        with lock(tmp_path / "doc", timeout=5):
            pass
    finally:
        child.kill()
        child.wait(10)
        child.stdout.close()


def test_a_lock_file_removed_under_a_waiter_gives_one_holder_of_the_new_file(tmp_path):
    """remove_stream unlinks a stream's lock files while it holds the lock: a request waiting on the old file must not
    then hold a lock that excludes nobody opening the path afresh."""
    holder = lock(tmp_path / "stream").acquire()
    acquired = []
    waiter = threading.Thread(target=lambda: acquired.append(lock(tmp_path / "stream", timeout=10).acquire()))
    waiter.start()
    time.sleep(0.05)
    os.unlink(tmp_path / "stream.lock")
    holder.release()
    waiter.join(10)
    assert len(acquired) == 1
    assert os.path.exists(tmp_path / "stream.lock")
    with pytest.raises(LockTimeout):
        lock(tmp_path / "stream").acquire(timeout=0)
    acquired[0].release()


def test_the_directory_of_a_lock_is_created_when_missing(tmp_path):
    with lock(tmp_path / "orgs" / "a" / "doc", timeout=0):
        assert (tmp_path / "orgs" / "a" / "doc.lock").exists()


def test_release_is_idempotent(tmp_path):
    held = lock(tmp_path / "doc").acquire()
    held.release()
    held.release()
    with lock(tmp_path / "doc", timeout=0):
        pass
