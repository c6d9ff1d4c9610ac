"""The one exception family of the service: each error is named after its condition and has a stable `code`.

One table (RESPONSES) maps each code to its HTTP status and to its GraphQL error code; the upload error handler
(service.web.error_handlers) and the GraphQL error formatter (service.web.graphql.errors) both read it. Nothing here imports
Flask, so the domain and storage layers raise these freely.
"""
from service.interface import TOKEN_HEADER, TOKEN_HEADER_ALIAS

# code: (HTTP status, GraphQL extensions.code)
RESPONSES = {
    "invalid_request": (400, "BAD_REQUEST"),
    "body_cut_off": (400, "BAD_REQUEST"),
    "malformed_body": (400, "BAD_REQUEST"),
    "invalid_input": (400, "BAD_USER_INPUT"),
    "unknown_destination": (400, "BAD_REQUEST"),
    "wrong_format": (400, "BAD_REQUEST"),
    "checksum_mismatch": (400, "BAD_REQUEST"),
    "size_mismatch": (400, "BAD_REQUEST"),
    "invalid_chunk": (400, "BAD_REQUEST"),
    "invalid_snapshot": (400, "BAD_REQUEST"),
    "unauthenticated": (401, "UNAUTHENTICATED"),
    "forbidden": (403, "FORBIDDEN"),
    "unsupported_checksum": (400, "BAD_REQUEST"),
    "stream_not_found": (404, "NOT_FOUND"),
    "media_not_found": (404, "NOT_FOUND"),
    "object_not_found": (404, "NOT_FOUND"),
    "revision_not_found": (404, "NOT_FOUND"),
    "subscription_not_found": (404, "NOT_FOUND"),
    "delivery_not_found": (404, "NOT_FOUND"),
    "subscription_disabled": (409, "CONFLICT"),
    "token_not_found": (404, "NOT_FOUND"),
    "revision_conflict": (409, "CONFLICT"),
    "events_expired": (410, "EVENTS_EXPIRED"),
    "process_in_use": (409, "CONFLICT"),
    "token_name_taken": (409, "CONFLICT"),
    "offset_mismatch": (409, "CONFLICT"),
    "wrong_protocol": (409, "CONFLICT"),
    "tus_version_unsupported": (412, "PRECONDITION_FAILED"),
    "file_too_large": (413, "PAYLOAD_TOO_LARGE"),
    "beyond_upload_length": (413, "PAYLOAD_TOO_LARGE"),
    "request_timeout": (408, "REQUEST_TIMEOUT"),
    "upload_locked": (423, "LOCKED"),
    "too_many_streams": (429, "TOO_MANY_STREAMS"),
    "body_checksum_mismatch": (460, "BAD_REQUEST"),
    "body_too_large": (413, "PAYLOAD_TOO_LARGE"),
    "event_streams_full": (503, "SERVICE_UNAVAILABLE"),
    "storage_failed": (503, "SERVICE_UNAVAILABLE"),
    "storage_busy": (503, "SERVICE_UNAVAILABLE"),
    "storage_full": (507, "INSUFFICIENT_STORAGE"),
    "database_unavailable": (503, "SERVICE_UNAVAILABLE"),
    "object_store_unavailable": (503, "SERVICE_UNAVAILABLE"),
    "response_too_large": (400, "RESPONSE_TOO_LARGE"),
    "read_too_large": (400, "RESPONSE_TOO_LARGE"),
    "unstorable_document": (500, "INTERNAL_SERVER_ERROR"),
    "internal_error": (500, "INTERNAL_SERVER_ERROR"),
}


def http_status(error):
    """The HTTP status that answers a ServiceError."""
    return RESPONSES[error.code][0]


def graphql_code(error):
    """The `extensions.code` of a ServiceError raised inside a GraphQL operation."""
    return RESPONSES[error.code][1]


class ConfigurationError(Exception):
    """A setting, the schema or a packaged file is unusable: the service cannot start. Only entry points (`wis`, the
    gunicorn config) turn it into a message and an exit code; an embedding test harness gets the exception."""


class ServiceError(Exception):
    code = "internal_error"
    message = "internal server error"
    # What a GraphQL error carries in `extensions` besides its code (the current revision of a conflict, say).
    extensions = {}
    # Seconds after which the request may succeed when sent again, answered as Retry-After; None: not said.
    retry_after = None

    def __init__(self, message=None):
        super().__init__(message or self.message)
        if message is not None:
            self.message = message


class InvalidRequest(ServiceError):
    """A field of the request is missing, unknown or malformed, or the body has the wrong content type."""
    code = "invalid_request"
    message = "bad request"


class MalformedBody(ServiceError):
    """The multipart body cannot be decoded: no boundary, not framed by it, cut short, too many parts."""
    code = "malformed_body"
    message = "the request body is malformed"


class InvalidSnapshot(ServiceError):
    """A snapshot archive sent to POST /_test/restore cannot be restored (truncated, another format, an entry outside
    its folders, contents that differ from its manifests); nothing was changed."""
    code = "invalid_snapshot"


class UnknownDestination(ServiceError):
    code = "unknown_destination"
    message = "destinationId: unknown destination"


class WrongFormat(ServiceError):
    """The file's sniffed format is not one its destination accepts."""
    code = "wrong_format"
    message = "file: not a format this destination accepts"


class ChecksumMismatch(ServiceError):
    """A file's or chunk's SHA-256 is not the one the client declared."""
    code = "checksum_mismatch"
    message = "sha: the SHA-256 does not match"


class SizeMismatch(ServiceError):
    """A stream's chunks do not add up to its declared fileSize."""
    code = "size_mismatch"
    message = "fileSize: the chunks do not add up to the declared size"


class InvalidChunk(ServiceError):
    """A chunk that does not fit its stream: index out of range, totalChunks changed, more bytes than fileSize."""
    code = "invalid_chunk"
    message = "the chunk does not fit its stream"


class Unauthenticated(ServiceError):
    code = "unauthenticated"
    message = (f"missing or unknown API token: send it in the {TOKEN_HEADER} header (or {TOKEN_HEADER_ALIAS}, the "
               "vendor's spelling)")


class Forbidden(ServiceError):
    """The request's token is known but its scope does not reach what the request does (CONTRACT 16): nothing was
    done. `scope` is the scope needed."""
    code = "forbidden"

    def __init__(self, doing, needed, name, scope):
        self.scope = needed
        self.extensions = {"scope": needed}
        super().__init__(f"{doing} needs a token of the {needed} scope; this token ({name!r}) has the {scope} scope, "
                         "so nothing was done (ask an administrator for a token of that scope: `wis token create`)")


class TokenNameTaken(ServiceError):
    """`wis token create` names a token its org has, or had: names are never given twice, so that an author in a
    history always means one token."""
    code = "token_name_taken"

    def __init__(self, org, name):
        super().__init__(f"name: org {org!r} has (or had: a revoked token keeps its name) a token named {name!r}; "
                         "choose another name")


class TokenNotFound(ServiceError):
    """`wis token revoke` names no token of the org that is still valid."""
    code = "token_not_found"

    def __init__(self, org, name):
        super().__init__(f"org {org!r} has no token named {name!r} to revoke (unknown, revoked already, or a token of "
                         "WIS_API_TOKENS, which is removed by editing that variable): `wis token list` shows them")


class StreamNotFound(ServiceError):
    """No such stream in the org: unknown, expired, deleted, or another org's."""
    code = "stream_not_found"
    message = "stream not found"


class MediaNotFound(ServiceError):
    code = "media_not_found"
    message = "media not found"


class FileTooLarge(ServiceError):
    """A file or chunk over its destination's or the per-request limit."""
    code = "file_too_large"
    message = "file is too large"


class RequestTimeout(ServiceError):
    """The request's head (and the start of its body) did not arrive in time: answered by the server's worker, before
    any view sees the request."""
    code = "request_timeout"
    message = "the request did not arrive in time"


class BodyTooLarge(ServiceError):
    """A request body or form field over its limit, whatever the file in it."""
    code = "body_too_large"
    message = "request body is too large"


class UnsupportedChecksum(ServiceError):
    """An Upload-Checksum with an algorithm this server does not compute, or not in `<algorithm> <base64>` form."""
    code = "unsupported_checksum"
    message = "Upload-Checksum: unsupported checksum algorithm"


class OffsetMismatch(ServiceError):
    """A tus PATCH whose Upload-Offset is not the upload's current offset: nothing is appended."""
    code = "offset_mismatch"
    message = "Upload-Offset: not the upload's current offset"


class WrongProtocol(ServiceError):
    """A tus request on a chunk stream, or a multipart chunk on a tus upload."""
    code = "wrong_protocol"
    message = "this stream speaks another upload protocol"


class TusVersionUnsupported(ServiceError):
    """A tus request without `Tus-Resumable: 1.0.0`."""
    code = "tus_version_unsupported"
    message = "Tus-Resumable: send Tus-Resumable: 1.0.0 (the only tus version this server speaks)"


class BeyondUploadLength(ServiceError):
    """A tus PATCH body that would take the upload past its Upload-Length: nothing is appended."""
    code = "beyond_upload_length"
    message = "the body goes past the upload's Upload-Length"


class BodyCutOff(InvalidRequest):
    """A tus body that ended before its Content-Length: what arrived is committed, the upload is at `offset`."""
    code = "body_cut_off"

    def __init__(self, message, offset):
        super().__init__(message)
        self.offset = offset


class UploadLocked(ServiceError):
    """Another PATCH on the same tus upload is still being received."""
    code = "upload_locked"
    message = "another PATCH on this upload is still in progress; retry after a HEAD"


class TooManyStreams(ServiceError):
    """An org with as many upload streams open as it may have (WIS_MAX_OPEN_STREAMS) asks for another."""
    code = "too_many_streams"
    message = "too many upload streams are open"

    def __init__(self, open_streams, limit, ttl_hours):
        super().__init__(
            f"this org has {open_streams} upload streams open and may have at most {limit} (WIS_MAX_OPEN_STREAMS): "
            "finish one, or end one it no longer needs with DELETE /uploads/<streamId>, or wait until an idle one "
            f"expires ({ttl_hours:g} hours after its last activity, WIS_STREAM_TTL_HOURS)")


class EventStreamsFull(ServiceError):
    """A worker that serves as many event streams as it may (WIS_EVENT_STREAMS_PER_WORKER), or one that is stopping, is
    asked for another: answered at once, with Retry-After."""
    code = "event_streams_full"
    # Seconds a client waits before it connects again (another worker, or this one once a stream ended, takes it).
    retry_after = 5

    def __init__(self, limit, stopping=False):
        if stopping:
            message = f"this worker is stopping: connect again in {self.retry_after} s"
        else:
            message = (f"this worker serves as many event streams as it may ({limit}, WIS_EVENT_STREAMS_PER_WORKER): "
                       f"connect again in {self.retry_after} s")
        super().__init__(message)


class BodyChecksumMismatch(ServiceError):
    """The PATCH body does not match its Upload-Checksum (tus checksum extension): nothing is appended."""
    code = "body_checksum_mismatch"
    message = "Upload-Checksum: the body does not match its checksum; nothing was appended"


class UnstorableDocument(ServiceError):
    """A document holds a number JSON cannot represent (infinity, NaN), which would be stored as null: a check above
    storage let it through. Nothing is stored; the message names the field."""
    code = "unstorable_document"
    message = "the document holds a number that cannot be stored; nothing was stored"


class ResponseTooLarge(ServiceError):
    """The answer being built went over the budget of one answer: the operation stops, nothing of it is answered."""
    code = "response_too_large"
    message = "the answer is larger than one answer may be"


class ReadTooLarge(ResponseTooLarge):
    """The request read more stored documents than one request may (service.storage.contract.read_budget): answered
    as an answer over its budget is, the operation stopped."""
    code = "read_too_large"


def _one(kind):
    """How a message names one object of a stored kind: 'processes' -> 'process'."""
    return {"processes": "process", "products": "product", "stations": "station"}.get(kind, kind)


class ObjectNotFound(ServiceError):
    """A delete or restore names a process, product or station the org does not have (unknown, or deleted)."""
    code = "object_not_found"

    def __init__(self, kind, identifier):
        super().__init__(f"no {_one(kind)} {identifier!r} exists in your org (unknown id, or deleted already)")


class RevisionNotFound(ServiceError):
    """A restore or a comparison names a revision the object's history does not hold (never made, pruned, or a
    deletion)."""
    code = "revision_not_found"

    def __init__(self, kind, identifier, revision, purpose="to restore"):
        super().__init__(f"{_one(kind)} {identifier!r} has no revision {revision} {purpose} (its history lists the "
                         "revisions it keeps; a deletion holds no content)")


class RevisionConflict(ServiceError):
    """`ifRevision` named another revision than the stored one: nothing was changed. `revision` is the stored one
    (0: the object does not exist)."""
    code = "revision_conflict"

    def __init__(self, kind, identifier, expected, current):
        self.extensions = {"revision": current}
        stored = f"is at revision {current}" if current else "does not exist"
        super().__init__(f"ifRevision: expected {_one(kind)} {identifier!r} at revision {expected}, but it {stored}; "
                         "nothing was changed (read it again, then decide)")


class ProcessInUse(ServiceError):
    """A process that products name (as final process or in a dependency) cannot be deleted."""
    code = "process_in_use"

    def __init__(self, identifier, products, named_in_message):
        self.extensions = {"products": list(products)}
        listed = ", ".join(map(repr, products[:named_in_message]))
        if len(products) > named_in_message:
            listed += f" and {len(products) - named_in_message} more (extensions.products lists them all)"
        super().__init__(f"process {identifier!r} is used by the products {listed}: change or delete them first; "
                         "nothing was deleted")


class EventsExpired(ServiceError):
    """A read of events after a seq whose successors were pruned (CONTRACT 14): the reader must read the state again."""
    code = "events_expired"

    def __init__(self, after, oldest):
        super().__init__(f"after: the events after {after} are no longer kept (the oldest kept is {oldest}); read the "
                         f"objects again, then follow the events from the latest seq")
        self.extensions = {"oldest": oldest}


class SubscriptionNotFound(ServiceError):
    """A webhook subscription id the org does not have (CONTRACT 15)."""
    code = "subscription_not_found"

    def __init__(self, subscription_id):
        shown = repr(subscription_id)
        if len(shown) > 80:  # any string may be asked for: say which, not the whole of a huge one
            shown = f"{shown[:70]}... ({len(shown) - 70:,} more characters)"
        super().__init__(f"subscriptionID: your org has no webhook subscription {shown} "
                         "(webhookSubscriptions lists them)")


class DeliveryNotFound(ServiceError):
    """A redelivery of an event the subscription's delivery log does not hold."""
    code = "delivery_not_found"

    def __init__(self, subscription_id, seq):
        super().__init__(f"seq: the delivery log of {subscription_id!r} holds no delivery of event {seq} (events "
                         "before the subscription, of other types, or no longer kept are not in it)")


class SubscriptionDisabled(ServiceError):
    """A redelivery on a disabled subscription: it sends nothing until it is subscribed again."""
    code = "subscription_disabled"

    def __init__(self, subscription_id, reason):
        super().__init__(f"subscriptionID: {subscription_id!r} is disabled ({reason}): subscribe again with "
                         "webhookSubscribe to enable it, then redeliver")


# The storage's failures live beside the family, one module of it; imported from service.errors like the rest.
from service.errors.storage import (  # noqa: E402,F401
    IO_FAILURE, NO_SPACE, DatabaseUnavailable, ObjectStoreUnavailable, StorageBusy, StorageFailed, StorageFull,
    disk_errors)
