"""StreamStore without HTTP: chunk bookkeeping, in-order merge with persisted SHA-256 state, rewind, crashes."""
import ctypes
import errno
import hashlib
import os
import time

import pytest

from service.interface.checksums import file_sha256
from service.errors import StreamNotFound
from service.storage.common import disk as storage_disk
from service.storage.common import incoming as storage_incoming
from service.domain.uploads import CHUNK_RULES
from service.storage.contract import Chunk, Outcome, StreamRecord, StreamState
from service.storage.files import FileRepository
from service.storage.files.streams.append import PrefixAppend
from service.storage.files.streams.ledger import BOUNDARY, RECORDS_AT, SLOT_SIZE, Ledger
from service.storage.common.incoming import IncomingFile
from support.disk import lock_held_at_fsync

TTL = 3600
ORG = "default"


class Clock:
    """The store's clock, set by the test."""

    def __init__(self):
        self.now = time.time()

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def repo(tmp_path, clock):
    return FileRepository(tmp_path / "data", TTL, clock)


def new_stream(repo, chunks):
    data = b"".join(chunks)
    record = StreamRecord(destination_id="stepVideo", file_name="f.mp4", file_size=len(data),
                          sha=hashlib.sha256(data).hexdigest(), total_chunks=len(chunks), format="mp4",
                          media_prefix="0123456789abcdef")
    return repo.streams.create(ORG, record)


def put(repo, stream_id, index, data):
    """Receive chunk `index` into a part (its index not known while it arrives), store it and merge."""
    incoming = repo.streams.new_incoming(ORG, stream_id, 12)
    incoming.write(data)
    return commit(repo, stream_id, index, incoming)


def commit(repo, stream_id, index, incoming):
    """End a request: store what was received, merge, then tidy up as the view does."""
    try:
        with repo.streams.open(ORG, stream_id) as stream:
            stream.put_part(index, incoming)
            return stream.merge_available()
    finally:
        incoming.discard()


def digest(repo, stream_id):
    with repo.streams.open(ORG, stream_id) as stream:
        return stream.merged_sha256()


def prefix_bytes(repo, stream_id):
    with repo.streams.open(ORG, stream_id) as stream:
        return (stream.directory / "prefix").read_bytes()


CHUNKS = [b"a" * 1000, b"b" * 1000, b"c" * 1000, b"d" * 10]


def test_in_order_chunks_are_merged_as_they_arrive(repo):
    stream_id = new_stream(repo, CHUNKS)
    assert put(repo, stream_id, 0, CHUNKS[0]) == (1, 1000)
    assert put(repo, stream_id, 1, CHUNKS[1]) == (2, 2000)
    assert prefix_bytes(repo, stream_id) == CHUNKS[0] + CHUNKS[1]
    assert digest(repo, stream_id) == hashlib.sha256(CHUNKS[0] + CHUNKS[1]).hexdigest()


def test_out_of_order_chunks_wait_until_the_gap_is_filled(repo):
    stream_id = new_stream(repo, CHUNKS)
    assert put(repo, stream_id, 2, CHUNKS[2]) == (0, 0)
    assert put(repo, stream_id, 3, CHUNKS[3]) == (0, 0)
    assert put(repo, stream_id, 1, CHUNKS[1]) == (0, 0)
    assert put(repo, stream_id, 0, CHUNKS[0]) == (4, 3010)
    assert digest(repo, stream_id) == hashlib.sha256(b"".join(CHUNKS)).hexdigest()


def test_part_sizes_report_every_acknowledged_chunk(repo):
    stream_id = new_stream(repo, CHUNKS)
    put(repo, stream_id, 3, CHUNKS[3])
    put(repo, stream_id, 0, CHUNKS[0])
    with repo.streams.open(ORG, stream_id) as stream:
        assert stream.part_sizes() == {0: 1000, 3: 10}


def test_replacing_a_merged_chunk_rewinds_without_losing_later_chunks(repo):
    stream_id = new_stream(repo, CHUNKS)
    for index in range(3):
        put(repo, stream_id, index, CHUNKS[index])
    replaced = b"B" * 1000
    assert put(repo, stream_id, 1, replaced) == (3, 3000)
    assert put(repo, stream_id, 3, CHUNKS[3]) == (4, 3010)
    expected = CHUNKS[0] + replaced + CHUNKS[2] + CHUNKS[3]
    assert prefix_bytes(repo, stream_id) == expected
    assert digest(repo, stream_id) == hashlib.sha256(expected).hexdigest()


def test_replacing_with_a_shorter_chunk_truncates_the_prefix(repo):
    stream_id = new_stream(repo, CHUNKS)
    for index in range(3):
        put(repo, stream_id, index, CHUNKS[index])
    assert put(repo, stream_id, 0, b"x") == (3, 2001)
    assert prefix_bytes(repo, stream_id) == b"x" + CHUNKS[1] + CHUNKS[2]


def test_identical_retry_of_a_merged_chunk_changes_nothing(repo, monkeypatch):
    stream_id = new_stream(repo, CHUNKS)
    put(repo, stream_id, 0, CHUNKS[0])
    put(repo, stream_id, 1, CHUNKS[1])
    commits = []
    monkeypatch.setattr(Ledger, "commit", lambda self, merged, boundaries=(): commits.append(merged))
    assert put(repo, stream_id, 0, CHUNKS[0]) == (2, 2000)
    assert commits == []
    assert prefix_bytes(repo, stream_id) == CHUNKS[0] + CHUNKS[1]


def test_crash_between_append_and_state_save_is_repaired_by_the_next_merge(repo, monkeypatch):
    stream_id = new_stream(repo, CHUNKS)
    put(repo, stream_id, 0, CHUNKS[0])
    real_commit = Ledger.commit

    def crash(self, merged, boundaries=()):
        raise OSError("worker killed")

    monkeypatch.setattr(Ledger, "commit", crash)
    with pytest.raises(OSError):
        put(repo, stream_id, 1, CHUNKS[1])
    # The bytes of chunk 1 are in the prefix, but its bookkeeping was never saved.
    assert prefix_bytes(repo, stream_id) == CHUNKS[0] + CHUNKS[1]
    monkeypatch.setattr(Ledger, "commit", real_commit)
    assert put(repo, stream_id, 2, CHUNKS[2]) == (3, 3000)
    assert prefix_bytes(repo, stream_id) == CHUNKS[0] + CHUNKS[1] + CHUNKS[2]
    assert digest(repo, stream_id) == hashlib.sha256(CHUNKS[0] + CHUNKS[1] + CHUNKS[2]).hexdigest()


def test_garbage_after_the_recorded_prefix_is_truncated(repo):
    stream_id = new_stream(repo, CHUNKS)
    put(repo, stream_id, 0, CHUNKS[0])
    with repo.streams.open(ORG, stream_id) as stream:
        with open(stream.directory / "prefix", "ab") as prefix:
            prefix.write(b"half-appended chunk")
    assert put(repo, stream_id, 1, CHUNKS[1]) == (2, 2000)
    assert prefix_bytes(repo, stream_id) == CHUNKS[0] + CHUNKS[1]


def test_publish_links_the_prefix_and_keeps_only_the_meta(repo):
    stream_id = new_stream(repo, CHUNKS[:1])
    put(repo, stream_id, 0, CHUNKS[0])
    path = "/api/v1/videos/0123456789abcdef-f.mp4"
    with repo.streams.open(ORG, stream_id) as stream:
        assert stream.publish(path, hashlib.sha256(CHUNKS[0]).hexdigest()) == path
        assert sorted(os.listdir(stream.directory)) == ["meta.json"]
    assert repo.media.file_for(ORG, path).read_bytes() == CHUNKS[0]
    assert repo.streams.read(ORG, stream_id).state is StreamState.COMPLETE


def test_publish_never_replaces_an_existing_media_file(repo, tmp_path):
    path = "/api/v1/images/0123456789abcdef-f.png"
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(b"first")
    second.write_bytes(b"second")
    assert repo.media.publish(ORG, path, first, file_sha256(first)) == path
    assert repo.media.publish(ORG, path, second, file_sha256(second)) is None
    assert repo.media.file_for(ORG, path).read_bytes() == b"first"


def test_stream_of_another_org_is_not_found(repo):
    stream_id = new_stream(repo, CHUNKS)
    assert repo.streams.read("other", stream_id) is None
    with pytest.raises(StreamNotFound):
        with repo.streams.open("other", stream_id):
            pass


@pytest.mark.parametrize("stream_id", ["../x", "..", "", "0" * 31, "A" * 32, "0" * 32 + "/..", "0" * 33,
                                       "0" * 32 + "\n"])
def test_malformed_stream_ids_are_not_found(repo, stream_id):
    with pytest.raises(StreamNotFound):
        repo.streams.new_incoming(ORG, stream_id, 12)
    with pytest.raises(StreamNotFound):
        repo.streams.delete(ORG, stream_id)
    assert not (repo.orgs_root / ORG / "streams").exists()


def test_sweep_removes_idle_streams_and_their_lock_files(repo, clock):
    idle = new_stream(repo, CHUNKS)
    busy = new_stream(repo, CHUNKS)
    put(repo, idle, 0, CHUNKS[0])
    directory = repo.orgs_root / ORG / "streams" / idle
    os.utime(directory, (clock.now - 2 * TTL, clock.now - 2 * TTL))
    assert repo.streams.sweep() == 1
    assert not directory.exists()
    assert not (repo.orgs_root / ORG / "streams" / f"{idle}.lock").exists()
    assert repo.streams.read(ORG, busy) is not None


def test_open_streams_are_counted_and_listed_by_the_store(repo):
    first, second, done = new_stream(repo, CHUNKS), new_stream(repo, CHUNKS), new_stream(repo, [b"x" * 10])
    put(repo, done, 0, b"x" * 10)
    with repo.streams.open(ORG, done) as stream:
        stream.publish("/api/v1/videos/0123456789abcdef-f.mp4", hashlib.sha256(b"x" * 10).hexdigest())
    assert sorted(repo.streams.open_ids(ORG)) == sorted([first, second])
    assert repo.streams.open_ids("other") == []
    repo.streams.sweep()
    assert repo.streams.open_count() == 2


def test_an_expired_stream_is_gone_even_before_the_sweep(repo, clock):
    stream_id = new_stream(repo, CHUNKS)
    clock.now += TTL + 1
    assert repo.streams.read(ORG, stream_id) is None
    with pytest.raises(StreamNotFound):
        with repo.streams.open(ORG, stream_id):
            pass
    assert not (repo.orgs_root / ORG / "streams" / stream_id).exists()


def test_sweep_removes_stale_single_upload_staging_files(repo, clock):
    incoming = repo.media.new_incoming(ORG, 12)
    incoming.write(b"abandoned by a killed worker")
    incoming.finish()
    fresh = repo.media.new_incoming(ORG, 12)
    os.utime(incoming.path, (clock.now - 2 * TTL, clock.now - 2 * TTL))
    repo.streams.sweep()
    assert not incoming.path.exists()
    assert fresh.path.exists()
    fresh.discard()


def stream_directory(repo, stream_id):
    return repo.orgs_root / ORG / "streams" / stream_id


def part_files(repo, stream_id):
    return sorted(p.name for p in stream_directory(repo, stream_id).glob("part-*"))


def test_merged_parts_are_removed_so_each_byte_is_stored_once(repo):
    stream_id = new_stream(repo, CHUNKS)
    put(repo, stream_id, 0, CHUNKS[0])
    put(repo, stream_id, 2, CHUNKS[2])
    assert part_files(repo, stream_id) == ["part-2"]
    with repo.streams.open(ORG, stream_id) as stream:
        assert stream.part_sizes() == {0: 1000, 2: 1000}


def test_crash_after_replacing_a_merged_chunk_loses_no_acknowledged_chunk(repo, monkeypatch):
    stream_id = new_stream(repo, CHUNKS)
    for index in range(3):
        put(repo, stream_id, index, CHUNKS[index])
    incoming = repo.streams.new_incoming(ORG, stream_id, 12)
    incoming.write(b"B" * 1000)

    def killed():
        raise OSError("worker killed before the new part was renamed into place")

    monkeypatch.setattr(incoming, "finish", killed)
    with repo.streams.open(ORG, stream_id) as stream:
        with pytest.raises(OSError):
            stream.put_part(1, incoming)
    incoming.discard()  # what the killed worker's file would be: swept, its handle gone
    # The rewind put the merged chunks from 1 on back into parts; the old chunk 1 stands.
    assert part_files(repo, stream_id) == ["part-1", "part-2"]
    assert put(repo, stream_id, 3, CHUNKS[3]) == (4, 3010)
    assert digest(repo, stream_id) == hashlib.sha256(b"".join(CHUNKS)).hexdigest()


# -- chunks received straight onto the prefix --------------------------------------------------------

def start(repo, stream_id, index, data=b""):
    """Begin receiving chunk `index` as the chunk route does when its index came before the file."""
    incoming = repo.streams.new_incoming(ORG, stream_id, 12, index)
    incoming.write(data)
    return incoming


def test_the_next_chunk_in_order_is_received_onto_the_prefix_without_a_part(repo):
    stream_id = new_stream(repo, CHUNKS)
    for index in range(3):
        incoming = start(repo, stream_id, index, CHUNKS[index])
        assert isinstance(incoming, PrefixAppend)
        assert part_files(repo, stream_id) == [] and not list(stream_directory(repo, stream_id).glob(".incoming-*"))
        assert commit(repo, stream_id, index, incoming) == (index + 1, 1000 * (index + 1))
    assert prefix_bytes(repo, stream_id) == b"".join(CHUNKS[:3])
    assert digest(repo, stream_id) == hashlib.sha256(b"".join(CHUNKS[:3])).hexdigest()


def test_a_chunk_that_is_not_next_or_out_of_range_goes_to_a_part(repo):
    stream_id = new_stream(repo, CHUNKS)
    for index in (1, 4, 99):
        incoming = start(repo, stream_id, index)
        assert isinstance(incoming, IncomingFile)
        incoming.discard()


def test_while_one_request_appends_the_others_go_to_parts_and_it_merges_them(repo):
    stream_id = new_stream(repo, CHUNKS)
    appending = start(repo, stream_id, 0, CHUNKS[0][:500])
    # The same index resent meanwhile (a retry) and a later chunk: both parts, and their merge waits for the appender.
    retry = start(repo, stream_id, 0, b"x" * 1000)
    assert isinstance(retry, IncomingFile)
    assert commit(repo, stream_id, 0, retry) == (0, 0)
    assert commit(repo, stream_id, 1, start(repo, stream_id, 1, CHUNKS[1])) == (0, 0)
    assert part_files(repo, stream_id) == ["part-0", "part-1"]
    appending.write(CHUNKS[0][500:])
    # The appender's chunk is the later copy of chunk 0, so it supersedes the retry; chunk 1 is merged with it.
    assert commit(repo, stream_id, 0, appending) == (2, 2000)
    assert part_files(repo, stream_id) == []
    assert prefix_bytes(repo, stream_id) == CHUNKS[0] + CHUNKS[1]
    assert digest(repo, stream_id) == hashlib.sha256(CHUNKS[0] + CHUNKS[1]).hexdigest()


def test_a_chunk_whose_prefix_was_rewound_meanwhile_becomes_a_part(repo):
    stream_id = new_stream(repo, CHUNKS)
    for index in range(2):
        commit(repo, stream_id, index, start(repo, stream_id, index, CHUNKS[index]))
    appending = start(repo, stream_id, 2, CHUNKS[2])
    # Chunk 0 replaced while chunk 2 arrives: the prefix is rewound to before chunk 0.
    assert commit(repo, stream_id, 0, start(repo, stream_id, 0, b"A" * 1000)) == (0, 0)
    assert commit(repo, stream_id, 2, appending) == (3, 3000)
    assert prefix_bytes(repo, stream_id) == b"A" * 1000 + CHUNKS[1] + CHUNKS[2]
    assert digest(repo, stream_id) == hashlib.sha256(b"A" * 1000 + CHUNKS[1] + CHUNKS[2]).hexdigest()
    assert part_files(repo, stream_id) == []


def test_an_abandoned_append_leaves_the_prefix_as_recorded_and_frees_the_stream(repo):
    stream_id = new_stream(repo, CHUNKS)
    commit(repo, stream_id, 0, start(repo, stream_id, 0, CHUNKS[0]))
    abandoned = start(repo, stream_id, 1, b"half a chunk")
    abandoned.discard()  # the client went away mid-chunk
    assert prefix_bytes(repo, stream_id) == CHUNKS[0]
    again = start(repo, stream_id, 1)
    assert isinstance(again, PrefixAppend)
    again.discard()


def test_a_chunk_sent_with_its_own_sha_is_checked_against_what_landed_on_the_prefix(repo):
    stream_id = new_stream(repo, CHUNKS)
    incoming = start(repo, stream_id, 0, CHUNKS[0])
    assert incoming.sha256 == hashlib.sha256(CHUNKS[0]).hexdigest()
    incoming.discard()


def test_a_chunk_received_aside_is_hashed_once_by_its_merge_and_its_own_sha_only_when_asked(repo, monkeypatch):
    """A part's bytes are hashed into the stream's running SHA-256 when it is merged; its own SHA-256 (for a `sha`
    field, or a chunk sent again once merged) is read back from the part when asked for, not computed as it arrives."""
    stream_id = new_stream(repo, CHUNKS)
    hashed, sha256 = [], hashlib.sha256

    class CountingSha256:
        def __init__(self):
            self._digest = sha256()

        def update(self, data):
            hashed.append(len(data))
            self._digest.update(data)

        def hexdigest(self):
            return self._digest.hexdigest()

    monkeypatch.setattr(storage_incoming.hashlib, "sha256", CountingSha256)  # (what IncomingFile hashes with)
    incoming = repo.streams.new_incoming(ORG, stream_id, 12, 2)  # not next: a part
    incoming.write(CHUNKS[2])
    assert hashed == []
    assert incoming.sha256 == sha256(CHUNKS[2]).hexdigest() and sum(hashed) == len(CHUNKS[2])
    assert commit(repo, stream_id, 2, incoming) == (0, 0)
    for index in (0, 1, 3):
        put(repo, stream_id, index, CHUNKS[index])
    assert digest(repo, stream_id) == sha256(b"".join(CHUNKS)).hexdigest()


# -- early writeback of received chunks --------------------------------------------------------------

def receive_in_writes(repo, stream_id, index, data, size):
    """Receive chunk `index` as the multipart parser does: in writes of `size` bytes."""
    incoming = repo.streams.new_incoming(ORG, stream_id, 12, index)
    for offset in range(0, len(data), size):
        incoming.write(data[offset:offset + size])
    return incoming


def test_early_writeback_is_asked_for_the_received_bytes_of_prefix_appends_and_parts(repo, monkeypatch):
    """Every WRITEBACK_BLOCK bytes received, writeback of the bytes received since the last call is started: on the
    prefix from where the chunk begins (appended in order), in a part file from 0 (out of order); the tail is left
    to the fsync. The bytes must have reached the kernel by then (the file object's buffer flushed)."""
    if storage_disk._start_writeback is None:
        pytest.skip("no sync_file_range here")
    real, calls = storage_disk._start_writeback, []

    def recording(fd, offset, nbytes, flags):
        # What is to be written back is in the file already, not in a Python buffer.
        assert os.fstat(fd).st_size >= offset + nbytes
        calls.append((os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[1], offset, nbytes, flags))
        return real(fd, offset, nbytes, flags)
    monkeypatch.setattr(storage_disk, "_start_writeback", recording)
    monkeypatch.setattr(storage_incoming, "WRITEBACK_BLOCK", 400)
    stream_id = new_stream(repo, CHUNKS)
    # 100-byte writes: the file object buffers them, so only a flush makes them the kernel's.
    assert commit(repo, stream_id, 0, receive_in_writes(repo, stream_id, 0, CHUNKS[0], 100)) == (1, 1000)
    assert [call[:3] for call in calls] == [("prefix", 0, 400), ("prefix", 400, 400)]
    calls.clear()
    assert commit(repo, stream_id, 1, receive_in_writes(repo, stream_id, 1, CHUNKS[1], 300)) == (2, 2000)
    assert [call[:3] for call in calls] == [("prefix", 1000, 600), ("prefix", 1600, 400)]
    calls.clear()
    # Chunk 3 before chunk 2: into a part file of its own.
    assert commit(repo, stream_id, 3, receive_in_writes(repo, stream_id, 3, CHUNKS[2], 500)) == (2, 2000)
    assert [(name.startswith(".incoming-"), offset, nbytes) for name, offset, nbytes, _ in calls] == \
        [(True, 0, 500), (True, 500, 500)]
    assert {flags for *_, flags in calls} == {storage_disk.SYNC_FILE_RANGE_WRITE}
    assert prefix_bytes(repo, stream_id) == CHUNKS[0] + CHUNKS[1]


@pytest.mark.parametrize("writeback", ["refused", "absent"])
def test_chunks_without_early_writeback_are_stored_as_before(repo, monkeypatch, writeback):
    """Where sync_file_range is missing (not Linux) or the kernel refuses it, the fsync alone makes the chunks
    durable: they are stored unchanged, and a refusal turns the call off."""
    calls = []

    def refused(fd, offset, nbytes, flags):
        calls.append((offset, nbytes))
        ctypes.set_errno(errno.EINVAL)
        return -1
    monkeypatch.setattr(storage_disk, "_start_writeback", refused if writeback == "refused" else None)
    monkeypatch.setattr(storage_incoming, "WRITEBACK_BLOCK", 400)
    stream_id = new_stream(repo, CHUNKS)
    assert commit(repo, stream_id, 0, receive_in_writes(repo, stream_id, 0, CHUNKS[0], 100)) == (1, 1000)
    assert commit(repo, stream_id, 2, receive_in_writes(repo, stream_id, 2, CHUNKS[2], 100)) == (1, 1000)
    assert commit(repo, stream_id, 1, receive_in_writes(repo, stream_id, 1, CHUNKS[1], 100)) == (3, 3000)
    assert prefix_bytes(repo, stream_id) == b"".join(CHUNKS[:3])
    assert digest(repo, stream_id) == hashlib.sha256(b"".join(CHUNKS[:3])).hexdigest()
    assert storage_disk._start_writeback is None
    assert len(calls) == (1 if writeback == "refused" else 0)


def test_a_failing_early_writeback_is_left_for_the_fsync_to_report(repo, monkeypatch):
    """An error other than 'not supported' (EIO...) neither fails the write nor turns the call off."""
    calls = []

    def failing(fd, offset, nbytes, flags):
        calls.append((offset, nbytes))
        ctypes.set_errno(errno.EIO)
        return -1
    monkeypatch.setattr(storage_disk, "_start_writeback", failing)
    monkeypatch.setattr(storage_incoming, "WRITEBACK_BLOCK", 400)
    stream_id = new_stream(repo, CHUNKS)
    assert commit(repo, stream_id, 0, receive_in_writes(repo, stream_id, 0, CHUNKS[0], 500)) == (1, 1000)
    assert storage_disk._start_writeback is failing
    assert calls == [(0, 500), (500, 500)]


# -- the ledger: one commit point per append ----------------------------------------------------------------------

def state(n):
    return bytes([n]) * 104


def test_a_ledger_commit_of_several_chunks_reads_back(tmp_path):
    ledger = Ledger.create(tmp_path)
    ledger.commit(3, [(10, state(1)), (25, state(2)), (40, state(3))])
    reopened = Ledger(tmp_path)
    assert reopened.next() == 3
    assert reopened.lengths(0, 4) == [0, 10, 25, 40]
    assert reopened.read(3) == (40, state(3))


def tear(path, at, data=b"\xff\xff"):
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(data)


def test_a_torn_ledger_slot_falls_back_to_the_commit_before(tmp_path):
    ledger = Ledger.create(tmp_path)
    ledger.commit(1, [(10, state(1))])
    ledger.commit(2, [(25, state(2))])
    # The latest commit (sequence 3) is in the second slot: a write of it cut short leaves its CRC wrong.
    tear(ledger.path, SLOT_SIZE + 8)
    assert Ledger(tmp_path).next() == 1


def test_a_commit_whose_records_never_reached_the_disk_is_not_taken(tmp_path):
    """A power cut can keep the new slot and lose the records written before it in the same fdatasync: the slot's
    CRC of its records refuses them, and the commit before stands, its records untouched."""
    ledger = Ledger.create(tmp_path)
    ledger.commit(1, [(10, state(1))])
    ledger.commit(4, [(20, state(2)), (30, state(3)), (40, state(4))])
    tear(ledger.path, RECORDS_AT + 3 * BOUNDARY.size + 20)  # inside record 3
    reopened = Ledger(tmp_path)
    assert reopened.next() == 1
    assert reopened.read(1) == (10, state(1))


def test_a_rewind_commits_fewer_chunks_and_the_next_append_overwrites_the_records_after(tmp_path):
    ledger = Ledger.create(tmp_path)
    ledger.commit(3, [(10, state(1)), (20, state(2)), (30, state(3))])
    ledger.commit(1)
    assert Ledger(tmp_path).next() == 1
    ledger.commit(2, [(15, state(9))])
    assert Ledger(tmp_path).lengths(0, 3) == [0, 10, 15]


def test_each_acknowledged_chunk_in_order_costs_two_fdatasyncs_and_no_rename(repo, monkeypatch):
    """The prefix's and the ledger's; no directory fsync, no file written aside and renamed (the earlier layout took
    four syncs: the prefix, the boundary record, the `merged` pointer and its directory)."""
    stream_id = new_stream(repo, CHUNKS)
    commit(repo, stream_id, 0, start(repo, stream_id, 0, CHUNKS[0]))
    calls = []
    for name in ("fsync", "fdatasync", "replace", "rename"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *args, real=real, name=name: calls.append(name) or real(*args))
    assert commit(repo, stream_id, 1, start(repo, stream_id, 1, CHUNKS[1])) == (2, 2000)
    assert calls == ["fdatasync", "fdatasync"]


def test_a_part_is_fsynced_before_the_streams_lock_is_taken(repo, monkeypatch):
    # Chunks arriving together (4 in flight by default) then sync their bytes at once, not one after another.
    stream_id = new_stream(repo, [b"\x00\x00\x00\x18ftypmp42" + b"a" * 20, b"b" * 32])
    incoming = repo.streams.new_incoming(ORG, stream_id, 12)
    incoming.write(b"b" * 32)
    lock_held_at_sync = lock_held_at_fsync(monkeypatch, storage_incoming.os, incoming.path,
                                           f"{repo.streams._directory(ORG, stream_id)}.lock")
    try:
        written = repo.streams.add_chunk(ORG, stream_id, Chunk(1, 2, incoming), CHUNK_RULES)
    finally:
        incoming.discard()

    assert written.outcome is Outcome.STORED
    assert lock_held_at_sync == [False]
    assert repo.streams.status(ORG, stream_id).chunks == {1: 32}
