"""Uploaded media files: `<data>/orgs/<org>/media/<images|videos>/<name>`, one per media path; which of them hold the
same bytes under the same cleaned name is in their deduplication index (media_index.MediaIndex)."""
import contextlib
import os

from service.errors import disk_errors
from service.interface import media_path, parse_media_path
from service.storage.common.disk import fsync_directory
from service.storage.contract import MEDIA_FOLDERS, MediaIdentity, OpenMedia
from service.storage.files.media_index import MediaIndex
from service.storage.files.names import id_to_name
from service.storage.common.incoming import IncomingFile

# Single uploads are received here, beside the media they become, so publishing is a link, not a copy.
STAGING = ".incoming"
KIND_BY_FOLDER = {folder: kind for kind, folder in MEDIA_FOLDERS.items()}


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
        (FileRepository.replace_state builds one). It gets no entry in the deduplication index: it is hashed the first
        time an upload of its name asks, as media published before the index existed are (media_index)."""
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
        index = MediaIndex(self._media_root(org))
        with index.locked(identity):
            recorded = index.recorded(identity)
            same = recorded and self._publish_recorded(org, identity, recorded, source)
            if same:
                return same
            if not self._link(org, path, source):
                return None
            try:
                index.record(identity, parse_media_path(path)[1])
            except BaseException:
                self.unpublish(org, path)
                raise
        return path

    def _publish_recorded(self, org, identity, name, source):
        """The path of the media `name` the index holds for `identity`: when it still holds those bytes, with its age
        started again; when it was deleted since (`wis gc --delete`), with `source` linked there again, so that the
        revisions naming that path can be restored. None when the path now holds other bytes."""
        path = media_path(KIND_BY_FOLDER[identity.folder], name)
        file = self.file_for(org, path)
        if file is None:
            return None
        try:
            if os.stat(file).st_size != identity.size:
                return None
        except FileNotFoundError:
            return path if self._link(org, path, source) else None
        with disk_errors():
            os.utime(file)
        return path

    def holds(self, org, path, source):
        """True when the media file at `path` is the file `source` (linked from it)."""
        try:
            return os.path.samefile(self.file_for(org, path), source)
        except FileNotFoundError:
            return False

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
