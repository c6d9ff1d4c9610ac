"""The storage contract as code: what both backends (service.storage.files, service.storage.shared) offer, and the
values they exchange with the layers above, one module a kind of store (documents, events, media, streams, tokens)
and the repository that holds them, split by who calls what (repository.py). Each backend is a package that imports
the contract, never the other backend; nothing above service.storage knows which one it talks to, and the layers above
call only what the Protocols name (tests/storage/test_storage_contract.py checks both backends against them).
"""
from service.storage.contract.documents import (  # noqa: F401 (the contract's names, from one place)
    CREATED, DEFAULT_HISTORY_REVISIONS, DELETED, DOCUMENT_META_FIELDS, NOBODY, RESTORED, UPDATED, Attribution,
    DocumentStore, DocumentView, Revision, Saved, StagedDocument, check_revision, oldest_kept, utc_timestamp,
    without_meta)
from service.storage.contract.events import (  # noqa: F401
    DEFAULT_EVENTS_RETENTION, CommitWatcher, Event, EventBounds, EventStore, NewEvent)
from service.storage.contract.media import (  # noqa: F401
    MEDIA_FOLDERS, MediaIdentity, MediaStore, OpenMedia, StagedMedia)
from service.storage.contract.repository import (  # noqa: F401
    Counter, Operations, Repository, Stores, TestModeState)
from service.storage.contract.webhooks import (  # noqa: F401
    FAILING, GONE, Claim, Delivery, DeliveryState, DispatchRules, AttemptOutcome, Subscription, SubscriptionSettings,
    WebhookStore, iso_of)
from service.storage.contract.tokens import StoredToken, TokenStore  # noqa: F401
from service.storage.contract.streams import (  # noqa: F401
    STREAM_ID, Chunk, ChunkRules, CompletionRules, Incoming, Outcome, StreamRecord, StreamState, StreamStatus,
    StreamStore, StreamWrite, TusBody)
