"""The storage's failures, from the disk or an engine: the server's fault, never the client's, answered 503 or 507
with nothing stored (part of the one exception family of service.errors, which re-exports each)."""
import contextlib
import errno

from service.errors import ServiceError


class StorageFull(ServiceError):
    code = "storage_full"
    message = "the server has no space left to store this request; nothing was stored"


class StorageFailed(ServiceError):
    code = "storage_failed"
    # Which engine failed and how, for the metrics (wis_engine_errors_total): set where the failure is seen.
    engine = "disk"
    kind = "failed"
    message = ("the server's storage failed (I/O error) while handling this request; "
               "it did not take effect, try again later")


NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
# A failing disk, or a filesystem the kernel remounted read-only after errors: the server's fault, worth a retry.
IO_FAILURE = {errno.EIO, errno.EROFS}


@contextlib.contextmanager
def disk_errors():
    """Turn 'disk full' into StorageFull (507) and an I/O error into StorageFailed (503): clear JSON, not a 500."""
    try:
        yield
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise StorageFull() from exc
        if exc.errno in IO_FAILURE:
            raise StorageFailed() from exc
        raise


class StorageBusy(StorageFailed):
    """A file lock another request held for longer than this one waits (a stuck writer): nothing was changed."""
    code = "storage_busy"
    message = ("another request has held this object's lock for too long; this request did not take effect, "
               "try again later")


class DatabaseUnavailable(StorageFailed):
    """The shared backend's PostgreSQL database does not answer (stopped, unreachable, out of connections)."""
    code = "database_unavailable"
    engine = "database"
    # "down": refused at once, the database being known down; "lost": a connection failed during the call;
    # "busy": no pooled connection was free within WIS_DB_POOL_WAIT_SECONDS.
    kind = "lost"
    message = ("the database (PostgreSQL) is unavailable; this request did not take effect, "
               "try again when it is back")


class ObjectStoreUnavailable(StorageFailed):
    """The shared backend's S3-compatible object store does not answer, or fails."""
    code = "object_store_unavailable"
    engine = "objects"
    # "unreachable": no answer (connection refused, timed out); "failed": the store answered with an error.
    kind = "unreachable"
    message = ("the object store (S3) is unavailable; this request did not take effect, "
               "try again when it is back")
