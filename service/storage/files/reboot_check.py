"""The check of an org's event log after a reboot (service.storage.files.events): each writer syncs its change's folder
once the org's events lock is released (service.storage.files.group_commit), so a power cut can undo the rename (or
unlink) of a change whose event is in the log, not yet acknowledged, with later changes kept. The first look at the
log after the reboot puts each such change in place from its history entry, which was durable before its event was
appended; then the org's `<data>/orgs/<org>/events/boot` names the boot (Linux's boot id), and the other worker
processes of that boot skip the check. Where the system tells no boot id, each process checks each org once.
"""
import contextlib
import functools

from service.errors import StorageFailed, StorageFull
from service.storage.common.disk import write_unsynced

BOOT = "boot"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Segments the check reads: the changes a power cut may have undone are a few writers' (those syncing their folders
# at the cut), among the last events unless more writers than a segment holds were at work at once.
CHECKED_SEGMENTS = 2


class RebootCheck:
    """The check of one event log (service.storage.files.events.FileEventLog) in this process: `put_forward(org, kind,
    id, revision)` puts that change in place from its history entry (service.storage.files.documents)."""

    def __init__(self, log, put_forward):
        self._log, self._put_forward = log, put_forward
        # The orgs whose log this process found checked since the boot, or checked.
        self._done = set()

    def done(self, org):
        """True when the org's log needs no check: this process or another checked it since the boot, or it has no
        events (read without the lock: its `boot` file is written once its check is done)."""
        if org in self._done:
            return True
        boot = _boot_id()
        try:
            checked = boot is not None and (self._log.directory(org) / BOOT).read_text() == boot
        except FileNotFoundError:
            checked = not self._log.segments(org)
        if checked:
            self._done.add(org)
        return checked

    def check(self, org):
        """Under the org's lock, unless it needs none: put in place each object's latest change in the last segments
        whose revision is not the committed one, then note the boot."""
        if self.done(org):
            return
        latest = {}
        for number in self._log.segments(org)[-CHECKED_SEGMENTS:]:
            latest.update(((event.kind, event.id), event) for event in self._log.events_of(org, number))
        for event in sorted(latest.values(), key=lambda event: event.seq):
            if not self._log.committed(org, event):
                self._put_forward(org, event.kind, event.id, event.revision)
        if (boot := _boot_id()) is not None:
            # Not written (a full disk) or lost in a power cut: the next process checks again.
            with contextlib.suppress(StorageFailed, StorageFull, OSError):
                write_unsynced(self._log.directory(org) / BOOT, boot.encode())
        self._done.add(org)


@functools.cache
def _boot_id():
    """This boot's id, or None where the system does not tell."""
    try:
        with open(BOOT_ID) as handle:
            return handle.read().strip()
    except OSError:
        return None
