"""Media garbage: uploaded files that no process of their org refers to (SPEC.md 8: never removed automatically)."""
from service.domain.reads import PROCESSES

MEDIA_FIELDS = ("image", "primaryImage", "video")


def referenced_media(document):
    """Every media path a process document refers to: `image`, `primaryImage` and `video` paths at any depth."""
    found = set()
    pending = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                if key in MEDIA_FIELDS and isinstance(child, dict) and isinstance(child.get("path"), str):
                    found.add(child["path"])
                else:
                    pending.append(child)
        elif isinstance(value, list):
            pending.extend(value)
    return found


def unreferenced_media(repo, older_than=None):
    """(org, path) of each media file no process of its org refers to, sorted; only files last
    written before `older_than` (a POSIX time) when given, to spare uploads not yet referenced."""
    garbage = []
    for org in repo.orgs():
        # Media are listed before processes are read, so a file uploaded during the walk is not judged.
        candidates = [path for path, modified in repo.media.list_media(org) if older_than is None or modified < older_than]
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
