"""Moving in (CONTRACT 8): copy everything of a file data directory into the shared backend, `wis migrate`.

Each item is copied by an import method of the target store that answers "copied" or "unchanged" and keeps what the
file backend recorded (a document's createdAt, updatedAt and revision; a media file's bytes, checked by SHA-256), so
the copy can be run again, after an interruption or to bring over what changed since, and a second run changes
nothing. Media go first, so a document is never there before the media it refers to.
"""
from collections import Counter
from pathlib import Path

from service.errors import StreamNotFound


def is_data_directory(path):
    """True when `path` holds a file backend's data (service.storage.files.FileRepository keeps every org under `orgs`)."""
    return (Path(path) / "orgs").is_dir()


def copy_data_directory(source, target):
    """Copy the media, documents and open upload streams of every org of `source` (a FileRepository) into `target`
    (a SharedRepository), and the API tokens `wis token create` stored there. Return {what: Counter of outcomes
    ("copied", "unchanged")} in the order copied: "media", each kind of document (processes, products, stations),
    "streams", "tokens"."""
    counts = {"media": Counter()}
    orgs = source.orgs()
    for org in orgs:
        for path, _modified in source.media.list_media(org):
            outcome = _copy_media(source, target, org, path)
            if outcome is not None:
                counts["media"][outcome] += 1
    for org in orgs:
        for kind in source.documents.kinds(org):
            tally = counts.setdefault(kind, Counter())
            for identifier in source.documents.ids(org, kind):
                document = source.documents.get(org, kind, identifier)
                if document is not None:  # removed while we walked
                    tally[target.documents.import_document(org, kind, identifier, document)] += 1
    counts["streams"] = Counter()
    for org in orgs:
        for stream_id in source.streams.open_ids(org):
            outcome = _copy_stream(source, target, org, stream_id)
            if outcome is not None:
                counts["streams"][outcome] += 1
    counts["tokens"] = Counter(target.tokens.import_token(token) for token in source.tokens.all())
    return counts


def _copy_media(source, target, org, path):
    """Copy one media file with the ETag the file backend serves for it, so a client's cached copy stays valid; None
    when it was removed since it was listed."""
    opened = source.media.open(org, path)
    if opened is None:
        return None
    opened.file.close()
    return target.media.import_file(org, path, source.media.file_for(org, path), opened.etag)


def _copy_stream(source, target, org, stream_id):
    """Copy one open upload stream under its lock on the file side, so no chunk lands in it meanwhile; None when it
    completed or expired since it was listed."""
    try:
        with source.streams.open(org, stream_id) as stream:
            if stream.record.is_complete:
                return None
            # MIGRATION CALL SITE of the stream stores (the file stream's export, the shared store's import_stream):
            # the chunks received so far and their bytes, in order, copied under the same stream id.
            pieces, received = stream.export()
            return target.streams.import_stream(org, stream_id, stream.record, pieces, received)
    except StreamNotFound:
        return None
