"""The storage contract of media: how a store keeps the org's uploaded images and videos, and the values it
answers."""
from collections.abc import Iterable
from typing import BinaryIO, NamedTuple, Protocol, runtime_checkable

from service.interface import parse_media_path
from service.storage.contract.streams import Incoming

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


class StagedMedia(NamedTuple):
    """Media of a new state, received into a staging directory and verified."""
    org: str
    path: str  # its media path, kept as it is
    file: str  # the local file holding its bytes; replace_state may move it
    size: int
    sha256: str  # lower-case hex


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
