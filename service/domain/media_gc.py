"""Media garbage: uploaded files that no process of their org refers to (SPEC.md 8: never removed automatically)."""
from service.interface.kinds import PROCESSES
from service.interface.media_references import referenced_media

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


# Candidates deleted under one hold of an org's references lock: process writes naming media wait at most this many
# deletions, and the processes are read again once per batch.
DELETE_BATCH = 100


def delete_unreferenced(repo, garbage):
    """Delete the listed (org, path) media that no current process refers to now; answer the sorted (org, path)
    deleted (a file gone meanwhile is not among them).

    A process may have started to refer to a candidate since it was listed: each batch reads the org's processes
    again under the org's references lock, which a process write naming media takes to check them, so such a write
    either committed before (its media are kept) or finds them gone after (refused, as for any missing media).
    Only current processes count: a media file only an earlier revision names may go, as the listing judged."""
    deleted = []
    by_org = {}
    for org, path in garbage:
        by_org.setdefault(org, []).append(path)
    for org, paths in by_org.items():
        for start in range(0, len(paths), DELETE_BATCH):
            batch = paths[start:start + DELETE_BATCH]
            deleted += repo.documents.with_references_locked(org, lambda view: _delete_batch(repo, view, org, batch))
    return sorted(deleted)


def _delete_batch(repo, view, org, paths):
    referenced = set()
    for document in view.each(org, PROCESSES):
        referenced |= referenced_media(document)
    return [(org, path) for path in paths if path not in referenced and repo.media.delete(org, path)]
