"""The repository: every store of the service, split by who calls what. The views, resolvers and domain use the
stores (`Stores`); the server's own upkeep, health and metrics use `Operations`; the test double's endpoints use
`TestModeState`. A repository of either backend is all three (`Repository`)."""
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ContextManager, Protocol, runtime_checkable

from service.storage.contract.documents import DocumentStore, StagedDocument
from service.storage.contract.events import EventStore
from service.storage.contract.media import MediaStore, StagedMedia
from service.storage.contract.streams import StreamStore
from service.storage.contract.tokens import TokenStore
from service.storage.contract.webhooks import WebhookStore
from service.storage.testmode.faults import FaultStore
from service.storage.testmode.journal_store import JournalStore


class Counter(Protocol):
    """A count every worker (and node) of a deployment shares."""

    def next(self) -> int:
        """The count after adding one."""

    def reset(self) -> None: ...


class Stores(Protocol):
    """What the views, resolvers and domain hand each other: the stores of documents, media, upload streams, change
    events, webhooks and API tokens."""
    documents: DocumentStore
    media: MediaStore
    streams: StreamStore
    events: EventStore
    webhooks: WebhookStore
    tokens: TokenStore
    new_hex: Callable[[int], str]  # the source of the names the server makes up: random, or seeded in test mode

    def orgs(self) -> list[str]:
        """Every org that has stored something, sorted."""


class Operations(Protocol):
    """The server's own upkeep and health: sweeping, readiness, the engines' state for the metrics, the session key."""

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


class TestModeState(Protocol):
    """What the test double's endpoints (/_test/) read and replace: faults, the request journal, the count of
    made-up names, and the whole state at once."""
    faults: FaultStore  # the same class on both backends
    journal: JournalStore  # the request journal of this node: the same class on both backends
    names_counter: Counter  # the count of made-up names (service.storage.testmode.fresh_names)

    def reset(self) -> None:
        """Remove every org's documents, media, streams, events and webhooks, every pending fault and the request
        journal, and count made-up names from the start again."""

    def staging_directory(self) -> ContextManager[Path]:
        """A new, empty directory on the filesystem of this node's stored files, removed with what is left in it when
        the block ends: where a new state is received before replace_state takes it."""

    def replace_state(self, documents: Iterable[StagedDocument], media: Iterable[StagedMedia]) -> None:
        """Make these documents and media the whole state, as reset() then storing them would, but at once: every
        document is revision 1 (CREATED now, no other history), every media path is kept and created now; streams,
        webhooks, pending faults and the request journal are gone and made-up names count from the start again. Two
        replacements on one node never overlap."""


@runtime_checkable
class Repository(Stores, Operations, TestModeState, Protocol):
    """A backend's repository: every store, its operations and its test-mode state (FileRepository,
    SharedRepository)."""
