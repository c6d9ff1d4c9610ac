"""The deduplication index of an org's media on the file backend (CONTRACT 10): which media name holds given bytes
under a given cleaned name (contract.MediaIdentity).

`<data>/orgs/<org>/media/.same/<images|videos>/<cleaned name>/<sha256>` holds the media name that has those bytes. An
entry is written after its media file is linked and durable, without an fsync of its own (disk.write_unsynced): a
crash can only lose it, which costs one duplicate upload, never make it name other bytes. An entry whose media was
deleted since (`wis gc --delete`) stays: it says which path those bytes had, so that uploading them again can publish
them there again.

Media put in place without an entry (by a version before the index, or by a restore of test mode) are hashed once per
cleaned name, the first time an upload of that name asks; `.built` in the name's folder marks it done. Which media a
name has is not found by listing the folder for every upload of a new name: the first upload into a folder lists it
once (`.listed`) into `.earlier/<bucket>` files, each naming the media of the cleaned names that hash to that bucket,
so that a name's lookup reads one small file, however many media the folder holds.
"""
import contextlib
import os
import zlib

from service.errors import disk_errors
from service.interface import MEDIA_NAME
from service.interface.checksums import file_sha256
from service.storage.common.disk import lock, write_unsynced

SAME = ".same"
LISTED, EARLIER, BUILT = ".listed", ".earlier", ".built"
# The listing of a folder of 100,000 media is about 400 lines a bucket.
BUCKETS = 256


def _bucket(name):
    return f"{zlib.crc32(name.encode()) % BUCKETS:02x}"


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
        """Hash the media of that name that the folder's listing found, once."""
        index = self._root / identity.folder
        if not (index / LISTED).exists():
            self._list_folder(identity.folder)
        folder = self._name_folder(identity)
        if (folder / BUILT).exists():
            return
        try:
            with disk_errors():
                listed = (index / EARLIER / _bucket(identity.name)).read_text().splitlines()
        except FileNotFoundError:
            return
        earlier = [media for name, _, media in (line.partition("\t") for line in listed) if name == identity.name]
        if not earlier:
            return
        with disk_errors():
            folder.mkdir(parents=True, exist_ok=True)
        for media in earlier:
            with contextlib.suppress(FileNotFoundError):
                entry = folder / file_sha256(self._media_root / identity.folder / media)
                if not entry.exists():
                    write_unsynced(entry, media.encode())
        write_unsynced(folder / BUILT, b"")

    def _list_folder(self, folder_name):
        """List a media folder once into `.earlier/<bucket>` files: `<cleaned name>\\t<media name>` lines."""
        index = self._root / folder_name
        with lock(index):
            if (index / LISTED).exists():
                return
            buckets = {}
            with disk_errors():
                try:
                    with os.scandir(self._media_root / folder_name) as entries:
                        for entry in entries:
                            prefix, _, name = entry.name.partition("-")
                            if prefix and name and MEDIA_NAME.fullmatch(entry.name) and entry.is_file():
                                buckets.setdefault(_bucket(name), []).append(f"{name}\t{entry.name}")
                except FileNotFoundError:
                    pass
                (index / EARLIER).mkdir(parents=True, exist_ok=True)
            for bucket, lines in buckets.items():
                write_unsynced(index / EARLIER / bucket, "\n".join(sorted(lines)).encode())
            write_unsynced(index / LISTED, b"")
