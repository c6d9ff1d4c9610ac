"""Media garbage: uploaded files that no process of their org refers to (SPEC.md 8: never removed automatically)."""
from service.domain.reads import PROCESSES

MEDIA_FIELDS = ("image", "primaryImage", "video")


def media_references(value, field="process"):
    """Yield (key, holder, field path) for each `image`/`primaryImage`/`video` object with a path, at any depth.

    `holder` is the object itself (`{"path": ...}`), so a caller may replace the path in place.
    """
    if isinstance(value, dict):
        for key, child in value.items():
            if key in MEDIA_FIELDS and isinstance(child, dict) and isinstance(child.get("path"), str):
                yield key, child, f"{field}.{key}.path"
            else:
                yield from media_references(child, f"{field}.{key}")
    elif isinstance(value, list):
        for position, child in enumerate(value):
            yield from media_references(child, f"{field}[{position}]")


def referenced_media(document):
    """Every media path a process document refers to."""
    return {holder["path"] for _, holder, _ in media_references(document)}


def unreferenced_media(repo, older_than=None):
    """Sorted (org, path) of each media file no process of its org refers to, written before `older_than`."""
    # `older_than` (a POSIX time) spares fresh uploads whose process has not been pushed yet.
    garbage = []
    for org in repo.orgs():
        # Media are listed before processes are read, so a file uploaded during the walk is not judged.
        candidates = [path for path, modified in repo.media.list_media(org)
                      if older_than is None or modified < older_than]
        if not candidates:
            continue
        referenced = set()
        for process_id in repo.documents.ids(org, PROCESSES):
            referenced |= referenced_media(repo.documents.get(org, PROCESSES, process_id) or {})
        garbage.extend((org, path) for path in candidates if path not in referenced)
    return sorted(garbage)


def delete_media(repo, org, path):
    """Delete one media file of an org; False when it was already gone."""
    return repo.media.delete(org, path)
