"""Snapshots of the whole state (CONTRACT 12): every org's objects and media as one archive, and that archive read back
as the new state. Test mode's `/_test/snapshot` and `/_test/restore`.

A snapshot is a `.tar.gz` holding, for each org, the archive of CONTRACT 10 (service.interface.archive, format 1) in a folder
named after the org, and a top-level manifest written last:

    <org>/stations/<id>.json, <org>/processes/<id>.json, <org>/products/<id>.json   each object's input
    <org>/media/images/<name>, <org>/media/videos/<name>                            media, at their paths
    <org>/manifest.json        the org's manifest: {"format": 1, "org", "exportedAt", "counts", "media"}
    manifest.json              {"format": 1, "snapshot": true, "takenAt", "orgs": {"<org>": counts}}

Reading is one streaming pass: each entry is checked as it comes (names, sizes, JSON, ids, the org it claims) and
received (media into a staging directory, hashed as they are copied; objects' JSON in memory). An org's manifest is
checked against the org's media when it comes and against the media after it as they come, and only its counts and
its records of media still to come are kept; what can only be known at the end (counts, media listed but missing,
which orgs) is checked then. Then `check_objects`
checks every object as its create mutation would check it sent alone (types, then the rules of its kind, references to
processes and media found in the snapshot itself). Any problem refuses the whole snapshot (InvalidSnapshot, naming the
entry) before the state is touched: a test's starting state is all there or not at all.
"""
import gzip
import json
import tarfile
import time
import zlib
from pathlib import Path
from typing import NamedTuple

import orjson

from service.interface import archive
from service.interface.kinds import KINDS
from service.interface.archive import MANIFEST, MEDIA, ArchiveWriter
from service.domain.input_form import input_of
from service.domain.processes import check_process
from service.domain.products import check_product
from service.interface.kinds import PROCESSES, PRODUCTS, STATIONS
from service.domain.stations import check_station
from service.domain.validation import InvalidInput
from service.errors import BodyTooLarge, InvalidSnapshot, disk_errors
from service.interface import (
    MAX_SNAPSHOT_DOCUMENTS, MAX_ARCHIVE_ENTRIES, MAX_SNAPSHOT_UNPACKED, MEDIA_PATH_ROOT, ORG_PATTERN)
from service.storage.contract import StagedDocument, StagedMedia

from service.interface.tar_reading import (
    BoundedTarInfo, RefusedHeader, TarSource, TrailingData, bounded_json, size_and_sha256)

FORMAT = archive.FORMAT
# The top-level manifest names the orgs and their counts only: small.
MAX_TOP_MANIFEST = 16 * 1024 * 1024
CONTENT_TYPE = "application/gzip"
# What tarfile's stream reader asks of gzip at a time: its default (10 KB) costs a call per 10 KB of media, a large one
# (1 MB) a copy of the rest of its buffer per entry header.
READ_SIZE = 64 * 1024
EXPORT_HINT = " (this looks like the export of one org: `wis import` sends that to a server)"


# -- taking a snapshot ------------------------------------------------------------------------------------------------

def write_snapshot(repo, target):
    """Write the whole state of `repo` to the binary file object `target` as a snapshot; its top-level manifest."""
    orgs = {}
    with gzip.GzipFile(fileobj=target, mode="wb", compresslevel=archive.COMPRESS_LEVEL, mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w|") as tar:
        for org in repo.orgs():
            with ArchiveWriter(tar, org, folder=f"{org}/") as writer:
                _add_org(repo, org, writer)
            orgs[org] = writer.manifest()["counts"]
        manifest = {"format": FORMAT, "snapshot": True, "takenAt": archive.utc_now(), "orgs": orgs}
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime, info.mode = len(data), time.time(), 0o644
        tar.addfile(info, archive.BytesReader(data))
    return manifest


def _add_org(repo, org, writer):
    for kind in KINDS:
        for document in repo.documents.each(org, kind):
            writer.add_object(kind, document["id"], input_of(kind, document))
    for path, _ in sorted(repo.media.list_media(org)):
        opened = repo.media.open(org, path)
        if opened is None:  # removed since the listing
            continue
        with opened.file:
            writer.add_media(path, opened.file, opened.size)


# -- reading one back -------------------------------------------------------------------------------------------------

class StagedState(NamedTuple):
    """A snapshot received into a staging directory and checked whole: what Repository.replace_state takes."""
    documents: list  # StagedDocument
    media: list  # StagedMedia
    orgs: dict  # {org: counts}, as each org's manifest gives them and its folder holds


def read_snapshot(stream, staging):
    """Read a snapshot from the binary stream `stream` (once, in order) into the directory `staging`; the StagedState,
    or InvalidSnapshot (BodyTooLarge past MAX_SNAPSHOT_UNPACKED) with nothing of it used."""
    reading = _Reading(Path(staging))
    try:
        with gzip.GzipFile(fileobj=stream, mode="rb") as unzipped, \
                tarfile.open(fileobj=(source := TarSource(unzipped)), mode="r|", bufsize=tarfile.RECORDSIZE,
                             tarinfo=BoundedTarInfo) as entries:
            for entry in entries:
                reading.take(entry, lambda entry=entry: entries.extractfile(entry))
            # Zeros only, at most MAX_END_PADDING (a gzip bomb's place), counted as unpacked bytes like the entries'.
            reading.take_end(source.check_end(entries))
    except (RefusedHeader, TrailingData) as error:
        raise InvalidSnapshot(str(error)) from None
    except (tarfile.TarError, EOFError, zlib.error) as error:
        raise InvalidSnapshot(f"not a whole .tar.gz snapshot (truncated or corrupt: {error})") from None
    except OSError as error:  # gzip.BadGzipFile and the like; disk errors of the staging are ServiceErrors already
        raise InvalidSnapshot(f"not a .tar.gz snapshot ({error})") from None
    return reading.finish()


def check_objects(state, coerce):
    """Check each object of a StagedState as the API checks an input sent to its create mutation: `coerce(kind, input)`
    (the schema's types: service.web.graphql.input_check.coerced_input) then the rules of its kind, with the processes and media
    it names looked up in the snapshot; InvalidSnapshot naming the first object that breaks one. A restored state is
    one the API could have built: what it holds reads back, on pages too."""
    media = {}
    for item in state.media:
        media.setdefault(item.org, set()).add(item.path)
    staged = _StagedObjects(state.documents)
    checks = {
        STATIONS: lambda org, value: check_station(value),
        PROCESSES: lambda org, value: check_process(lambda org, paths: media.get(org, set()) & set(paths), org, value),
        PRODUCTS: lambda org, value: check_product(staged, org, value),
    }
    for document in state.documents:
        try:
            checks[document.kind](document.org, coerce(document.kind, input_of(document.kind,
                                                                               orjson.loads(document.body))))
        except InvalidInput as error:
            raise InvalidSnapshot(f"{document.org}/{document.kind}/{document.identifier}.json: {error}; the API would "
                                  "refuse it as input too") from None


class _StagedObjects:
    """The staged documents as check_product looks processes up (the `existing` of a DocumentView)."""

    def __init__(self, documents):
        self._keys = {(document.org, document.kind, document.identifier) for document in documents}

    def existing(self, org, kind, identifiers):
        return {identifier for identifier in identifiers if (org, kind, identifier) in self._keys}


def _is_folder(name):
    """True for `<org>`, `<org>/<kind>`, `<org>/media` and `<org>/media/<images|videos>`: the folders of a snapshot."""
    org, *rest = name.split("/")
    return ORG_PATTERN.fullmatch(org) is not None and (
        rest in ([], [MEDIA]) or (len(rest) == 1 and rest[0] in KINDS)
        or (len(rest) == 2 and rest[0] == MEDIA and rest[1] in archive.MEDIA_FOLDERS))


def _few(names, shown=10):
    """Sorted names, the first `shown` of them and how many more: a message stays short whatever a snapshot holds."""
    names = sorted(names)
    return f"{names[:shown]}" + (f" and {len(names) - shown} more" if len(names) > shown else "")


class _Reading:
    """What one pass over a snapshot has seen so far."""

    def __init__(self, staging):
        self.staging = staging
        self.names = set()
        self.entries = 0
        self.unpacked = 0
        self.top_orgs = None  # the orgs the top-level manifest names
        # Of each org's manifest only its counts and its records of media not received yet are kept: it is checked
        # against the org's media as it comes, so a worker holds one manifest at a time, not one per org.
        self.counts = {}  # {org: its manifest's counts}
        self.awaited = {}  # {org: {"images/<name>": the manifest's record}} of media listed but not received yet
        self.awaited_count = 0  # records in `awaited`, each an entry still to come
        self.documents = []
        self.documents_size = 0
        self.media = {}  # {org: {"images/<name>": (size, sha256, staged file)}}
        self.held = {}  # {org: {kind: entries of it in the org's folder}}, for every org folder seen

    def take(self, entry, read):
        """Check one entry, whose file object `read()` gives, and receive it."""
        name = entry.name
        self.entries += 1
        if self.entries > MAX_ARCHIVE_ENTRIES:
            raise InvalidSnapshot(f"{name}: more than {MAX_ARCHIVE_ENTRIES} entries; a snapshot has at most that many")
        self.unpacked += entry.size
        if self.unpacked > MAX_SNAPSHOT_UNPACKED:
            raise BodyTooLarge(f"{name}: the snapshot's entries hold more than {MAX_SNAPSHOT_UNPACKED} bytes "
                               f"unpacked, the limit of a snapshot")
        if entry.isdir() and _is_folder(name.rstrip("/")):
            return  # `tar czf` of an unpacked snapshot adds its folders: they hold nothing to restore
        if name in self.names:
            raise InvalidSnapshot(f"{name}: the snapshot holds this entry twice")
        self.names.add(name)
        if name == MANIFEST:
            self.top_orgs = self._top_manifest(entry, read)
            return
        org, _, within = name.partition("/")
        if not ORG_PATTERN.fullmatch(org) or not within:
            raise InvalidSnapshot(f"{name}: outside the snapshot's folders (manifest.json, then one folder per org "
                                  f"named as the org, holding that org's archive)")
        try:
            archive.check_entry(entry.replace(name=within, deep=False))
        except archive.ArchiveError as error:
            hint = EXPORT_HINT if org in (*KINDS, MEDIA) else ""
            raise InvalidSnapshot(f"{org}/{error}; a snapshot holds one such archive per org, in a folder named as the "
                                  f"org{hint}") from None
        held = self.held.setdefault(org, dict.fromkeys((*KINDS, MEDIA), 0))
        if within != MANIFEST:
            held[within.partition("/")[0]] += 1
        if within == MANIFEST:
            self._take_org_manifest(org, entry, read)
        elif within.startswith(MEDIA + "/"):
            self._stage_media(org, within, read)
        else:
            self._stage_document(org, within, entry, read)

    def take_end(self, count):
        """Count the `count` bytes (zeros) after the last entry toward MAX_SNAPSHOT_UNPACKED."""
        self.unpacked += count
        if self.unpacked > MAX_SNAPSHOT_UNPACKED:
            raise BodyTooLarge(f"the {count} bytes of zeros after the last entry: the snapshot holds more than "
                               f"{MAX_SNAPSHOT_UNPACKED} bytes unpacked, the limit of a snapshot")

    def _top_manifest(self, entry, read):
        value, problem = bounded_json(read, entry, MAX_TOP_MANIFEST)
        if problem:
            raise InvalidSnapshot(f"{MANIFEST}: {problem}")
        if not isinstance(value, dict) or value.get("format") != FORMAT or value.get("snapshot") is not True:
            raise InvalidSnapshot(f"{MANIFEST}: not the manifest of a snapshot of format {FORMAT} (it needs "
                                  f'"format": {FORMAT} and "snapshot": true)'
                                  f'{EXPORT_HINT if isinstance(value, dict) and "org" in value else ""}')
        if not isinstance(value.get("orgs"), dict) or not all(map(ORG_PATTERN.fullmatch, value["orgs"])):
            raise InvalidSnapshot(f'{MANIFEST}: "orgs" must be an object whose keys are the org folders')
        return set(value["orgs"])  # the counts it gives are the org manifests' to check

    def _take_org_manifest(self, org, entry, read):
        """Check an org's manifest against the media of its folder received so far; keep what the rest needs."""
        try:
            manifest = archive.read_manifest(read, entry)
        except archive.ArchiveError as error:
            raise InvalidSnapshot(f"{org}/{error}") from None
        if manifest["org"] != org:
            raise InvalidSnapshot(f"{org}/{MANIFEST}: the manifest of org {manifest['org']!r} in org {org!r}'s folder")
        records, received = manifest["media"], self.media.get(org, {})
        for name, (size, sha256, _) in sorted(received.items()):
            self._check_media(org, name, (size, sha256), records.get(name))
        awaited = {name: record for name, record in records.items() if name not in received}
        self.awaited_count += len(awaited)
        if self.entries + self.awaited_count > MAX_ARCHIVE_ENTRIES:
            raise InvalidSnapshot(f"{org}/{MANIFEST}: lists {len(awaited)} media not in the snapshot so far; a "
                                  f"snapshot has at most {MAX_ARCHIVE_ENTRIES} entries")
        self.awaited[org] = awaited
        self.counts[org] = {kind: manifest["counts"].get(kind, 0) for kind in (*KINDS, MEDIA)}

    @staticmethod
    def _check_media(org, name, seen, record):
        problem = archive.media_problem(name, seen, record)
        if problem:
            raise InvalidSnapshot(f"{org}/{MEDIA}/{name}: {problem}")

    def _stage_document(self, org, within, entry, read):
        body, problem = archive.read_object(read, entry)
        problem = problem or archive.object_problem(within, body, org)
        if problem:
            raise InvalidSnapshot(f"{org}/{within}: {problem}")
        kind, file_name = within.split("/")
        # Held in memory (MAX_SNAPSHOT_DOCUMENTS in all): a file each would cost more than the documents' own writes.
        self.documents_size += entry.size
        if self.documents_size > MAX_SNAPSHOT_DOCUMENTS:
            raise BodyTooLarge(f"{org}/{within}: the snapshot's objects hold more than {MAX_SNAPSHOT_DOCUMENTS} bytes "
                               "of JSON, the limit of a snapshot")
        self.documents.append(StagedDocument(org, kind, file_name[:-len(".json")], orjson.dumps(body)))

    def _stage_media(self, org, within, read):
        staged = self.staging / MEDIA / org / within
        with disk_errors():
            staged.parent.mkdir(parents=True, exist_ok=True)
            with open(staged, "wb") as copy:
                size, sha256 = size_and_sha256(read(), copy)
        name = within[len(MEDIA) + 1:]
        if org in self.awaited:  # its manifest came first
            self._check_media(org, name, (size, sha256), self.awaited[org].pop(name, None))
            self.awaited_count -= 1
        self.media.setdefault(org, {})[name] = (size, sha256, str(staged))

    def finish(self):
        """The StagedState, once what only the manifests tell is checked."""
        if self.top_orgs is None:
            raise InvalidSnapshot(f"{MANIFEST}: missing; this is not a complete snapshot of format {FORMAT}")
        if self.top_orgs != set(self.held):
            raise InvalidSnapshot(f"{MANIFEST}: it names the orgs {_few(self.top_orgs)}, but the snapshot has folders "
                                  f"for {_few(self.held)}")
        media = []
        for org in sorted(self.held):
            media += self._check_org(org)
        return StagedState(self.documents, media, {org: self.held[org] for org in sorted(self.held)})

    def _check_org(self, org):
        """The org's StagedMedia, once its manifest is found to describe its folder exactly."""
        if org not in self.counts:
            raise InvalidSnapshot(f"{org}/{MANIFEST}: missing; each org's folder ends with its manifest")
        for name in sorted(self.awaited[org]):
            raise InvalidSnapshot(f"{org}/{MEDIA}/{name}: listed in the manifest but not in the snapshot")
        if self.held[org] != self.counts[org]:
            raise InvalidSnapshot(f"{org}/{MANIFEST}: counts {self.counts[org]}, but the folder holds {self.held[org]}")
        return [StagedMedia(org, MEDIA_PATH_ROOT + name, file, size, sha256)
                for name, (size, sha256, file) in sorted(self.media.get(org, {}).items())]
