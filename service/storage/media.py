"""Uploaded media files: `<data>/orgs/<org>/media/<images|videos>/<name>`.

A media path as clients see it is `/api/v1/images/<name>` or `/api/v1/videos/<name>`.
"""
import re

MEDIA_PATH = re.compile(r"/api/v1/(images|videos)/([A-Za-z0-9._-]{1,255})")
KIND_BY_SEGMENT = {"images": "image", "videos": "video"}


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
        return self.orgs_root / self._names.id_to_name(org) / "media" / segment / parsed[1]

    def exists(self, org, path):
        """True when `path` names a whole, verified media file uploaded by `org`."""
        file = self.file_for(org, path)
        return file is not None and file.is_file()
