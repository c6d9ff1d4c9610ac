"""The storage contract: what both backends (service.storage.files, service.storage.shared) offer, and the values
they exchange with the layers above. Each backend is a package that imports this module, never the other backend;
nothing above service.storage knows which one it talks to.
"""
import re
import secrets
from datetime import datetime, timezone
from typing import BinaryIO, NamedTuple

# -- documents --------------------------------------------------------------------------------------------------------

# The fields the store writes into every document, last and in this order: a client's values for them are dropped.
DOCUMENT_META_FIELDS = ("createdAt", "updatedAt", "revision")


def utc_timestamp():
    """Now, as createdAt and updatedAt hold it: UTC to the millisecond, `2024-05-01T12:00:00.123Z` (the shared
    backend's database makes the same format)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- media ------------------------------------------------------------------------------------------------------------

# The folder of each kind of media, in a data directory and in the bucket. Part of the stored layout (backups rely on
# it), so it is spelled here and does not follow the media paths of the API should those ever change.
MEDIA_FOLDERS = {"image": "images", "video": "videos"}


class OpenMedia(NamedTuple):
    """A published media file opened to be served."""
    file: BinaryIO  # read-only and seekable; closing it releases what reading holds (a file, a GET)
    size: int
    etag: str  # strong (unquoted): another value whenever the bytes differ
    last_modified: float  # POSIX seconds


# -- streams ----------------------------------------------------------------------------------------------------------

# A stream id is made by the server: 32 hex digits, safe as a file name and an object key.
STREAM_ID = re.compile(r"[0-9a-f]{32}")


def new_stream_id():
    return secrets.token_hex(16)
