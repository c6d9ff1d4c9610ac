"""The check of an org's logs after a reboot (service.storage.files.events): a change commits with one sync of the
org's write-ahead log (service.storage.files.write_ahead), its history entry, its document and its event written
without one until a checkpoint syncs the file system (service.storage.files.checkpoints). So a power cut may lose
any of them for the changes after the last checkpoint, but not their records. The first look at the org's log after
the reboot cuts the event log back to the checkpoint, then puts each record after it in place again (its entry, its
document or its deletion, its event), syncs the file system and notes the checkpoint; then the org's
`<data>/orgs/<org>/events/boot` names the boot (Linux's boot id), and the other worker processes of that boot skip the
check. Where the system tells no boot id, each process checks each org once.

A log written before the write-ahead log (no record after its checkpoint, none at all) is checked as it was then: each
object's latest change in its last segments whose revision is not the committed one is put in place from its history
entry, which was durable before its event was appended.
"""
import contextlib
import functools

import orjson

from service.errors import StorageFailed, StorageFull
from service.storage.common.disk import sync_filesystem, write_unsynced
from service.storage.contract.events import Event

BOOT = "boot"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Segments the check of a log without records reads: the changes a power cut may have undone were a few writers'.
CHECKED_SEGMENTS = 2


class RebootCheck:
    """The check of one event log (service.storage.files.events.FileEventLog) in this process: `put_forward(org, kind,
    id, revision, entry=None)` puts that change in place from its history entry (service.storage.files.documents)."""

    def __init__(self, log, put_forward):
        self._log, self._put_forward = log, put_forward
        # The orgs whose log this process found checked since the boot, or checked.
        self._done = set()

    def done(self, org):
        """True when the org's log needs no check: this process or another checked it since the boot, or it has no
        events nor records (read without the lock: its `boot` file is written once its check is done)."""
        if org in self._done:
            return True
        boot = _boot_id()
        try:
            checked = boot is not None and (self._log.directory(org) / BOOT).read_text() == boot
        except FileNotFoundError:
            checked = not self._log.segments(org) and not self._log.wal.segments(org)
        if checked:
            self._done.add(org)
        return checked

    def check(self, org):
        """Under the org's lock, unless it needs none: replay the write-ahead log after its checkpoint (or check a log
        written before it), then note the boot."""
        if self.done(org):
            return
        wal = self._log.wal
        checkpoint = wal.checkpoint(org)
        records = wal.records_after(org, checkpoint or 0)
        if records:
            self._replay(org, records)
        elif segments := wal.segments(org):
            # Nothing to replay: the events after the checkpoint (or after the log's first record) have no record, so
            # their changes never committed.
            kept = checkpoint if checkpoint is not None else segments[0] - 1
            self._log.cut_after(org, kept)
            wal.cut_after(org, kept)
        else:
            self._check_without_records(org)
        self.note_boot(org)
        self._done.add(org)

    def note_boot(self, org):
        """Note that the org's log is checked in this boot (under the org's lock): after a check, or when a new log
        starts (a process that found no log took it for checked without a note)."""
        if (boot := _boot_id()) is not None:
            # Not written (a full disk) or lost in a power cut: the next process checks again.
            with contextlib.suppress(StorageFailed, StorageFull, OSError):
                write_unsynced(self._log.directory(org) / BOOT, boot.encode())

    def _replay(self, org, records):
        """Put the records in place again with their events, the log cut back to where they start, and sync it all."""
        kept = records[0].seq - 1  # (the checkpoint's seq, or the first record's predecessor once older ones are gone)
        self._log.cut_after(org, kept)
        for record in records:
            event = Event.from_json(orjson.loads(record.event_line))
            self._put_forward(org, event.kind, event.id, event.revision, record.entry)
        start = 0
        while start < len(records):  # appended a segment at a time, as batches are
            seq = records[start].seq
            batch = records[start:start + self._log.room_after(seq - 1)]
            self._log.append(org, seq, b"".join(record.event_line for record in batch))
            start += len(batch)
        self._log.wal.cut_after(org, records[-1].seq)  # a damaged record and what follows it
        sync_filesystem(self._log.orgs_root)
        self._log.wal.note_checkpoint(org, records[-1].seq)

    def _check_without_records(self, org):
        latest = {}
        for number in self._log.segments(org)[-CHECKED_SEGMENTS:]:
            latest.update(((event.kind, event.id), event) for event in self._log.events_of(org, number))
        for event in sorted(latest.values(), key=lambda event: event.seq):
            if not self._log.committed(org, event):
                self._put_forward(org, event.kind, event.id, event.revision)
        sync_filesystem(self._log.orgs_root)


@functools.cache
def _boot_id():
    """This boot's id, or None where the system does not tell."""
    try:
        with open(BOOT_ID) as handle:
            return handle.read().strip()
    except OSError:
        return None
