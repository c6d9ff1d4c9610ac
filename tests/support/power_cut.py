"""What a power cut may leave of the file backend's writes since its last checkpoint (service.storage.files.
write_ahead): the tests of the replay after a reboot start from it."""
import orjson

from service.storage.files import events, write_ahead


def power_cut(repo, checkpointed, org="default"):
    """What a power cut may leave of what was written after the checkpoint at `checkpointed` (none of it synced, the
    write-ahead log's records of acknowledged changes excepted): each document written since empty (its blocks never
    written) or as it was before, each deleted one back, each history entry written since gone, the event log cut
    back to a torn line, a record being written torn; then a new boot."""
    folder = repo.orgs_root / org
    for record in repo.events.wal.records_after(org, checkpointed):
        event = orjson.loads(record.event_line)
        kind_folder = folder / event["kind"]
        (kind_folder / ".history" / event["id"] / f"{event['revision']}.json").unlink(missing_ok=True)
        document = kind_folder / f"{event['id']}.json"
        if event["change"] == "DELETED":  # its unlink undone
            document.write_bytes(b'{"name":"deleted before the power cut","revision":1}')
        elif document.exists():
            document.write_bytes(b"" if event["seq"] % 2 else b'{"name":"an older revision","revision":1}')
    number = checkpointed // events.SEGMENT_EVENTS  # the segment of the first event after the checkpoint
    for later in repo.events.segments(org):
        if later > number:
            (folder / "events" / f"{later:010d}.jsonl").unlink()
    segment = folder / "events" / f"{number:010d}.jsonl"
    kept = segment.read_bytes().split(b"\n")[:checkpointed - number * events.SEGMENT_EVENTS] if segment.exists() else []
    segment.write_bytes(b"".join(line + b"\n" for line in kept) + b'{"seq":')
    [last] = repo.events.wal.segments(org)[-1:]
    with open(repo.events.wal.directory(org) / f"{last:010d}.wal", "ab") as wal:
        wal.write(write_ahead.HEADER.pack(5000, 0, 99) + b"torn")
    (folder / "events" / "boot").write_text("the boot before")
