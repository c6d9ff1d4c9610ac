"""The tus record and appends on disk: crash leftovers are cut off, a torn slot falls back to the previous offset,
tus uploads expire and are swept like chunked streams."""
import base64
import ctypes
import errno
import hashlib
import os
import time
from pathlib import Path

import pytest

from service.errors import UploadLocked
from service.storage import get_repository
from service.storage.common import disk as storage_disk
from service.storage.files.streams.tus_append import SLOT_SIZE, TusAppend, TusRecord

pytestmark = pytest.mark.file_backend_only("they check the file backend's tus record and prefix on disk")


OCTETS = "application/offset+octet-stream"
PNG = b"\x89PNG\r\n\x1a\n"


def create(client, auth, data):
    metadata = "destinationId " + base64.b64encode(b"stepImage").decode()
    response = client.post("/uploads", headers=dict(auth, **{"Tus-Resumable": "1.0.0", "Upload-Length": str(len(data)),
                                                             "Upload-Metadata": metadata}))
    assert response.status_code == 201
    return response.headers["Location"]


def patch(client, auth, location, offset, body):
    return client.patch(location, data=body, headers=dict(auth, **{
        "Tus-Resumable": "1.0.0", "Upload-Offset": str(offset), "Content-Type": OCTETS}))


def stream_dir(app, location):
    return next(Path(app.config["DATA_DIR"]).rglob(location.rsplit("/", 1)[1]))


def test_bytes_past_the_committed_offset_are_cut_off_by_the_next_patch(app, client, auth):
    data = PNG + b"a" * 992
    location = create(client, auth, data)
    assert patch(client, auth, location, 0, data[:500]).status_code == 204
    # A worker killed mid-write leaves bytes past the offset it never committed.
    with open(stream_dir(app, location) / "prefix", "ab") as prefix:
        prefix.write(b"garbage" * 100)
    assert client.head(location, headers=dict(auth, **{"Tus-Resumable": "1.0.0"})).headers["Upload-Offset"] == "500"
    response = patch(client, auth, location, 500, data[500:])
    assert response.status_code == 204
    assert client.get(response.headers["Media-Path"], headers=auth).data == data


def test_a_torn_slot_falls_back_to_the_previous_offset(tmp_path):
    record = TusRecord(tmp_path)
    record.create()
    record.commit(2, 100, b"s" * 104)
    record.commit(3, 250, b"t" * 104)
    assert record.read() == (3, 250, b"t" * 104)
    # Tear the latest slot (sequence 3 lives in the second one).
    with open(tmp_path / "tus", "r+b") as handle:
        handle.seek(SLOT_SIZE + 20)
        handle.write(b"\xff\xff")
    assert record.read() == (2, 100, b"s" * 104)


def test_a_second_patch_waits_for_the_append_lock_then_gives_up(tmp_path):
    (tmp_path / "meta.json").write_text("{}")
    (tmp_path / "prefix").write_bytes(b"")
    TusRecord(tmp_path).create()
    first = TusAppend.start(tmp_path, timeout=1)
    try:
        with pytest.raises(UploadLocked):
            TusAppend.start(tmp_path, timeout=0.2)
    finally:
        first.close()
    TusAppend.start(tmp_path, timeout=0.2).close()


def test_running_sha256_matches_and_survives_reopening(tmp_path):
    (tmp_path / "meta.json").write_text("{}")
    (tmp_path / "prefix").write_bytes(b"")
    TusRecord(tmp_path).create()
    for piece in (b"abc" * 1000, b"", b"xyz" * 7):
        appending = TusAppend.start(tmp_path, timeout=1)
        appending.write(piece)
        appending.commit()
        appending.close()
    appending = TusAppend.start(tmp_path, timeout=1)
    assert appending.offset == 3021
    assert appending.sha256() == hashlib.sha256(b"abc" * 1000 + b"xyz" * 7).hexdigest()
    appending.close()


def test_tus_uploads_expire_and_are_swept(app, client, auth):
    location = create(client, auth, PNG + b"a" * 100)
    directory = stream_dir(app, location)
    repo = get_repository(app)
    assert repo.sweep() == 0
    idle = time.time() - repo.streams.ttl_seconds - 1
    os.utime(directory, (idle, idle))
    assert repo.sweep() == 1
    assert not directory.exists()
    assert client.head(location, headers=dict(auth, **{"Tus-Resumable": "1.0.0"})).status_code == 404


@pytest.mark.parametrize("writeback", ["refused", "absent"])
def test_an_append_without_early_writeback_is_stored_as_before(app, client, auth, monkeypatch, writeback):
    """Where sync_file_range is missing (not Linux) or the kernel refuses it, the fdatasync alone makes the body
    durable: the upload completes unchanged, and a refusal turns the call off."""
    calls = []

    def refused(fd, offset, nbytes, flags):
        calls.append((offset, nbytes))
        ctypes.set_errno(errno.ENOSYS)
        return -1
    monkeypatch.setattr(storage_disk, "_start_writeback", refused if writeback == "refused" else None)
    data = PNG + b"b" * 2000
    location = create(client, auth, data)
    assert patch(client, auth, location, 0, data[:1000]).status_code == 204
    response = patch(client, auth, location, 1000, data[1000:])
    assert response.status_code == 204
    assert client.get(response.headers["Media-Path"], headers=auth).data == data
    assert storage_disk._start_writeback is None
    assert len(calls) == (1 if writeback == "refused" else 0)


def test_early_writeback_is_asked_for_each_written_block(app, client, auth, monkeypatch):
    if storage_disk._start_writeback is None:
        pytest.skip("no sync_file_range here")
    real, calls = storage_disk._start_writeback, []

    def recording(fd, offset, nbytes, flags):
        # The upload's bytes (the completing PATCH also hands the stream's new record to the disk early).
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/prefix"):
            calls.append((offset, nbytes, flags))
        return real(fd, offset, nbytes, flags)
    monkeypatch.setattr(storage_disk, "_start_writeback", recording)
    data = PNG + b"c" * 3000
    location = create(client, auth, data)
    assert patch(client, auth, location, 0, data[:1000]).status_code == 204
    assert patch(client, auth, location, 1000, data[1000:]).status_code == 204
    assert [(offset, nbytes) for offset, nbytes, _ in calls] == [(0, 1000), (1000, len(data) - 1000)]
    assert {flags for _, _, flags in calls} == {storage_disk.SYNC_FILE_RANGE_WRITE}
