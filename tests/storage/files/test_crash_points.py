"""A crash at every step of a write: a child process runs one request and dies (os._exit, as kill -9 would leave it)
just before its nth file operation; the parent then starts the service again on what is left on disk.

For each n: every JSON file parses and every stream's ledger holds a whole commit, a process is either as before or as
after the interrupted upsert with exactly one event per committed change and its seqs without a gap (CONTRACT 14), no
file at a media path is partial, and an interrupted upload resumes from what the server reports and completes.
"""
import json
import os
import shutil
import signal
import threading
import time

import pytest

from service import create_app
from service.storage import get_repository
from service.storage.files.streams.ledger import LEDGER, Ledger
from support.datadir import media_files
from support.disk import FaultyDisk
from support.documents import line_process, read_process, upsert_process
from support.media import mp4, png, sha256
from support.power_cut import power_cut
from support.tokens import HEADERS, TOKENS
from support.uploads import create_stream, send_chunk, send_file_first, stream_status, upload

pytestmark = pytest.mark.exhaustive  # a crash at every step of every write

CRASHED = 70
# More operations than any one request performs; the loop ends at the first n the request survives.
MAX_STEPS = 80
CHILD_TIMEOUT = 30


class CrashingDisk(FaultyDisk):
    """The filesystem double, dying before the nth operation of any kind instead of failing one."""

    def __init__(self, monkeypatch, at):
        super().__init__(monkeypatch)
        self._at, self._count = at, 0

    def check(self, operation, path=""):
        self._count += 1
        if self._count == self._at:
            os._exit(CRASHED)


def service(data_dir):
    return create_app({"DATA_DIR": str(data_dir), "API_TOKENS": TOKENS, "TESTING": True})


def crash_during(data_dir, at, request, disk=CrashingDisk):
    """Run `request(client)` in a child process that dies before its `at`th file operation; True if it died."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            client = service(data_dir).test_client()
            with pytest.MonkeyPatch.context() as monkeypatch:
                disk(monkeypatch, at)
                request(client)
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + CHILD_TIMEOUT
    while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the request did not finish within {CHILD_TIMEOUT} s")
        time.sleep(0.005)
    return os.waitstatus_to_exitcode(waited[1]) == CRASHED


def every_crash(tmp_path, baseline, request, check, disk=CrashingDisk):
    """For n = 1, 2, ...: copy the baseline data, crash the request at step n, restart, `check(client, data_dir)`."""
    for at in range(1, MAX_STEPS):
        data_dir = tmp_path / f"crash-{at}"
        shutil.copytree(baseline, data_dir)
        crashed = crash_during(data_dir, at, request, disk)
        for path in data_dir.rglob("*"):
            if path.is_file() and path.suffix == ".json":
                json.loads(path.read_bytes())
            if path.name == LEDGER:
                Ledger(path.parent).next()  # a whole commit in one of its slots
        check(service(data_dir).test_client(), data_dir)
        shutil.rmtree(data_dir)
        if not crashed:
            return at - 1
    raise AssertionError(f"the request was still running after {MAX_STEPS} file operations")


def graphql(client, query, **variables):
    response = client.post("/graph/v2", headers=HEADERS, json={"query": query, "variables": variables})
    assert response.status_code == 200
    return response.get_json()


def history(client, identifier="line_1"):
    answer = graphql(client, "query($id: String!) { processHistory(id: $id) { revision change } }", id=identifier)
    return [(entry["revision"], entry["change"]) for entry in answer["data"]["processHistory"]]


def events(client):
    """[(seq, type, revision)] of the org's events, and its latest seq."""
    answer = graphql(client, "{ latestEventSeq events(first: 500) { seq type revision } }")["data"]
    listed = [(event["seq"], event["type"], event["revision"]) for event in answer["events"]]
    assert answer["latestEventSeq"] == (listed[-1][0] if listed else 0)
    return listed


def changes_as_events(client, identifier="line_1"):
    """The events the history of a process says there must be: one per entry, in revision order, seq 1, 2, ..."""
    return [(seq, f"process.{change.lower()}", revision)
            for seq, (revision, change) in enumerate(reversed(history(client, identifier)), start=1)]


def name_at(client, revision):
    answer = graphql(client, 'query($r: Int) { process(id: "line_1", revision: $r) { name } }', r=revision)
    return (answer["data"]["process"] or {}).get("name")


def test_a_crash_at_any_step_of_an_upsert_leaves_the_old_or_the_new_process(tmp_path):
    baseline = tmp_path / "baseline"
    client = service(baseline).test_client()
    assert upsert_process(client, HEADERS, line_process("before"))["data"] == {"processCreate": "CREATED"}

    def check(client, data_dir):
        stored = read_process(client, HEADERS)
        assert (stored["name"], stored["revision"]) in {("before", 1), ("after", 2)}
        assert [step["name"] for step in stored["steps"]] == [f"{stored['name']} {i}" for i in range(3)]
        # The history agrees with the current document: no entry of the interrupted write unless it committed.
        assert history(client) == [(2, "UPDATED"), (1, "CREATED")][2 - stored["revision"]:]
        assert name_at(client, stored["revision"]) == stored["name"] and name_at(client, 1) == "before"
        # Exactly one event per committed change, numbered without a gap; the next change takes the next seq.
        assert events(client) == changes_as_events(client)
        assert upsert_process(client, HEADERS, line_process("again"))["data"] == {"processCreate": "UPDATED"}
        assert history(client)[0] == (stored["revision"] + 1, "UPDATED")
        assert name_at(client, stored["revision"] + 1) == "again"
        assert events(client) == changes_as_events(client)

    steps = every_crash(tmp_path, baseline, lambda client: upsert_process(client, HEADERS, line_process("after")),
                        check)
    # Per file (entry, document): its temporary created and written; the entry renamed; the event appended, the record
    # written and synced; the document renamed.
    assert steps >= 9


def test_a_crash_at_any_step_of_a_delete_leaves_the_process_or_its_deletion(tmp_path):
    baseline = tmp_path / "baseline"
    client = service(baseline).test_client()
    upsert_process(client, HEADERS, line_process("before"))

    def check(client, data_dir):
        stored = read_process(client, HEADERS)
        if stored is None:
            assert history(client) == [(2, "DELETED"), (1, "CREATED")]
        else:
            assert (stored["name"], history(client)) == ("before", [(1, "CREATED")])
        assert events(client) == changes_as_events(client)
        assert upsert_process(client, HEADERS, line_process("again"))["data"] == {
            "processCreate": "CREATED" if stored is None else "UPDATED"}
        assert history(client)[0] == (3 if stored is None else 2, "CREATED" if stored is None else "UPDATED")
        assert events(client) == changes_as_events(client)

    delete = 'mutation { processDelete(id: "line_1") }'
    steps = every_crash(tmp_path, baseline, lambda client: graphql(client, delete), check)
    # The entry's temporary created, written and renamed; the event appended, the record written and synced; the unlink.
    assert steps >= 7


def test_a_crash_at_any_step_of_a_restore_after_a_delete_leaves_a_consistent_history(tmp_path):
    baseline = tmp_path / "baseline"
    client = service(baseline).test_client()
    upsert_process(client, HEADERS, line_process("before"))
    graphql(client, 'mutation { processDelete(id: "line_1") }')

    def check(client, data_dir):
        stored = read_process(client, HEADERS)
        restored = [] if stored is None else [(3, "RESTORED")]
        assert history(client) == restored + [(2, "DELETED"), (1, "CREATED")]
        assert events(client) == changes_as_events(client)
        assert upsert_process(client, HEADERS, line_process("again"))["data"] == {
            "processCreate": "CREATED" if stored is None else "UPDATED"}
        assert history(client)[0][0] == 3 + len(restored)
        assert events(client) == changes_as_events(client)

    restore = 'mutation { processRestore(id: "line_1", revision: 1) }'
    steps = every_crash(tmp_path, baseline, lambda client: graphql(client, restore), check)
    assert steps >= 8


def test_a_crash_at_any_step_of_the_replay_after_a_power_cut_leaves_it_to_the_next_look(tmp_path):
    """After a power cut the first look at an org puts back what the write-ahead log holds since the last checkpoint
    (none here: the suite takes none in-process); a crash at any step of that replay (a reader's, here) leaves it for
    the next look, which puts everything back."""
    baseline = tmp_path / "baseline"
    app = service(baseline)
    client = app.test_client()
    upsert_process(client, HEADERS, line_process("before"))
    upsert_process(client, HEADERS, {**line_process("other"), "id": "line_2"})
    graphql(client, 'mutation { processDelete(id: "line_2") }')
    upsert_process(client, HEADERS, line_process("after"))
    power_cut(get_repository(app), 0)

    def check(client, data_dir):
        stored = read_process(client, HEADERS)
        assert (stored["name"], stored["revision"]) == ("after", 2)
        assert read_process(client, HEADERS, "line_2") is None
        assert history(client) == [(2, "UPDATED"), (1, "CREATED")]
        assert [(seq, kind) for seq, kind, _ in events(client)] == [
            (1, "process.created"), (2, "process.created"), (3, "process.deleted"), (4, "process.updated")]
        assert upsert_process(client, HEADERS, line_process("again"))["data"] == {"processCreate": "UPDATED"}
        assert events(client)[-1] == (5, "process.updated", 3)

    steps = every_crash(tmp_path, baseline, lambda client: read_process(client, HEADERS), check)
    assert steps >= 4 * 3  # per change at least: its entry, its document (or unlink), its event


class QueueingCrashingDisk(CrashingDisk):
    """Also makes each sync last a little, so that concurrent writers queue and commit in batches (group commit)."""

    def check(self, operation, path=""):
        super().check(operation, path)
        if operation == "fsync":
            time.sleep(0.01)


WRITERS = ("line_1", "line_2", "line_3")


def test_a_crash_at_any_step_of_concurrent_upserts_leaves_each_change_whole_with_one_event(tmp_path):
    """Three writers of one org committing together (their events appended in one batch, their documents renamed
    after one sync): a kill at any instant leaves each process as before or after, and exactly one event per
    committed change, numbered without a gap."""
    baseline = tmp_path / "baseline"
    client = service(baseline).test_client()
    for identifier in WRITERS:
        upsert_process(client, HEADERS, {**line_process("before"), "id": identifier})

    def write_together(client):
        start = threading.Barrier(len(WRITERS))

        def write(identifier):
            start.wait()
            upsert_process(client.application.test_client(), HEADERS, {**line_process("after"), "id": identifier})

        threads = [threading.Thread(target=write, args=(identifier,)) for identifier in WRITERS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def check(client, data_dir):
        revisions = {identifier: read_process(client, HEADERS, identifier)["revision"] for identifier in WRITERS}
        assert set(revisions.values()) <= {1, 2}
        for identifier, revision in revisions.items():
            assert read_process(client, HEADERS, identifier)["name"] == ("before", "after")[revision - 1]
        answer = graphql(client, "{ latestEventSeq events(first: 500) { seq id revision } }")["data"]
        listed = [(event["seq"], event["id"], event["revision"]) for event in answer["events"]]
        updated = sorted(identifier for identifier, revision in revisions.items() if revision == 2)
        assert [seq for seq, _, _ in listed] == list(range(1, 4 + len(updated)))
        assert answer["latestEventSeq"] == 3 + len(updated)
        assert sorted(identifier for _, identifier, revision in listed[3:] if revision == 2) == updated
        assert upsert_process(client, HEADERS, {**line_process("again"), "id": "line_1"})["data"] == {
            "processCreate": "UPDATED"}
        assert graphql(client, "{ latestEventSeq }")["data"]["latestEventSeq"] == 4 + len(updated)

    steps = every_crash(tmp_path, baseline, write_together, check, disk=QueueingCrashingDisk)
    # At the fewest (one batch): per writer its entry's and document's temporaries created and written and its entry
    # renamed; then the batch's events appended, its records written and synced, and three renames.
    assert steps >= 3 * 5 + 6


def test_a_crash_at_any_step_of_a_single_upload_leaves_no_partial_media(tmp_path):
    baseline = tmp_path / "baseline"
    service(baseline)
    data = png(300_000, "photo")

    def check(client, data_dir):
        for file in media_files(data_dir):
            assert file.read_bytes() == data  # whole, or not there at all
        assert upload(client, HEADERS, data).status_code == 201

    steps = every_crash(tmp_path, baseline, lambda client: upload(client, HEADERS, data), check)
    assert steps >= 4


@pytest.mark.parametrize("sent, crashing, sender", [
    ([0, 1, 2], 3, send_chunk),  # the last chunk in order, received onto the prefix: commit, verify, publish
    ([0, 2, 3], 1, send_chunk),  # the chunk that fills a gap: onto the prefix, merges the parts after it and completes
    ([0, 3], 1, send_chunk),  # a gap filled halfway: onto the prefix, the stream stays open
    ([0, 3], 2, send_chunk),  # ahead of a gap: into a part of its own
    ([0, 2, 3], 1, send_file_first),  # index unknown while it arrives: into a part, merged with the rest, completes
], ids=["in-order-last", "fills-gap", "fills-gap-halfway", "ahead", "file-first"])
def test_a_crash_at_any_step_of_a_chunk_leaves_the_stream_resumable(tmp_path, sent, crashing, sender):
    baseline = tmp_path / "baseline"
    client = service(baseline).test_client()
    video = mp4(3 * 100_000 + 5000, "video")
    chunks = [video[i:i + 100_000] for i in range(0, len(video), 100_000)]
    stream_id = create_stream(client, HEADERS, video)
    for index in sent:
        assert send_chunk(client, HEADERS, stream_id, index, len(chunks), chunks[index]).status_code == 200

    def check(client, data_dir):
        for file in media_files(data_dir):
            assert sha256(file.read_bytes()) == sha256(video)  # never a partial file at a media path
        held = stream_status(client, HEADERS, stream_id)
        if held["state"] == "open":
            received = set(held["receivedChunks"])
            # Acknowledged chunks survive; when every chunk is held but none completed the stream, the last one is
            # reported missing so that resending it completes the stream.
            assert set(sent) <= received or received == set(range(len(chunks) - 1))
            missing = [i for i in range(len(chunks)) if i not in held["receivedChunks"]]
            answers = [send_chunk(client, HEADERS, stream_id, i, len(chunks), chunks[i]) for i in missing]
            assert [r.status_code for r in answers] == [200] * (len(missing) - 1) + [201]
            path = answers[-1].get_json()["path"]
        else:
            path = held["path"]
        assert sha256(client.get(path, headers=HEADERS).data) == sha256(video)
        assert len(media_files(data_dir)) == 1

    steps = every_crash(tmp_path, baseline,
                        lambda client: sender(client, HEADERS, stream_id, crashing, len(chunks), chunks[crashing]),
                        check)
    assert steps >= 5  # at the least the chunk written and fdatasynced, the ledger's records and slot written, fdatasynced

