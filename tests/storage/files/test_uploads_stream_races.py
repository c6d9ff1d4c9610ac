"""Chunks of one stream arriving together, as a client's parallel chunks do: whatever the order in which their
requests take the stream's two locks (the stream's, and the append lock of the chunk received onto the prefix), the
request that makes the stream whole completes it, so no client is told that its last chunk is missing."""
import hashlib
import threading

import pytest

from service.domain.uploads import CHUNK_RULES, check_sha
from service.storage.contract import Chunk, Outcome, StreamRecord
from service.errors import StreamNotFound
from service.storage.files import FileRepository
from service.storage.files.streams import append as append_module
from service.storage.files.streams.append import PrefixAppend
from service.storage.common.incoming import IncomingFile

ORG = "default"
CHUNKS = [b"\x00\x00\x00\x18ftypmp42" + b"a" * 20, b"b" * 32, b"c" * 32]
WHOLE = b"".join(CHUNKS)


@pytest.fixture
def repo(tmp_path):
    return FileRepository(tmp_path / "data", 3600)


@pytest.fixture
def stream_id(repo):
    record = StreamRecord(destination_id="stepVideo", file_name="f.mp4", file_size=len(WHOLE),
                          sha=hashlib.sha256(WHOLE).hexdigest(), total_chunks=len(CHUNKS), format="mp4",
                          media_prefix="0123456789abcdef")
    return repo.streams.create(ORG, record)


def receive(repo, stream_id, index, data, index_known=True):
    """Receive chunk `index` as the chunk route does (with its index when the form sent it before the file)."""
    incoming = repo.streams.new_incoming(ORG, stream_id, 12, index if index_known else None)
    incoming.write(data)
    return incoming


def add(repo, stream_id, index, incoming):
    return repo.streams.add_chunk(ORG, stream_id, Chunk(index, len(CHUNKS), incoming), CHUNK_RULES)


def send(repo, stream_id, index, index_known=True):
    """One whole chunk request: receive, store, end (the view discards what it received once the store is done)."""
    incoming = receive(repo, stream_id, index, CHUNKS[index], index_known)
    try:
        return add(repo, stream_id, index, incoming)
    finally:
        incoming.discard()



def assert_complete(repo, stream_id, written):
    assert written.outcome is Outcome.COMPLETED
    status = repo.streams.status(ORG, stream_id)
    assert status.record.is_complete and status.record.path == written.path


def test_a_chunk_stored_after_the_appender_committed_but_before_its_request_ended_completes_the_stream(
        repo, stream_id):
    send(repo, stream_id, 0)
    appending = receive(repo, stream_id, 1, CHUNKS[1])
    last = receive(repo, stream_id, 2, CHUNKS[2])
    assert isinstance(appending, PrefixAppend) and isinstance(last, IncomingFile)
    try:
        assert add(repo, stream_id, 1, appending).outcome is Outcome.STORED
        # The appender's request has committed its chunk and left the stream's lock; the last chunk's request takes
        # the lock before the appender's request has ended.
        written = add(repo, stream_id, 2, last)
    finally:
        appending.discard()
        last.discard()
    assert_complete(repo, stream_id, written)


class Outcomes(threading.Thread):
    """A thread keeping what its target returned."""

    def __init__(self, target):
        super().__init__(daemon=True)
        self._target_call, self.result = target, None

    def run(self):
        self.result = self._target_call()


def test_a_resent_chunk_asking_to_append_meanwhile_does_not_keep_the_last_chunk_from_completing(
        repo, stream_id, monkeypatch):
    send(repo, stream_id, 0)
    send(repo, stream_id, 2)
    # A retry of chunk 0 begins: it asks whether it continues the prefix (it does not), and is held at that moment.
    asking, resume = threading.Event(), threading.Event()
    real_read_record = append_module.read_record

    def held_read_record(directory):
        asking.set()
        resume.wait(10)
        return real_read_record(directory)

    monkeypatch.setattr(append_module, "read_record", held_read_record)
    retry = Outcomes(lambda: receive(repo, stream_id, 0, CHUNKS[0]))
    retry.start()
    assert asking.wait(10)
    monkeypatch.setattr(append_module, "read_record", real_read_record)
    # Meanwhile the missing chunk 1 is stored (received aside: its form gave the index after the file).
    last = Outcomes(lambda: send(repo, stream_id, 1, index_known=False))
    last.start()
    last.join(0.5)
    resume.set()
    retry.join(10)
    last.join(10)
    assert not last.is_alive() and not retry.is_alive()
    retry.result.discard()

    assert isinstance(retry.result, IncomingFile)
    assert_complete(repo, stream_id, last.result)


def test_the_next_chunk_arriving_while_the_streams_lock_is_held_is_received_aside_without_waiting(repo, stream_id):
    send(repo, stream_id, 0)
    with repo.streams.open(ORG, stream_id):
        incoming = repo.streams.new_incoming(ORG, stream_id, 12, 1)
    try:
        assert isinstance(incoming, IncomingFile)
    finally:
        incoming.discard()
    send(repo, stream_id, 1)
    assert_complete(repo, stream_id, send(repo, stream_id, 2))


def test_a_chunk_still_arriving_when_another_request_completes_the_stream_is_answered_with_the_path(repo, stream_id):
    """The same last chunk sent twice at once: the request that completes the stream tidies its folder while the other
    is still receiving (or reading back, for its `sha` field) its copy there. That copy is the other request's own; it
    must still be there for its check and its answer, the path (a 500 before: FileNotFoundError)."""
    send(repo, stream_id, 0)
    send(repo, stream_id, 1)
    still_arriving = receive(repo, stream_id, 2, CHUNKS[2], index_known=False)  # received aside, in the folder
    try:
        assert_complete(repo, stream_id, send(repo, stream_id, 2))
        assert check_sha(hashlib.sha256(CHUNKS[2]).hexdigest(), still_arriving, "chunk 2") is None
        written = add(repo, stream_id, 2, still_arriving)
    finally:
        still_arriving.discard()
    assert written.outcome is Outcome.ALREADY_COMPLETE
    assert written.path == repo.streams.status(ORG, stream_id).record.path
    assert [entry.name for entry in repo.streams._directory(ORG, stream_id).iterdir()] == ["meta.json"]


def test_a_chunk_received_aside_when_its_stream_is_deleted_is_answered_not_found(repo, stream_id):
    """A DELETE (or a completion whose file fails its check, which discards the stream) removes the stream's folder with
    a chunk still being received there: the chunk's request answers 404, the stream being gone (a 500 before, as it
    read its copy back to check its `sha`: FileNotFoundError)."""
    send(repo, stream_id, 0)
    still_arriving = receive(repo, stream_id, 1, CHUNKS[1], index_known=False)  # received aside, in the folder
    try:
        repo.streams.delete(ORG, stream_id)
        with pytest.raises(StreamNotFound):
            check_sha(hashlib.sha256(CHUNKS[1]).hexdigest(), still_arriving, "chunk 1")
        with pytest.raises(StreamNotFound):
            add(repo, stream_id, 1, still_arriving)
    finally:
        still_arriving.discard()
