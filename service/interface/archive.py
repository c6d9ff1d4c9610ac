"""The archive of one org (CONTRACT 10, format 1): what `wis export` writes and `wis import` reads, and what a
server may write and read for itself. Independent of HTTP and of the client: it deals in files and JSON values only.

A `.tar.gz` holding
- `stations/<id>.json`, `processes/<id>.json`, `products/<id>.json`: each object's input (the `input` field, exactly as
  its create mutation takes it);
- `media/images/<name>`, `media/videos/<name>`: media, named as their path without the leading `/api/v1/`;
- `manifest.json`, written last: `{"format": 1, "org", "exportedAt", "counts": {"stations", "processes", "products",
  "media"}, "media": {"images/<name>": {"size", "sha256"}}}`.

Reading is strict and in two kinds of pass over the file, each streaming (nothing is held but one JSON entry, whose
size is bounded, and one block of media). `ArchiveReader.check` reads the whole archive once before anything is used:
- the archive as a whole is refused (ArchiveError, naming the entry) when it is not a whole gzip'd tar (truncated,
  corrupt), has no manifest or one of another format, or holds an entry an honest writer never makes: an absolute
  name, `..`, a link, a device or any entry not a regular file, a name outside the four folders, the same name twice,
  counts that differ from what it holds, more than MAX_ARCHIVE_ENTRIES entries, tar headers
  service.interface.tar_reading does not read, or anything after the last entry but zeros (at most MAX_END_PADDING);
- a single entry is refused (an EntryProblem, and the reader's passes skip it) when its content is wrong: media named
  as the service never names media, or whose size or SHA-256 differ from the manifest's record (or that it has no
  record of), an object file that is not a JSON object, is larger than MAX_JSON_ENTRY or nested too deep, has an `id`
  other than its file name or claims another org.
`media()` and `objects()` then read the archive again and yield only the entries that passed, checking them again as
they go (the file may have changed in between: then ArchiveError).
"""
import contextlib
import gzip
import hashlib
import json
import os
import tarfile
import tempfile
import time
import zlib
from collections.abc import Iterator
from typing import NamedTuple

from service.interface.ids import is_valid_id
from service.interface.replacing_file import ReplacingFile
from service.interface.kinds import KINDS
from service.interface import (
    KIND_BY_SEGMENT, MAX_ARCHIVE_ENTRIES, MAX_REQUEST_BODY, MEDIA_NAME, MEDIA_PATH_ROOT, made_media_name_problem,
    parse_media_path)
from service.interface.tar_reading import (
    BoundedTarInfo, EntryFile, RefusedHeader, TarSource, TrailingData, bounded_json, size_and_sha256)

FORMAT = 1
MANIFEST = "manifest.json"
# The object kinds in the order an import sends them: a process may name stations, a product names processes.
MEDIA = "media"
MEDIA_FOLDERS = ("images", "videos")
# An object whose JSON is larger than a request body could never be sent to a server; the manifest lists every media
# file (about 150 bytes each: 64 MB is some 400,000 media) and is held in memory while an archive is read.
MAX_JSON_ENTRY = MAX_REQUEST_BODY
MAX_MANIFEST = 64 * 1024 * 1024
# Media are compressed formats already (PNG, JPEG, MP4, GIF): gzip's level 9 (tarfile's default) spent 5 s of CPU on
# 40 MB of them to save nothing; level 1 still shrinks the JSON entries several times.
COMPRESS_LEVEL = 1


class ArchiveError(Exception):
    """The archive cannot be read at all; the message names the entry and what is wrong."""


class EntryProblem(NamedTuple):
    entry: str  # the entry's name in the archive, e.g. `processes/p_1.json`
    message: str


class MediaEntry(NamedTuple):
    path: str  # the media path it had on the server it was exported from: `/api/v1/images/<name>`
    file: str  # a local file holding its bytes (valid until the iteration moves on)
    size: int
    sha256: str


def media_entry_name(path):
    """`media/images/<name>` of a media path `/api/v1/images/<name>`."""
    return f"{MEDIA}/{path[len(MEDIA_PATH_ROOT):]}"


def media_path_of(entry_name):
    """`/api/v1/images/<name>` of a media entry `media/images/<name>`."""
    return MEDIA_PATH_ROOT + entry_name[len(MEDIA) + 1:]


def utc_now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- writing ----------------------------------------------------------------------------------------------------------

class ArchiveWriter:
    """Writes an archive to `target` (a path, or a binary file object opened for writing), streaming: each entry is
    written as it is added, the manifest last. Use as a context manager: an exception inside the block leaves a path as
    it was (written aside, renamed over it when whole), a file object with an archive no reader takes (no manifest)."""

    def __init__(self, target, org, *, folder=""):
        """With `folder` (`<org>/`), `target` is a tarfile.TarFile open for writing: the archive is written into that
        folder of it (a server's snapshot holds one per org) and the caller closes it."""
        self.org = org
        self.exported_at = utc_now()
        self._mtime = time.time()
        self._counts = {kind: 0 for kind in (*KINDS, MEDIA)}
        self._media, self._names = {}, set()
        self._folder = folder
        self._file = ReplacingFile(target) if isinstance(target, (str, os.PathLike)) else None
        out = self._file.file if self._file else target
        self._gzip = None if folder else gzip.GzipFile(fileobj=out, mode="wb", compresslevel=COMPRESS_LEVEL, mtime=0)
        self._tar = target if folder else tarfile.open(fileobj=self._gzip, mode="w|")

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        try:
            if kind is None:
                self._add_json(MANIFEST, self.manifest())
            if not self._folder:
                self._tar.close()
                self._gzip.close()
            if self._file is not None and kind is None:
                self._file.commit()
        finally:
            if self._file is not None:
                self._file.discard()  # after commit(), nothing left to remove

    def manifest(self):
        return {"format": FORMAT, "org": self.org, "exportedAt": self.exported_at, "counts": dict(self._counts),
                "media": dict(sorted(self._media.items()))}

    def add_object(self, kind, identifier, value):
        """One object's input (a JSON object whose `id` is `identifier`)."""
        if kind not in KINDS:
            raise ValueError(f"not an object kind: {kind!r}")
        if not is_valid_id(identifier) or value.get("id") != identifier:
            raise ValueError(f"{kind}: the object's id {value.get('id')!r} is not a valid id named {identifier!r}")
        self._add_json(f"{kind}/{identifier}.json", value)
        self._counts[kind] += 1

    def add_media(self, path, file, size):
        """The media at `path`, `size` bytes read from the binary file object `file` (hashed as they are copied); a
        file that ends early is an error (tarfile's OSError) and the archive is unusable."""
        if parse_media_path(path) is None:
            raise ValueError(f"not a media path: {path!r}")
        name = media_entry_name(path)
        hashing = _HashingReader(file)
        self._add(name, size, hashing)
        self._media[name[len(MEDIA) + 1:]] = {"size": size, "sha256": hashing.digest.hexdigest()}
        self._counts[MEDIA] += 1

    def add_media_file(self, path, file_path):
        with open(file_path, "rb") as file:
            self.add_media(path, file, os.fstat(file.fileno()).st_size)

    def _add_json(self, name, value):
        data = json.dumps(value, ensure_ascii=False, indent=1, sort_keys=False).encode()
        self._add(name, len(data), BytesReader(data))

    def _add(self, name, size, reader):
        if name in self._names:
            raise ValueError(f"{name}: added twice")
        self._names.add(name)
        info = tarfile.TarInfo(self._folder + name)
        info.size, info.mtime, info.mode = size, self._mtime, 0o644
        self._tar.addfile(info, reader)


class _HashingReader:
    def __init__(self, file):
        self._file = file
        self.digest = hashlib.sha256()

    def read(self, size=-1):
        data = self._file.read(size)
        self.digest.update(data)
        return data


class BytesReader:
    def __init__(self, data):
        self._data, self._at = data, 0

    def read(self, size=-1):
        end = len(self._data) if size is None or size < 0 else self._at + size
        data, self._at = self._data[self._at:end], min(end, len(self._data))
        return data


# -- reading ----------------------------------------------------------------------------------------------------------

class Contents(NamedTuple):
    """What `ArchiveReader.check` found."""
    org: str
    exported_at: str
    counts: dict  # {kind: how many entries of it the archive holds} for KINDS and "media"
    ids: dict  # {kind: sorted ids of the objects that passed}
    media: dict  # {media path: {"size", "sha256"}} of the media entries that passed
    problems: list  # EntryProblem of each entry refused


class ArchiveReader:
    """Reads the archive at `path` (a local file: it is read more than once)."""

    def __init__(self, path):
        self.path = path
        self.contents = None

    def check(self) -> Contents:
        """Read the whole archive and judge each entry (see the module's docstring); ArchiveError when it cannot be
        used at all."""
        names, problems, bodies, media_seen = set(), [], {}, {}
        manifest = None
        for entry, read in self._entries():
            if entry.name in names:
                raise ArchiveError(f"{entry.name}: the archive holds this entry twice")
            names.add(entry.name)
            if entry.name == MANIFEST:
                manifest = read_manifest(read, entry)
            elif entry.name.startswith(MEDIA + "/"):
                media_seen[entry.name] = size_and_sha256(read())
            else:
                # Only what the verdict needs is kept, not the JSON: memory grows with the number of entries, not
                # with their sizes.
                body, problem = read_object(read, entry)
                bodies[entry.name] = (_summary(body), problem)
        if manifest is None:
            raise ArchiveError(f"{MANIFEST}: missing; this is not a complete archive of format {FORMAT}")
        counts = {kind: sum(1 for name in names if name.startswith(kind + "/")) for kind in (*KINDS, MEDIA)}
        if counts != {kind: manifest["counts"].get(kind, 0) for kind in counts}:
            raise ArchiveError(f"{MANIFEST}: counts {manifest['counts']}, but the archive holds {counts}")
        ids = {kind: [] for kind in KINDS}
        for name, (summary, problem) in sorted(bodies.items()):
            problem = problem or object_problem(name, summary, manifest["org"])
            if problem:
                problems.append(EntryProblem(name, problem))
            else:
                kind, file_name = name.split("/")
                ids[kind].append(file_name[:-len(".json")])
        media = {}
        records = manifest["media"]
        for name, seen in sorted(media_seen.items()):
            problem = media_problem(name[len(MEDIA) + 1:], seen, records.get(name[len(MEDIA) + 1:]))
            if problem:
                problems.append(EntryProblem(name, problem))
            else:
                media[media_path_of(name)] = {"size": seen[0], "sha256": seen[1]}
        for name in sorted(set(records) - {name[len(MEDIA) + 1:] for name in media_seen}):
            problems.append(EntryProblem(f"{MEDIA}/{name}", "listed in the manifest but not in the archive"))
        self.contents = Contents(manifest["org"], manifest["exportedAt"], counts, ids, media, problems)
        return self.contents

    def objects(self, kind) -> Iterator[tuple[str, dict]]:
        """(id, input) of each object of `kind` that passed the check, in archive order."""
        accepted = set(self._checked().ids[kind])
        for entry, read in self._entries():
            identifier = entry.name[len(kind) + 1:-len(".json")]
            if entry.name.startswith(kind + "/") and identifier in accepted:
                body, problem = read_object(read, entry)
                if problem or object_problem(entry.name, body, self.contents.org):
                    raise ArchiveError(f"{entry.name}: changed since the archive was checked")
                yield identifier, body

    def media(self) -> Iterator[MediaEntry]:
        """Each media entry that passed the check, copied to a temporary file while its SHA-256 is checked again."""
        accepted = self._checked().media
        with tempfile.TemporaryDirectory(prefix="wis-archive-") as directory:
            for entry, read in self._entries():
                path = media_path_of(entry.name)
                if not entry.name.startswith(MEDIA + "/") or path not in accepted:
                    continue
                # Named as its media name without the unique prefix (the check made sure it has one): uploaded again,
                # it keeps its cleaned name (and so finds the same media on a server that has them).
                local = os.path.join(directory, entry.name.rsplit("/", 1)[1].partition("-")[2])
                try:
                    with open(local, "wb") as copy:
                        size, sha256 = size_and_sha256(read(), copy)
                except OSError as error:  # the local copy's: the archive's own errors are ArchiveErrors
                    raise OSError(error.errno, f"{error.strerror} (copying {entry.name} out of the archive)",
                                  local) from None
                if (size, sha256) != (accepted[path]["size"], accepted[path]["sha256"]):
                    raise ArchiveError(f"{entry.name}: changed since the archive was checked")
                yield MediaEntry(path, local, size, sha256)
                os.unlink(local)  # one media file on disk at a time

    def _checked(self):
        return self.contents or self.check()

    def _entries(self):
        """(TarInfo, a function returning its file object) of each entry, in order, after checking its name and type.
        Streaming: an entry can be read only before the next is asked for. The archive's errors, here and in the file
        objects, are ArchiveErrors (`_reading`)."""
        with self._reading(), gzip.open(self.path, "rb") as unzipped, \
                tarfile.open(fileobj=(source := TarSource(unzipped)), mode="r|", tarinfo=BoundedTarInfo) as archive:
            for number, entry in enumerate(archive, 1):
                if number > MAX_ARCHIVE_ENTRIES:
                    raise ArchiveError(f"{entry.name}: more than {MAX_ARCHIVE_ENTRIES} entries; an archive has at most "
                                       "that many")
                check_entry(entry)
                yield entry, lambda entry=entry: EntryFile(archive.extractfile(entry), self._reading)
            # Read to its end, gzip checks its trailer (an archive cut in its last bytes is refused); what follows the
            # last entry is read bounded (zeros, at most MAX_END_PADDING: a gzip bomb's place), on each of the passes.
            source.check_end(archive)

    @contextlib.contextmanager
    def _reading(self):
        """Errors of the gzip or tar layers, between entries or while one is read, as the ArchiveError they mean; only
        there: a local file's errors (a full disk) are said as what they are."""
        try:
            yield
        except FileNotFoundError:
            raise ArchiveError(f"{os.fspath(self.path)}: no such file") from None
        except (RefusedHeader, TrailingData) as error:
            raise ArchiveError(f"{os.fspath(self.path)}: {error}") from None
        except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
            # gzip.BadGzipFile is an OSError; a tar or gzip cut short is a ReadError or EOFError.
            raise ArchiveError(f"{os.fspath(self.path)}: not a whole .tar.gz archive (truncated or corrupt: {error})") \
                from None


def check_entry(entry):
    name = entry.name
    if name.startswith("/") or "\\" in name:
        raise ArchiveError(f"{name}: an absolute name; every entry of an archive is relative")
    if ".." in name.split("/"):
        raise ArchiveError(f"{name}: a name with '..'; every entry stays inside the archive's folders")
    if not entry.isreg():
        raise ArchiveError(f"{name}: not a regular file (a link, folder or device); an archive holds files only")
    parts = name.split("/")
    if name == MANIFEST:
        return
    if len(parts) == 2 and parts[0] in KINDS and parts[1].endswith(".json") and is_valid_id(parts[1][:-5]):
        return
    if len(parts) == 3 and parts[0] == MEDIA and parts[1] in MEDIA_FOLDERS and MEDIA_NAME.fullmatch(parts[2]) \
            and parts[2] not in {".", ".."}:
        return
    raise ArchiveError(f"{name}: outside the archive's folders (manifest.json, {'/, '.join(KINDS)}/<id>.json, "
                       f"media/images/, media/videos/)")


def read_manifest(read, entry):
    value, problem = bounded_json(read, entry, MAX_MANIFEST)
    if problem:
        raise ArchiveError(f"{MANIFEST}: {problem}")
    if not isinstance(value, dict):
        raise ArchiveError(f"{MANIFEST}: not a JSON object")
    if value.get("format") != FORMAT:
        raise ArchiveError(f"{MANIFEST}: format {value.get('format')!r}; this version reads format {FORMAT} only")
    counts, media = value.get("counts"), value.get("media")
    if not isinstance(value.get("org"), str) or not value["org"] or not isinstance(value.get("exportedAt"), str) \
            or not isinstance(counts, dict) or not all(isinstance(count, int) for count in counts.values()) \
            or not isinstance(media, dict) or not all(_is_media_record(record) for record in media.values()):
        raise ArchiveError(f"{MANIFEST}: malformed (it needs org, exportedAt, counts and media as format {FORMAT} "
                           "has them)")
    return value


def _is_media_record(record):
    return isinstance(record, dict) and isinstance(record.get("size"), int) and isinstance(record.get("sha256"), str)


def read_object(read, entry):
    """(the JSON value, None) of an object entry, or (None, why it cannot be read)."""
    return bounded_json(read, entry, MAX_JSON_ENTRY)


def _summary(body):
    """What object_problem reads of an object entry's JSON value: a dict of its `id` and `org` (when it has one), or
    the value itself when it is not a JSON object (a small stand-in)."""
    if not isinstance(body, dict):
        return []
    return {key: body[key] for key in ("id", "org") if key in body}


def object_problem(name, body, org):
    """What is wrong with an object entry's JSON value (or its _summary), or None."""
    if not isinstance(body, dict):
        return "not a JSON object"
    identifier = name.split("/")[1][:-len(".json")]
    if body.get("id") != identifier:
        return f"its id is {body.get('id')!r}, not {identifier!r} as its file name says"
    if "org" in body and body["org"] != org:
        return f"it claims org {body['org']!r}; this archive is org {org!r}'s"
    return None


def media_problem(name, seen, record):
    """What is wrong with a media entry `images/<name>` of (size, sha256) `seen` and the manifest's record, or None."""
    folder, _, file_name = name.partition("/")
    # A name of another shape was never served: stored, its every GET would be 404.
    problem = made_media_name_problem(KIND_BY_SEGMENT[folder], file_name)
    if problem:
        return problem
    size, sha256 = seen
    if record is None:
        return "the manifest has no record of it"
    if size != record["size"]:
        return f"{size} bytes, not {record['size']} as the manifest says"
    if sha256 != record["sha256"].lower():
        return f"its SHA-256 is {sha256}, not {record['sha256']} as the manifest says"
    return None
