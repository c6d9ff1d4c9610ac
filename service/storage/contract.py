"""The storage contract: what both backends (service.storage.files, service.storage.shared) offer, and the values
they exchange with the layers above. Each backend is a package that imports this module, never the other backend;
nothing above service.storage knows which one it talks to, and the layers above call only what the Protocols at the
end of this module name (tests/test_storage_contract.py checks both backends against them).
"""
import dataclasses
import enum
import re
from datetime import datetime, timezone
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, ContextManager, NamedTuple, Protocol, TypeVar, runtime_checkable

from service.errors import RevisionConflict
from service.interface import CHUNKS_PROTOCOL, TUS_PROTOCOL, parse_media_path
from service.storage.testmode.faults import FaultStore
from service.storage.testmode.journal_store import JournalStore

# -- documents --------------------------------------------------------------------------------------------------------

# The fields the store writes into every document, last and in this order: a client's values for them are dropped.
DOCUMENT_META_FIELDS = ("createdAt", "updatedAt", "revision")


def utc_timestamp():
    """Now, as createdAt and updatedAt hold it: UTC to the millisecond, `2024-05-01T12:00:00.123Z` (the shared
    backend's database makes the same format)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# The changes a revision records (GraphQL's enum Change).
CREATED, UPDATED, DELETED, RESTORED = "CREATED", "UPDATED", "DELETED", "RESTORED"
# Past revisions kept per object when WIS_HISTORY_REVISIONS is unset; 0 keeps all.
DEFAULT_HISTORY_REVISIONS = 100


class Saved(NamedTuple):
    """What a save did (or, in a dry run, would do)."""
    document: dict  # as stored: the body, then createdAt, updatedAt, revision
    created: bool  # no current document was there (never was, or deleted)
    changed: bool  # False: the body equals the stored one, nothing was stored


class Revision(NamedTuple):
    """One entry of an object's history."""
    revision: int
    saved_at: str
    change: str  # CREATED, UPDATED, DELETED or RESTORED


def without_meta(document):
    """The body of a stored document: every field but the metadata the store writes."""
    return {key: value for key, value in document.items() if key not in DOCUMENT_META_FIELDS}


def check_revision(kind, identifier, if_revision, current):
    """RevisionConflict unless `if_revision` is None or the stored revision `current` (0: absent)."""
    if if_revision is not None and if_revision != current:
        raise RevisionConflict(kind, identifier, if_revision, current)


def oldest_kept(newest, keep):
    """The oldest revision number a history keeps once `newest` is stored (revision numbers have no gaps)."""
    return max(1, newest - keep + 1) if keep else 1


# -- media ------------------------------------------------------------------------------------------------------------

# The folder of each kind of media, in a data directory and in the bucket. Part of the stored layout (backups rely on
# it), so it is spelled here and does not follow the media paths of the API should those ever change.
MEDIA_FOLDERS = {"image": "images", "video": "videos"}


class MediaIdentity(NamedTuple):
    """What makes two uploads the same media (CONTRACT 10): the org's media of one folder with the same cleaned file
    name and the same bytes. The cleaned name ends in the extension of the sniffed format, and the destinations that
    share a folder accept formats of their own (stepVideo MP4, stepVideoGif GIF), so folder and name tell the
    destination: this is deduplication by destination."""
    folder: str  # MEDIA_FOLDERS[kind]
    name: str  # the media name without its unique prefix: `step1.png` of `/api/v1/images/0123456789abcdef-step1.png`
    size: int
    sha256: str  # lower-case hex

    @property
    def folder_name(self):
        """`images/step1.png`: the folder and the cleaned name, as the stores index them."""
        return f"{self.folder}/{self.name}"

    @classmethod
    def of(cls, path, size, sha256):
        """The identity of media at `path` with these bytes, or None for a path whose name has no unique prefix (it
        is then never deduplicated). A media name is `<prefix>-<cleaned name>` and the prefix holds no `-`."""
        parsed = parse_media_path(path)
        if parsed is None:
            return None
        prefix, _, name = parsed[1].partition("-")
        if not prefix or not name:
            return None
        return cls(MEDIA_FOLDERS[parsed[0]], name, size, sha256.lower())


class OpenMedia(NamedTuple):
    """A published media file opened to be served."""
    file: BinaryIO  # read-only and seekable; closing it releases what reading holds (a file, a GET)
    size: int
    etag: str  # strong (unquoted): another value whenever the bytes differ
    last_modified: float  # POSIX seconds


# -- streams ----------------------------------------------------------------------------------------------------------

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


# -- a whole new state (test mode's snapshots) -------------------------------------------------------------------------

class StagedDocument(NamedTuple):
    """A document of a new state, received into a staging directory."""
    org: str
    kind: str
    identifier: str
    body: bytes  # the document's body as JSON (its input: no metadata)


class StagedMedia(NamedTuple):
    """Media of a new state, received into a staging directory and verified."""
    org: str
    path: str  # its media path, kept as it is
    file: str  # the local file holding its bytes; replace_state may move it
    size: int
    sha256: str  # lower-case hex


# -- the stores -------------------------------------------------------------------------------------------------------

class DocumentView(Protocol):
    """What a guard of a write reads, under the write's locks (service.storage.contract.DocumentStore.save)."""

    def existing(self, org: str, kind: str, identifiers: Iterable[str]) -> set[str]:
        """The ids among `identifiers` that the org has stored of `kind`."""

    def each(self, org: str, kind: str) -> Iterator[dict]:
        """Every stored document of a kind."""

    def existing_media(self, org: str, paths: Iterable[str]) -> set[str]:
        """The media paths among `paths` that the org has published (as MediaStore.existing), read under the write's
        locks: a process write naming media checks them here, so `wis gc --delete` cannot remove one in between."""


# A check run under the org's references lock before a write (a product naming processes, a process deleted while
# products name it): it raises a ServiceError to refuse the write. Two guarded writes of one org never overlap, on any
# worker or node, so what a guard saw still holds when its write commits.
Guard = Callable[[DocumentView], None]
# What an action run under the references lock answers (DocumentStore.with_references_locked).
T = TypeVar("T")


@runtime_checkable
class DocumentStore(DocumentView, Protocol):
    """JSON documents of every org, one per (kind, id), with the metadata fields the store writes (createdAt,
    updatedAt, revision: each change adds 1), and the history of each: every change kept as a revision, the oldest
    pruned past `history_revisions` (0 keeps all) by the write that adds one."""
    history_revisions: int

    def get(self, org: str, kind: str, identifier: str) -> dict | None: ...

    def save(self, org: str, kind: str, identifier: str, body: dict, *, restored: bool = False,
             if_revision: int | None = None, dry_run: bool = False, guard: Guard | None = None) -> Saved:
        """Store `body` as the whole document, as a new revision (RESTORED when `restored`, else CREATED or UPDATED),
        unless it equals the stored body (then nothing is stored). In order: `guard`, then `if_revision` (the stored
        revision must be it, 0 for none: RevisionConflict), then the comparison. A dry run stores nothing and answers
        what the write would."""

    def delete(self, org: str, kind: str, identifier: str, *, if_revision: int | None = None, dry_run: bool = False,
               guard: Guard | None = None) -> int:
        """Remove the current document, adding a DELETED revision (its number is answered); the history stays and a
        later save continues its numbers. ObjectNotFound when there is none; then `if_revision`, then `guard`."""

    def history(self, org: str, kind: str, identifier: str, first: int, after: int | None = None) -> list[Revision]:
        """Up to `first` revisions, newest first, older than `after` when given; [] for an unknown id."""

    def revision(self, org: str, kind: str, identifier: str, revision: int) -> dict | None:
        """The document as revision `revision` stored it; None when it is unknown, pruned, or a deletion."""

    def kinds(self, org: str) -> list[str]: ...

    def ids(self, org: str, kind: str) -> list[str]:
        """Every id of a kind, in byte order."""

    def names(self, org: str, kind: str) -> list[tuple[str, str]]:
        """(id, name) of every object of a kind, in id order, without reading whole documents (a search by name)."""

    def page(self, org: str, kind: str, first: int, after: str | None = None) -> Iterator[dict]:
        """Up to `first` documents with ids after `after`, in id order, read as the caller takes them."""

    def with_references_locked(self, org: str, action: Callable[[DocumentView], T]) -> T:
        """Run `action` under the org's references lock, the lock guarded writes take, and answer what it answers: no
        guarded write of the org runs meanwhile, on any worker or node (`wis gc --delete` deletes media there)."""


@runtime_checkable
class MediaStore(Protocol):
    """Published media of every org: whole, verified files at media paths, never replaced."""

    def exists(self, org: str, path: str) -> bool: ...

    def existing(self, org: str, paths: Iterable[str]) -> set[str]:
        """The media paths among `paths` that the org has published."""

    def open(self, org: str, path: str) -> OpenMedia | None: ...

    def list_media(self, org: str) -> list[tuple[str, float]]:
        """(media path, creation time) of each of an org's media."""

    def delete(self, org: str, path: str) -> bool: ...

    def new_incoming(self, org: str, head_size: int) -> Incoming:
        """Where a single upload is received (with `.path` and `.finish()` for `publish`)."""

    def publish(self, org: str, path: str, source, sha256: str) -> str | None:
        """Make the whole local file `source` (whose SHA-256 is `sha256`) the media at `path`, unless the org has media
        of the same MediaIdentity: then store nothing and answer that media's path (its age starts again, so garbage
        collection spares it). The path that now holds the bytes; None, storing nothing, if `path` is taken. Two
        identical uploads at once end with one path."""

    def unpublish(self, org: str, path: str) -> None:
        """Take back media whose publishing request failed (best effort)."""


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


class Counter(Protocol):
    """A count every worker (and node) of a deployment shares."""

    def next(self) -> int:
        """The count after adding one."""

    def reset(self) -> None: ...


@runtime_checkable
class Repository(Protocol):
    """Every store of the service: what views and resolvers hand to the domain."""
    documents: DocumentStore
    media: MediaStore
    streams: StreamStore
    faults: FaultStore  # the test-mode faults: the same class on both backends
    journal: JournalStore  # the test-mode request journal of this node: the same class on both backends
    names_counter: "Counter"  # test mode's count of made-up names (service.storage.testmode.fresh_names)
    new_hex: Callable[[int], str]  # the source of the names the server makes up: random, or seeded in test mode

    def orgs(self) -> list[str]:
        """Every org that has stored something, sorted."""

    def sweep(self) -> int:
        """Remove expired streams and the leftovers of killed workers; how many streams."""

    def sweep_due(self) -> bool:
        """True for exactly one caller once a sweep interval has passed."""

    def engine_stats(self) -> dict[str, int]:
        """This process's connection pool and circuit (shared backend: pool_size, pool_available, requests_waiting,
        down, outages), from memory; {} where there is none."""

    def check_ready(self) -> dict[str, str | None]:
        """{engine: None, or its problem} of each engine the backend needs: `database` (documents; the node is not
        ready without it) and `objects` (media and uploads bytes; the node still serves documents without it)."""

    def secret_key(self) -> str:
        """The key that signs session cookies when WIS_SECRET_KEY is unset: made once for every worker and node."""

    def close(self) -> None: ...

    def reset(self) -> None:
        """Remove every org's documents, media and streams, every pending fault and the request journal, and count
        made-up names from the start again (test mode)."""

    def staging_directory(self) -> ContextManager[Path]:
        """A new, empty directory on the filesystem of this node's stored files, removed with what is left in it when
        the block ends: where a new state is received before replace_state takes it (test mode)."""

    def replace_state(self, documents: Iterable[StagedDocument], media: Iterable[StagedMedia]) -> None:
        """Make these documents and media the whole state, as reset() then storing them would, but at once: every
        document is revision 1 (CREATED now, no other history), every media path is kept and created now; streams,
        pending faults and the request journal are gone and made-up names count from the start again (test mode).
        Two replacements on one node never overlap."""
