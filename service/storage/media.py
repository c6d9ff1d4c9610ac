"""Uploaded media files: `<data>/orgs/<org>/media/<images|videos>/<name>`.

A media path as clients see it is `/api/v1/images/<name>` or `/api/v1/videos/<name>`.
"""
import contextlib
import os
import re

from service.storage.files import disk_errors, fsync_directory
from service.storage.incoming import IncomingFile

MEDIA_PATH = re.compile(r"/api/v1/(images|videos)/([A-Za-z0-9._-]{1,255})")
KIND_BY_SEGMENT = {"images": "image", "videos": "video"}
# Single uploads are received here, beside the media they become, so publishing is a link, not a copy.
STAGING = ".incoming"


def parse_media_path(path):
    """Return (kind, name) for a well-formed media path, where kind is 'image' or 'video', else None."""
    match = MEDIA_PATH.fullmatch(path or "")
    if not match or match.group(2) in {".", ".."}:
        return None
    return KIND_BY_SEGMENT[match.group(1)], match.group(2)


class MediaStore:
    def __init__(self, orgs_root, names):
        self.orgs_root = orgs_root
        self._names = names

    def file_for(self, org, path):
        """The file behind a media path of an org, or None when the path is malformed."""
        parsed = parse_media_path(path)
        if parsed is None:
            return None
        segment = "images" if parsed[0] == "image" else "videos"
        return self._media_root(org) / segment / parsed[1]

    def exists(self, org, path):
        """True when `path` names a whole, verified media file uploaded by `org`."""
        file = self.file_for(org, path)
        return file is not None and file.is_file()

    def list_media(self, org):
        """(media path, last modification time) of every published media file of an org."""
        found = []
        for segment in ("images", "videos"):
            try:
                with os.scandir(self._media_root(org) / segment) as entries:
                    for entry in entries:
                        path = f"/api/v1/{segment}/{entry.name}"
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
        return self.orgs_root / self._names.id_to_name(org) / "media"

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
