"""Disk full and I/O errors: a test double of the filesystem layer fails chosen writes, fsyncs, renames and links.

Every request that meets a fault gets a clear JSON error (507 when the disk is full, 503 on an I/O error), leaves
nothing torn or half-visible and no temporary file behind, and the service keeps serving reads during and after
the fault; once the disk is back, the same requests succeed and an interrupted stream resumes.
"""
import errno
import hashlib

import pytest

from service.storage import get_repository
from service.interface import MB
from support.disk import FaultyDisk
from support.documents import line_process, read_process, upsert_process
from support.media import mp4, png
from support.uploads import create_stream, send_chunk, send_file_first, stream_status, upload

pytestmark = pytest.mark.file_backend_only("they inject failures into the file backend's own disk writes (the shared backend's engine faults are in test_shared_faults.py)")


NO_SPACE_MESSAGE = "the server has no space left to store this request; nothing was stored"


@pytest.fixture
def disk(monkeypatch):
    return FaultyDisk(monkeypatch)


# The faults tried on every write path: the first failing call of each operation, ENOSPC and EIO.
FAULTS = [
    ("create", errno.ENOSPC), ("write", errno.ENOSPC), ("write", errno.EIO), ("fsync", errno.EIO),
    ("fsync", errno.ENOSPC), ("rename", errno.EIO), ("rename", errno.ENOSPC),
]
FAULT_IDS = [f"{operation}-{errno.errorcode[code]}" for operation, code in FAULTS]


def expected_status(code):
    return 507 if code == errno.ENOSPC else 503


def assert_clear_error(response, code):
    assert response.status_code == expected_status(code), response.get_data(as_text=True)
    message = response.get_json()["error"]
    assert_clear_message(message, code)


def assert_clear_message(message, code):
    if code == errno.ENOSPC:
        assert message == NO_SPACE_MESSAGE
    else:
        assert "I/O error" in message
    assert "Traceback" not in message and "Errno" not in message


def stray_files(root):
    """Temporary files anywhere under `root` (a failed request must not leave any behind)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and (p.name.startswith((".tmp-", ".incoming-")) or ".incoming" in p.parts))


def org_root(app):
    return get_repository(app).orgs_root / "default"


# -- documents (processCreate) ---------------------------------------------------------------------

@pytest.mark.parametrize("operation, code", FAULTS, ids=FAULT_IDS)
def test_failed_process_upsert_keeps_the_previous_document_and_reads_go_on(app, client, auth, disk, operation, code):
    assert upsert_process(client, auth, line_process("first")) == {"data": {"processCreate": "CREATED"}}
    before = read_process(client, auth)

    disk.fail(operation, code)
    body = upsert_process(client, auth, line_process("second", steps=5))
    assert body["data"] == {"processCreate": None}
    [error] = body["errors"]
    assert error["extensions"]["code"] == ("INSUFFICIENT_STORAGE" if code == errno.ENOSPC else "SERVICE_UNAVAILABLE")
    assert_clear_message(error["message"], code)
    assert read_process(client, auth) == before  # reads are served while the disk is failing
    assert stray_files(org_root(app)) == []

    disk.heal()
    assert upsert_process(client, auth, line_process("second", steps=5)) == {"data": {"processCreate": "UPDATED"}}
    after = read_process(client, auth)
    assert (after["name"], after["revision"], len(after["steps"])) == ("second", 2, 5)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO], ids=errno.errorcode.get)
def test_a_new_process_whose_lock_file_cannot_be_created_gets_a_clear_error(client, auth, disk, code):
    upsert_process(client, auth, line_process("first"))
    disk.fail("lock", code)
    body = upsert_process(client, auth, dict(line_process("other"), id="line_2"))
    assert body["data"] == {"processCreate": None}
    assert_clear_message(body["errors"][0]["message"], code)
    assert read_process(client, auth)["name"] == "first"
    disk.heal()
    body = upsert_process(client, auth, dict(line_process("other"), id="line_2"))
    assert body["data"] == {"processCreate": "CREATED"}


# -- single-request uploads ------------------------------------------------------------------------

def media_names(app, segment="images"):
    directory = org_root(app) / "media" / segment
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


SINGLE_FAULTS = FAULTS[:4] + [("link", errno.ENOSPC), ("link", errno.EIO)]


@pytest.mark.parametrize("operation, code", SINGLE_FAULTS, ids=[f"{o}-{errno.errorcode[c]}" for o, c in SINGLE_FAULTS])
def test_failed_single_upload_publishes_nothing_and_media_stays_readable(app, client, auth, disk, operation, code):
    existing = png(3000, "existing")
    path = upload(client, auth, existing).get_json()["path"]
    # Big enough that the parser writes it in several pieces: a failure strikes in the middle of the file.
    data = png(2 * MB, "new")

    disk.fail(operation, code)
    assert_clear_error(upload(client, auth, data), code)
    assert media_names(app) == [path.rsplit("/", 1)[1]]
    assert client.get(path, headers=auth).data == existing
    assert stray_files(org_root(app)) == []

    disk.heal()
    response = upload(client, auth, data)
    assert response.status_code == 201
    assert client.get(response.get_json()["path"], headers=auth).data == data


def test_a_failing_directory_fsync_after_the_link_takes_the_new_media_back(app, client, auth, disk):
    disk.fail("fsync", errno.EIO, nth=2)  # the staged file's fsync passes; the media directory's fails
    assert_clear_error(upload(client, auth, png(5000, "x")), errno.EIO)
    assert media_names(app) == []
    assert stray_files(org_root(app)) == []


# -- chunked streams -------------------------------------------------------------------------------

def resume(client, auth, stream_id, chunks):
    """What a client does after an error: ask what the server holds, resend the rest; return the media path."""
    received = set(stream_status(client, auth, stream_id)["receivedChunks"])
    answers = [send_chunk(client, auth, stream_id, i, len(chunks), chunk)
               for i, chunk in enumerate(chunks) if i not in received]
    assert [r.status_code for r in answers][-1] == 201, answers[-1].get_json()
    assert {r.status_code for r in answers[:-1]} <= {200}
    return answers[-1].get_json()["path"]


# The ways a chunk is stored: (chunks sent before, the chunk that meets the fault, how it is sent). Of 4 chunks.
CHUNK_CASES = {
    # The next chunk in order is received onto the prefix; this one completes the stream.
    "in-order": ([0, 1, 2], 3, send_chunk),
    # Onto the prefix too, then the parts after it are merged and the stream completes.
    "fills-gap": ([0, 2, 3], 1, send_chunk),
    # Ahead of a gap: into a part of its own.
    "ahead": ([0, 3], 2, send_chunk),
    # Index unknown while it arrives: into a part, then merged with the parts after it, completing the stream.
    "file-first": ([0, 2, 3], 1, send_file_first),
}
# What a failed request leaves: NOTHING changed (the server reports the chunks sent before); the chunk STORED (the
# fault came once the ledger had committed it, during completion or in the ledger's own fdatasync, whose slot readers
# then see: every chunk is held, and the last one is reported missing so that resending it completes the stream); or
# the stream COMPLETE (only the fsync after the record was replaced failed).
NOTHING, STORED, COMPLETE = "nothing", "stored", "complete"
# The file operations of each case, in the order the request makes them (a chunk onto the prefix, or a part; then the
# prefix's fdatasync, the ledger's records, its slot and its fdatasync; then completion: the link to the media path,
# the media directory's fsync, the deduplication index's `.built` mark and entry, each written aside and renamed
# without fsync, then the record written aside, fsynced, renamed, its directory fsynced). Each fault: (case,
# operation, code, nth call, only calls on paths containing, outcome).
RECEIVED_ONTO_PREFIX = [("write", errno.ENOSPC, 1, "", NOTHING), ("write", errno.EIO, 1, "", NOTHING)]
COMMITTED = [
    ("fsync", errno.EIO, 1, "", NOTHING), ("fsync", errno.ENOSPC, 1, "", NOTHING),
    ("write", errno.ENOSPC, 1, "ledger", NOTHING), ("write", errno.EIO, 2, "ledger", NOTHING),
    ("fsync", errno.EIO, 2, "", STORED),
]
COMPLETED = [
    ("link", errno.ENOSPC, 1, "", STORED), ("link", errno.EIO, 1, "", STORED), ("fsync", errno.EIO, 3, "", STORED),
    ("create", errno.ENOSPC, 1, "", STORED), ("fsync", errno.EIO, 4, "", STORED),
    ("rename", errno.ENOSPC, 1, "", STORED), ("rename", errno.EIO, 1, "", STORED), ("fsync", errno.EIO, 5, "", COMPLETE),
    # the deduplication index's `.built` mark and entry are renamed into place first: the record's is the third rename
    ("rename", errno.ENOSPC, 3, "", STORED),
]
INTO_A_PART = [
    ("create", errno.ENOSPC, 1, "", NOTHING), ("write", errno.ENOSPC, 1, "", NOTHING), ("write", errno.EIO, 1, "", NOTHING),
    ("fsync", errno.EIO, 1, "", NOTHING), ("fsync", errno.ENOSPC, 1, "", NOTHING), ("rename", errno.EIO, 1, "", NOTHING),
    ("rename", errno.ENOSPC, 1, "", NOTHING), ("fsync", errno.EIO, 2, "", NOTHING),  # the directory, after the rename
]
# After a part: its 2 fsyncs, its create and rename come first.
AFTER_A_PART = [
    ("write", errno.ENOSPC, 1, "prefix", NOTHING), ("fsync", errno.EIO, 3, "", NOTHING),
    ("write", errno.ENOSPC, 1, "ledger", NOTHING), ("write", errno.EIO, 2, "ledger", NOTHING),
    ("fsync", errno.EIO, 4, "", STORED), ("link", errno.EIO, 1, "", STORED), ("create", errno.ENOSPC, 2, "", STORED),
    ("rename", errno.ENOSPC, 2, "", STORED), ("fsync", errno.EIO, 7, "", COMPLETE),
]
CHUNK_FAULTS = [("in-order", *fault) for fault in RECEIVED_ONTO_PREFIX + COMMITTED + COMPLETED] + \
    [("fills-gap", *fault) for fault in RECEIVED_ONTO_PREFIX + COMMITTED + COMPLETED] + [
        # the merge of the parts after it onto the prefix
        ("fills-gap", "write", errno.ENOSPC, 3, "prefix", NOTHING)] + \
    [("ahead", *fault) for fault in INTO_A_PART] + \
    [("file-first", *fault) for fault in INTO_A_PART[:-1] + AFTER_A_PART]


def fault_id(fault):
    case, operation, code, nth, where, _ = fault
    suffix = (f"-{nth}" if nth > 1 else "") + (f"-{where}" if where else "")
    return f"{case}-{operation}-{errno.errorcode[code]}{suffix}"


@pytest.mark.parametrize("case, operation, code, nth, where, outcome", CHUNK_FAULTS,
                         ids=[fault_id(f) for f in CHUNK_FAULTS])
def test_failed_chunk_leaves_the_stream_resumable(app, client, auth, disk, case, operation, code, nth, where, outcome):
    """A fault while a chunk is received, stored, merged or (when it completes the stream) published: a clear error,
    nothing half-visible, and the stream resumes."""
    sent_before, failing, sender = CHUNK_CASES[case]
    data = mp4(3 * MB + 1000, "stream")
    chunks = [data[i:i + MB] for i in range(0, len(data), MB)]
    stream_id = create_stream(client, auth, data)
    for index in sent_before:
        assert send_chunk(client, auth, stream_id, index, len(chunks), chunks[index]).status_code == 200

    disk.fail(operation, code, nth, where)
    assert_clear_error(sender(client, auth, stream_id, failing, len(chunks), chunks[failing]), code)
    held = stream_status(client, auth, stream_id)  # the stream is readable while the disk is failing
    assert held["state"] == ("complete" if outcome == COMPLETE else "open")
    if outcome == NOTHING:
        assert held["receivedChunks"] == sent_before
    elif outcome == STORED:
        assert held["receivedChunks"] == list(range(len(chunks) - 1))
    assert media_names(app, "videos") == ([held["path"].rsplit("/", 1)[1]] if outcome == COMPLETE else [])

    disk.heal()
    path = held["path"] if outcome == COMPLETE else resume(client, auth, stream_id, chunks)
    assert hashlib.sha256(client.get(path, headers=auth).data).hexdigest() == hashlib.sha256(data).hexdigest()
    assert media_names(app, "videos") == [path.rsplit("/", 1)[1]]
    assert send_chunk(client, auth, stream_id, failing, len(chunks), chunks[failing]).get_json() == {"path": path}
    assert stray_files(org_root(app)) == []
    assert sorted(p.name for p in (org_root(app) / "streams" / stream_id).iterdir()) == ["meta.json"]


@pytest.mark.parametrize("operation, code", [("create", errno.ENOSPC), ("fsync", errno.EIO), ("rename", errno.EIO)])
def test_failed_stream_creation_leaves_no_stream(app, client, auth, disk, operation, code):
    disk.fail(operation, code)
    response = client.post("/uploads", headers=auth, json={
        "destinationId": "stepVideo", "fileName": "clip.mp4", "fileSize": 100, "sha": "0" * 64})
    assert_clear_error(response, code)
    streams_dir = org_root(app) / "streams"
    assert not streams_dir.exists() or [p.name for p in streams_dir.iterdir() if not p.name.endswith(".lock")] == []
