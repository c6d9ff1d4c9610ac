"""The storage contract of upload streams (the chunk API's and tus's): the record of a stream, what a write of it
answers, the rules the domain supplies, and what a stream store does."""
import dataclasses
import enum
import re
from collections.abc import Callable
from typing import NamedTuple, Protocol, runtime_checkable

from service.interface import CHUNKS_PROTOCOL, TUS_PROTOCOL

# A stream id is made by the server: 32 hex digits, safe as a file name and an object key.
STREAM_ID = re.compile(r"[0-9a-f]{32}")


class StreamState(enum.Enum):
    OPEN = "open"
    COMPLETE = "complete"


@dataclasses.dataclass(frozen=True)
class StreamRecord:
    """What a client declared when it opened a stream, and what the server decided since (the chunk count, the
    sniffed format, and once complete the media path). Stored as the JSON of `to_json`, with the API's field names:
    a data directory or database written by earlier versions reads back the same."""
    destination_id: str
    file_name: str
    file_size: int
    sha: str | None  # lower-case hex; None for a tus upload created without one
    media_prefix: str  # the unique start of its media name, fixed at creation so that a retry finds the same path
    protocol: str = CHUNKS_PROTOCOL
    upload_metadata: str | None = None  # a tus upload's Upload-Metadata as sent
    total_chunks: int | None = None
    format: str | None = None
    state: StreamState = StreamState.OPEN
    path: str | None = None

    @property
    def is_tus(self):
        return self.protocol == TUS_PROTOCOL

    @property
    def is_complete(self):
        return self.state is StreamState.COMPLETE

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def to_json(self):
        return {
            "protocol": self.protocol, "destinationId": self.destination_id, "fileName": self.file_name,
            "fileSize": self.file_size, "sha": self.sha, "uploadMetadata": self.upload_metadata,
            "totalChunks": self.total_chunks, "format": self.format, "mediaPrefix": self.media_prefix,
            "state": self.state.value, "path": self.path,
        }

    @classmethod
    def from_json(cls, meta):
        """The record of a stored meta; a chunk stream written before streams had a protocol has none."""
        return cls(
            destination_id=meta["destinationId"], file_name=meta["fileName"], file_size=meta["fileSize"],
            sha=meta["sha"], media_prefix=meta["mediaPrefix"], protocol=meta.get("protocol", CHUNKS_PROTOCOL),
            upload_metadata=meta.get("uploadMetadata"), total_chunks=meta["totalChunks"], format=meta["format"],
            state=StreamState(meta["state"]), path=meta["path"])


class StreamStatus(NamedTuple):
    """What a store holds of a live stream."""
    record: StreamRecord
    chunks: dict[int, int]  # {chunk index: size} of the chunks held (a chunk stream's, while open)
    offset: int | None  # the bytes committed (a tus upload's)
    expires_at: float  # POSIX seconds: when it expires if left idle


class Outcome(enum.Enum):
    """What a write to a stream (a chunk, a tus PATCH body) did."""
    STORED = "stored"  # kept; the stream stays open
    COMPLETED = "completed"  # this request completed the stream: its file is verified and published
    ALREADY_COMPLETE = "already complete"  # the stream was complete before it came (a retry)


class StreamWrite(NamedTuple):
    outcome: Outcome
    path: str | None = None  # the media path, once complete
    offset: int | None = None  # a tus upload's committed offset


class Incoming(Protocol):
    """A request body being received for a store (a chunk, a single upload): written as it arrives, its size and first
    bytes known as it goes."""
    size: int
    head: bytes

    def write(self, data) -> int: ...

    def discard(self) -> None:
        """Remove what was received, unless the store took it."""


class Chunk(NamedTuple):
    """A chunk of the chunk API: its index, the stream's chunk count as the request states it, and its bytes."""
    index: int
    total: int
    file: Incoming


class TusBody(Protocol):
    """A tus PATCH body being received past a tus upload's committed `offset`."""
    offset: int
    size: int

    def write(self, data) -> None: ...

    def upload_head(self, size) -> bytes:
        """The first `size` bytes of the upload: committed ones, then this body's."""

    def commit(self) -> None:
        """Make what this body received so far part of the upload now, its `offset` moving on and `size` starting from
        0 (CONTRACT 13: a long PATCH committed in parts, so a crash keeps them); a no-op on a store that commits a
        body only when it ends. The caller has checked what arrived."""


class CompletionRules(Protocol):
    """What the domain decides when a stream's file is whole; the store asks under the stream's lock."""

    def verify(self, record: StreamRecord, size: int, sha256: str, head: bytes) -> str:
        """The media path to publish the file at (`size` bytes, hex `sha256`, its first bytes `head`); a ServiceError
        refuses the file, and the store discards the stream (it cannot be repaired)."""


class ChunkRules(CompletionRules, Protocol):
    """What the domain decides about each chunk; the store asks under the stream's lock."""

    def admit(self, record: StreamRecord, chunk: Chunk, held: dict[int, int]) -> StreamRecord:
        """The stream's record with `chunk` taken in (its chunk count; at chunk 0 the sniffed format), given the sizes
        of the chunks `held` so far; a ServiceError refuses the chunk and nothing changes."""


@runtime_checkable
class StreamStore(Protocol):
    """Upload streams of every org (chunk streams and tus uploads); one idle for longer than `ttl_seconds` is gone,
    and an org has at most `max_open` open at once."""
    ttl_seconds: float
    max_open: int

    def create(self, org: str, record: StreamRecord) -> str:
        """A new stream; its server-made id. TooManyStreams when the org has `max_open` streams open: the count and the
        creation are one step for every worker and node."""

    def read(self, org: str, stream_id: str) -> StreamRecord | None:
        """The record of a live stream, or None (unknown, malformed id, another org's, expired)."""

    def status(self, org: str, stream_id: str) -> StreamStatus: ...

    def new_incoming(self, org: str, stream_id: str, head_size: int, index: int | None = None) -> Incoming:
        """Where chunk `index` (None: not known while it arrives) is received."""

    def add_chunk(self, org: str, stream_id: str, chunk: Chunk, rules: ChunkRules) -> StreamWrite: ...

    def append_tus(self, org: str, stream_id: str, receive: Callable[[TusBody], None], rules: CompletionRules,
                   lock_timeout: float) -> StreamWrite: ...

    def delete(self, org: str, stream_id: str) -> bool: ...

    def expiry_from_now(self) -> float:
        """When a stream active now expires if left idle (POSIX seconds)."""

    def open_ids(self, org: str) -> list[str]:
        """Ids of an org's open streams."""

    def open_count(self) -> int | None:
        """How many streams of every org were open when the last sweep counted them, without an engine call (it is
        read at every scrape of /metrics): the file backend's last sweep by any worker (0 before any), the shared
        backend's last sweep in this process (None before one)."""

    def sweep(self) -> int:
        """Remove the streams idle past their expiry, and count the open ones (open_count); how many were removed."""
