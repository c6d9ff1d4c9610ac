"""The deduplication index of an org's media on the file backend (CONTRACT 10): which media name holds given bytes
under a given cleaned name (contract.MediaIdentity).

`<data>/orgs/<org>/media/.same/<images|videos>/<cleaned name>/<sha256>` holds the media name that has those bytes. An
entry is written after its media file is linked and durable, without an fsync of its own (disk.write_unsynced): a
crash can only lose it, which costs one duplicate upload, never make it name other bytes. An entry whose media was
deleted since (`wis gc --delete`) stays: it says which path those bytes had, so that uploading them again can publish
them there again.

Media put in place without an entry (by a version before the index, or by a restore of test mode) are hashed once per
cleaned name, the first time an upload of that name asks. To know which names have such media without listing the
folder for every new name, the first upload into a folder lists it once (`.listed`): each cleaned name that has media
without entries gets an `.earlier` file naming them. (Names the version before the listing marked `.built` had theirs
hashed already.) An upload of a name never seen costs no listing, however many media the folder holds.
"""
import contextlib
import os

from service.errors import disk_errors
from service.interface import FORMATS
from service.interface.checksums import file_sha256
from service.storage.common.disk import lock, write_unsynced

SAME = ".same"
LISTED, EARLIER, BUILT = ".listed", ".earlier", ".built"
# What a cleaned name ends with: the extension of a sniffed format. Anything else in a media folder is no upload's.
EXTENSIONS = tuple(fmt.extension for fmt in FORMATS.values())


class MediaIndex:
    """The deduplication index of the media under one org's `media_root`."""

    def __init__(self, media_root):
        self._media_root = media_root
        self._root = media_root / SAME

    def locked(self, identity):
        """The lock of an identity's entry: held from looking it up to writing it, so two identical uploads at once
        end with one path."""
        return lock(self._name_folder(identity))

    def recorded(self, identity):
        """The media name the index holds for the bytes of `identity` (with its lock held), or None."""
        self._index_earlier_media(identity)
        try:
            with disk_errors():
                return (self._name_folder(identity) / identity.sha256).read_text()
        except FileNotFoundError:
            return None

    def record(self, identity, name):
        """Remember that the media `name` (linked and durable) holds the bytes of `identity`."""
        folder = self._name_folder(identity)
        with disk_errors():
            folder.mkdir(parents=True, exist_ok=True)
        write_unsynced(folder / identity.sha256, name.encode())

    def _name_folder(self, identity):
        return self._root / identity.folder / identity.name

    def _index_earlier_media(self, identity):
        """Hash the media of that name the folder's listing found without entries, once."""
        if not (self._root / identity.folder / LISTED).exists():
            self._list_folder(identity.folder)
        earlier = self._name_folder(identity) / EARLIER
        try:
            with disk_errors():
                names = earlier.read_text().split()
        except FileNotFoundError:
            return
        folder = self._media_root / identity.folder
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                entry = self._name_folder(identity) / file_sha256(folder / name)
                if not entry.exists():
                    write_unsynced(entry, name.encode())
        with disk_errors():
            os.unlink(earlier)

    def _list_folder(self, folder_name):
        """List a media folder once: an `.earlier` file for each cleaned name that has media without entries."""
        index = self._root / folder_name
        with lock(index):
            if (index / LISTED).exists():
                return
            by_name = {}
            with disk_errors():
                try:
                    with os.scandir(self._media_root / folder_name) as entries:
                        for entry in entries:
                            prefix, _, name = entry.name.partition("-")
                            if prefix and name.endswith(EXTENSIONS) and not name.startswith(".") and entry.is_file():
                                by_name.setdefault(name, []).append(entry.name)
                except FileNotFoundError:
                    pass
                for name, media in by_name.items():
                    if not (index / name / BUILT).exists():
                        (index / name).mkdir(parents=True, exist_ok=True)
                        write_unsynced(index / name / EARLIER, "\n".join(sorted(media)).encode())
                index.mkdir(parents=True, exist_ok=True)
            write_unsynced(index / LISTED, b"")
