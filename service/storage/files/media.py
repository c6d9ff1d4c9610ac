"""Uploaded media files: `<data>/orgs/<org>/media/<images|videos>/<name>`, one per media path.

The deduplication index (CONTRACT 10) is a folder per cleaned name, `<data>/orgs/<org>/media/.same/<images|videos>/
<cleaned name>/<sha256>`, each file holding the media name that has those bytes. An entry is written after its media
file is linked and fsynced, so it names an existing file unless that file was deleted since: such a dangling entry is
ignored and replaced. Media published before this index existed are hashed once per cleaned name, the first time an
upload of that name asks (`.built` marks a name done).
"""
import contextlib
import os

from service.errors import disk_errors
from service.interface.checksums import file_sha256
from service.interface import media_path, parse_media_path
from service.storage.contract import MEDIA_FOLDERS, MediaIdentity, OpenMedia
from service.storage.common.disk import TEMPORARY_PREFIX, TEMPORARY_SUFFIX, fsync_directory, lock
from service.storage.files.names import id_to_name
from service.storage.common.incoming import IncomingFile

# Single uploads are received here, beside the media they become, so publishing is a link, not a copy.
STAGING = ".incoming"
# The deduplication index, and the mark of a cleaned name whose earlier media are in it.
SAME = ".same"
BUILT = ".built"
KIND_BY_FOLDER = {folder: kind for kind, folder in MEDIA_FOLDERS.items()}


def write_entry(path, data):
    """Write an entry of the index whole (written aside, then renamed) but without fsync: it is written after the
    media it names is durable, so a crash can only lose it, never make it name a missing file, and a lost entry or
    mark costs one duplicate upload or one hashing of a name's media again, not four fsyncs per upload."""
    temporary = path.with_name(f"{TEMPORARY_PREFIX}{path.name}{TEMPORARY_SUFFIX}")
    with disk_errors():
        with open(temporary, "wb") as file:
            file.write(data)
        os.replace(temporary, path)


class FileMediaStore:
    """Every org's published media as files (service.storage.contract.MediaStore)."""

    def __init__(self, orgs_root):
        self.orgs_root = orgs_root

    def file_for(self, org, path):
        """The file behind a media path of an org, or None when the path is malformed."""
        parsed = parse_media_path(path)
        if parsed is None:
            return None
        kind, name = parsed
        return self._media_root(org) / MEDIA_FOLDERS[kind] / name

    def exists(self, org, path):
        """True when `path` names a whole, verified media file uploaded by `org`."""
        file = self.file_for(org, path)
        return file is not None and file.is_file()

    def existing(self, org, paths):
        """The media paths among `paths` that name whole, verified media files uploaded by `org`."""
        return {path for path in paths if self.exists(org, path)}

    def open(self, org, path):
        """The org's media file at `path` opened to be served (OpenMedia), or None when it has none there."""
        file = self.file_for(org, path)
        if file is None:
            return None
        try:
            with disk_errors():
                opened = open(file, "rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        status = os.fstat(opened.fileno())
        # A media file is written once and linked into place, never rewritten: its inode and modification time name
        # its bytes, without reading them.
        etag = f"{status.st_ino:x}-{status.st_mtime_ns:x}-{status.st_size:x}"
        return OpenMedia(opened, status.st_size, etag, status.st_mtime)

    def list_media(self, org):
        """(media path, last modification time) of every published media file of an org."""
        found = []
        for kind, folder in MEDIA_FOLDERS.items():
            try:
                with os.scandir(self._media_root(org) / folder) as entries:
                    for entry in entries:
                        path = media_path(kind, entry.name)
                        if entry.name.startswith(".") or parse_media_path(path) is None:
                            continue
                        with contextlib.suppress(FileNotFoundError):
                            if entry.is_file():
                                found.append((path, entry.stat().st_mtime))
            except FileNotFoundError:
                continue
        return found

    def delete(self, org, path):
        """Remove a published media file of an org; False when there was none."""
        file = self.file_for(org, path)
        if file is None:
            return False
        try:
            os.unlink(file)
        except FileNotFoundError:
            return False
        fsync_directory(file.parent)
        return True

    def load(self, org, path, source):
        """Move the local file `source` (on this filesystem) to `path`, in a tree that no request reads yet
        (FileRepository.replace_state builds one). The deduplication index of its name is built the first time an
        upload of that name asks, as for media published before the index existed."""
        target = self.file_for(org, path)
        with disk_errors():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)

    def _media_root(self, org):
        return self.orgs_root / id_to_name(org) / "media"

    def new_incoming(self, org, head_size):
        """A staging file for a single-request upload, on the same filesystem as the media it becomes."""
        staging = self._media_root(org) / STAGING
        with disk_errors():
            staging.mkdir(parents=True, exist_ok=True)
        return IncomingFile(staging, head_size)

    def publish(self, org, path, source, sha256):
        """Make the whole, fsynced file `source` (hex `sha256`) visible at `path`, unless the org has media of the same
        MediaIdentity: then link nothing and answer that media's path (its modification time, the age media garbage
        collection reads, starts again). The path that holds the bytes; None if `path` is taken by other bytes.

        The index of that identity is locked from the lookup to the entry's write, so two identical uploads at once end
        with one path."""
        identity = MediaIdentity.of(path, os.stat(source).st_size, sha256)
        if identity is None:
            return path if self._link(org, path, source) else None
        index = self._index_folder(org, identity)
        with lock(index):
            same = self._indexed(org, identity, index)
            if same is not None:
                with disk_errors():
                    os.utime(self.file_for(org, same))
                return same
            if not self._link(org, path, source):
                return None
            try:
                write_entry(index / identity.sha256, parse_media_path(path)[1].encode())
            except BaseException:
                self.unpublish(org, path)
                raise
        return path

    def _link(self, org, path, source):
        """Hard-link `source` to `path`; False if the path holds another file. A hard link never replaces an existing
        file and shows the name only once the file is complete, so a media path never names a partial file, whatever
        fails when. The path holding `source` already is a retry of a stream's completion: True."""
        target = self.file_for(org, path)
        with disk_errors():
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except FileExistsError:
                return os.path.samefile(source, target)
            try:
                fsync_directory(target.parent)
            except BaseException:
                # The request fails, so no client learns this path: the name goes, or it would be an orphan.
                self.unpublish(org, path)
                raise
        return True

    def _index_folder(self, org, identity):
        return self._media_root(org) / SAME / identity.folder / identity.name

    def _indexed(self, org, identity, index):
        """The path of the org's media of `identity` (the index locked), or None; a dangling entry counts as none."""
        if not (index / BUILT).exists():
            self._index_earlier_media(org, identity, index)
        try:
            with disk_errors():
                name = (index / identity.sha256).read_text()
        except FileNotFoundError:
            return None
        path = media_path(KIND_BY_FOLDER[identity.folder], name)
        file = self.file_for(org, path)
        try:
            if file is None or os.stat(file).st_size != identity.size:
                return None
        except FileNotFoundError:
            return None
        return path

    def _index_earlier_media(self, org, identity, index):
        """Hash the org's media of that folder and cleaned name that have no entry yet (uploaded before the index
        existed), once per cleaned name: the cost is that of reading those files once."""
        folder = self._media_root(org) / identity.folder
        with disk_errors():
            index.mkdir(parents=True, exist_ok=True)
            try:
                with os.scandir(folder) as entries:
                    names = [entry.name for entry in entries if entry.name.partition("-")[2] == identity.name
                             and entry.name.partition("-")[0] and entry.is_file()]
            except FileNotFoundError:
                names = []
            for name in sorted(names):
                with contextlib.suppress(FileNotFoundError):
                    entry = index / file_sha256(folder / name)
                    if not entry.exists():
                        write_entry(entry, name.encode())
            write_entry(index / BUILT, b"")

    def unpublish(self, org, path):
        """Take back a media file whose publishing request failed; best effort, since the disk may be failing."""
        with contextlib.suppress(OSError):
            os.unlink(self.file_for(org, path))

    def sweep_staging(self, org_directory, cutoff):
        """Remove staging files of single uploads last written before `cutoff` (their worker died)."""
        staging = org_directory / "media" / STAGING
        try:
            entries = list(os.scandir(staging))
        except FileNotFoundError:
            return
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
