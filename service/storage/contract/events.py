"""The storage contract of change events (CONTRACT 14): one event per history entry, written by the document store in
the same commit as its change and numbered per org without gaps, then read by seq, watched for, and pruned."""
from typing import NamedTuple, Protocol, runtime_checkable

# How long events are kept when WIS_EVENTS_RETENTION_DAYS is unset: 30 days.
DEFAULT_EVENTS_RETENTION = 30 * 86400


class Event(NamedTuple):
    """One change, as the org's event log keeps it."""
    seq: int  # 1, 2, 3, ... per org, in commit order
    timestamp: str  # the history entry's savedAt
    kind: str  # processes, products or stations
    id: str
    revision: int  # the history entry's revision (a deletion has its own)
    change: str  # CREATED, UPDATED, DELETED or RESTORED
    name: str | None  # the object's name at that revision; None for a deletion
    author: str | None = None
    comment: str | None = None

    def to_json(self):
        return {"seq": self.seq, "timestamp": self.timestamp, "kind": self.kind, "id": self.id,
                "revision": self.revision, "change": self.change, "name": self.name, "author": self.author,
                "comment": self.comment}

    @classmethod
    def from_json(cls, value):
        return cls(value["seq"], value["timestamp"], value["kind"], value["id"], value["revision"], value["change"],
                   value["name"], value.get("author"), value.get("comment"))


class EventBounds(NamedTuple):
    oldest: int  # the oldest seq kept; latest + 1 when none is
    latest: int  # the org's last seq; 0 before any


class NewEvent(NamedTuple):
    """What a document store hands its event log with a change: everything but the seq, which the log gives."""
    timestamp: str
    kind: str
    id: str
    revision: int
    change: str
    name: str | None
    author: str | None = None
    comment: str | None = None


class CommitWatcher(Protocol):
    """Waits for events committed by any worker or node, for one thread of this process (the event streams' hub)."""

    def wait(self, timeout: float) -> bool:
        """Block until an event may have committed since the last call, or `timeout` seconds; True when one may have
        (the caller then reads the orgs it follows), False on a timeout. Costs no CPU while nothing happens."""

    def close(self) -> None: ...


@runtime_checkable
class EventStore(Protocol):
    """Every org's events (service.storage.files.events, service.storage.shared.events)."""
    retention_seconds: float  # events older than this are pruned by the sweep; 0 keeps them all

    def read(self, org: str, after: int, first: int, wanted: frozenset | None = None) -> list[Event]:
        """Up to `first` of the org's committed events with seq > `after`, oldest first; with `wanted`, only those
        whose (kind, change) it holds."""

    def bounds(self, org: str) -> EventBounds: ...

    def prune(self) -> int:
        """Remove the events older than the retention from every org (the latest of each stays known); how many."""

    def watcher(self) -> CommitWatcher:
        """A new watcher of the commits of every org (one per thread that waits)."""
