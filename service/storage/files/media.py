"""Uploaded media files: `<data>/orgs/<org>/media/<images|videos>/<name>`, one per media path."""
import contextlib
import os

from service.interface import media_path, parse_media_path
from service.storage.contract import MEDIA_FOLDERS, OpenMedia
from service.storage.disk import disk_errors, fsync_directory
from service.storage.files.names import id_to_name
from service.storage.incoming import IncomingFile

# Single uploads are received here, beside the media they become, so publishing is a link, not a copy.
STAGING = ".incoming"


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

    def _media_root(self, org):
        return self.orgs_root / id_to_name(org) / "media"

    def new_incoming(self, org, head_size):
        """A staging file for a single-request upload, on the same filesystem as the media it becomes."""
        staging = self._media_root(org) / STAGING
        with disk_errors():
            staging.mkdir(parents=True, exist_ok=True)
        return IncomingFile(staging, head_size)

    def publish(self, org, path, source):
        """Make the whole, fsynced file `source` visible at `path`; False if that path is already taken.

        A hard link never replaces an existing file and shows the name only once the file is complete,
        so a media path never names a partial file, whatever fails when.
        """
        target = self.file_for(org, path)
        with disk_errors():
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except FileExistsError:
                return False
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
