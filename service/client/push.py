"""`push`: create or update stations, processes and products described in JSON or YAML files.

Each file holds one object or a list of objects of the form {"station": {...}}, {"process": {...}} or
{"product": {...}} (the mutation's input). Local media files a process refers to are uploaded first,
to the destination their content says, and replaced by their media paths.
"""
import datetime
import json
import math
from contextlib import nullcontext
from pathlib import Path
from typing import NamedTuple, Optional

import yaml

from service.client import dry_run
from service.client.errors import ClientError, ServerUnreachable, describe
from service.client.uploader import FORMAT_DESTINATIONS, file_format
from service.interface.media_references import media_references
from service.interface.tar_reading import MAX_JSON_DEPTH
from service.interface import DESTINATIONS, FORMATS, MAX_INPUT_SIZE, MEDIA_PATH_ROOT

KINDS = ("station", "process", "product")  # also the order objects are applied in
SUFFIXES = (".json", ".yaml", ".yml")
# A process's `video` holds a video; `image` and `primaryImage` an image.
MEDIA_KIND = {"video": "video", "image": "image", "primaryImage": "image"}
# What YAML reads that JSON has no type for (safe_load makes these of unquoted dates, !!binary and !!set), and what to
# do.
NOT_JSON = {datetime.datetime: "a date and time; quote it to send it as text",
            datetime.date: "a date; quote it to send it as text",
            bytes: "binary data (!!binary), which JSON cannot carry", set: "a set (!!set); write a list"}


class PushResult(NamedTuple):
    """The outcome of one entry: `label` (its kind, id, file and position, "process p1 (line.yaml[2])"; the file and
    position alone for an unreadable entry), `outcome` ("CREATED" or "UPDATED") or `error` (one line)."""

    label: str
    outcome: Optional[str] = None
    error: Optional[str] = None


class _Item(NamedTuple):
    kind: str
    obj: dict
    source: Path
    where: str  # the file, and the position in it when it holds a list: "line.yaml[2]"

    @property
    def label(self):
        return f"{self.kind} {self.obj.get('id', '?')} ({self.where})"


def push(client, paths, on_result=None, upload_options=None, progress_for=None, dry=False, comment=None):
    """Apply every object found in `paths` (files or directories) and return a PushResult for each entry, each change
    with `comment` when given. With `dry`, nothing is written: local media files are checked, not uploaded, and
    objects are sent with dryRun (service.client.dry_run says what that promises).

    Unreadable files and malformed entries come first, then the objects whose kind and id appear more than once (none
    of them is sent), then stations, processes and products in this order (products refer to processes).
    `on_result(result)` is called as each one is known. `upload_options` go to every upload of a local media file;
    `progress_for(file)`, if given, returns a context manager around that upload whose value is a dict of more options
    (`progress`, `resumed`).
    ServerUnreachable stops the push: every further object would wait through the same retries.
    """
    report = on_result or (lambda result: None)
    results = []

    def record(result):
        results.append(result)
        report(result)

    items = _once_each(_collect(paths, record), record)
    uploaded, checked_processes = {}, set()
    for item in sorted(items, key=lambda item: KINDS.index(item.kind)):
        label = item.label
        try:
            if dry:
                outcome = _check(client, item, checked_processes)
            else:
                if item.kind == "process":
                    _upload_local_media(client, item, uploaded, upload_options or {}, progress_for)
                outcome = getattr(client, f"create_{item.kind}")(item.obj, comment=comment)
        except ServerUnreachable:
            raise
        except ClientError as error:
            record(PushResult(label, error=describe(error)))
        except ValueError as error:
            record(PushResult(label, error=str(error)))
        except OSError as error:  # a local media file that cannot be read
            record(PushResult(label, error=f"{error.strerror or error}: {error.filename}"))
        else:
            record(PushResult(label, outcome=outcome))
    return results


def input_files(paths):
    """The files named, and the .json/.yaml/.yml files under the directories named, in a stable order; a file named
    twice (`wis push dir dir/a.yaml`) once."""
    seen = set()
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(
                candidate for candidate in path.rglob("*")
                if candidate.suffix.lower() in SUFFIXES and candidate.is_file()
                and not any(part.startswith(".") for part in candidate.relative_to(path).parts)
            )
        else:
            found = [path]
        for file in found:
            if file.resolve() not in seen:
                seen.add(file.resolve())
                yield file


def _once_each(items, record):
    """The items whose kind and id no other item of the push has. Each of the others is recorded as an error naming
    where else it is, and none of them is sent: which one was meant is not for the push to guess, and sending each in
    turn would store a revision per copy at every push of unchanged files, the last one winning."""
    places = {}
    for item in items:
        if isinstance(item.obj.get("id"), str):
            places.setdefault((item.kind, item.obj["id"]), []).append(item)
    once = []
    for item in items:
        same = places.get((item.kind, item.obj.get("id")), []) if isinstance(item.obj.get("id"), str) else []
        if len(same) > 1:
            others = " and ".join(other.where for other in same if other is not item)
            record(PushResult(item.label, error=f"{item.kind} {item.obj['id']} is also at {others}: an object goes "
                                                f"once in a push; none of its copies is sent"))
        else:
            once.append(item)
    return once


def _collect(paths, record):
    """Read every input file; return the items, recording one failed PushResult per unreadable entry."""
    items = []
    for path in input_files(paths):
        try:
            with open(path, encoding="utf-8") as handle:
                content = json.load(handle) if path.suffix.lower() == ".json" else yaml.safe_load(handle)
        except (OSError, ValueError, yaml.YAMLError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else " ".join(str(error).split())
            record(PushResult(str(path), error=f"cannot read: {reason}"))
            continue
        except RecursionError:  # the parsers recurse once per level: thousands of levels end Python's stack
            record(PushResult(str(path), error=f"cannot read: nested deeper than {MAX_JSON_DEPTH} levels"))
            continue
        entries = content if isinstance(content, list) else [content]
        for position, entry in enumerate(entries):
            where = f"{path}[{position}]" if isinstance(content, list) else str(path)
            if (not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in KINDS
                    or not isinstance(next(iter(entry.values())), dict)):
                record(PushResult(where, error="expected one object of the form {\"station\": {...}}, "
                                               "{\"process\": {...}} or {\"product\": {...}}"))
                continue
            kind, obj = next(iter(entry.items()))
            item = _Item(kind, obj, path, where)
            problem = _not_json(obj, kind)
            if problem:
                record(PushResult(item.label, error=problem))
            else:
                items.append(item)
    return items


def _not_json(value, field):
    """What in a value read from a file JSON cannot carry, as "<field path>: <why>": a date, binary data, a set, a key
    that is not text, a number that is not finite, nesting deeper than MAX_JSON_DEPTH (aliases of YAML can make a
    list hold itself); None when it all goes as JSON. Walked without recursing, in the order of the file."""
    waiting, seen = [(value, field, 1)], 0
    while waiting:
        value, field, depth = waiting.pop()
        seen += 1
        if seen > MAX_INPUT_SIZE:  # a value is at least a character of JSON: the server refuses more anyway
            return f"more than {MAX_INPUT_SIZE:,} values (YAML aliases, repeated): larger than the service takes"
        if isinstance(value, (dict, list)) and depth > MAX_JSON_DEPTH:
            return f"nested deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(value, dict):
            for strange in (key for key in value if not isinstance(key, str)):
                if isinstance(strange, bool):
                    return (f"{field}: a key read as {str(strange).lower()} (YAML reads an unquoted yes, no, on or off "
                            f"so); field names are text: quote it")
                return f"{field}: the key {_shown(strange)} is {_what(strange)}; field names are text: quote it"
            waiting += [(child, f"{field}.{key}", depth + 1) for key, child in reversed(value.items())]
        elif isinstance(value, list):
            waiting += [(child, f"{field}[{position}]", depth + 1)
                        for position, child in reversed(list(enumerate(value)))]
        elif isinstance(value, float) and not math.isfinite(value):
            return f"{field}: {value} is not a finite number, which JSON cannot carry"
        elif not isinstance(value, (str, int, float, type(None))):
            return f"{field}: {_shown(value)} is {_what(value)}"
    return None


def _what(value):
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "a number"
    return next((said for kind, said in NOT_JSON.items() if isinstance(value, kind)),
                f"a {type(value).__name__}, which JSON cannot carry")


def _shown(value):
    text = str(value) if isinstance(value, (datetime.date, datetime.datetime)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(client, item, checked_processes):
    """The dry run of one item: its local media files checked here, the object by the server with dryRun."""
    local_fields = set()
    if item.kind == "process":
        for key, holder, field in media_references(item.obj):
            if not holder["path"].startswith(MEDIA_PATH_ROOT):
                file = _local_file(item, holder["path"], field)
                dry_run.check_media_file(file)
                _destination(file, MEDIA_KIND[key], f"{field}: {holder['path']}")
                local_fields.add(field)
    pending = local_fields | dry_run.process_fields(item.kind, item.obj, checked_processes)
    checked = dry_run.check(client, item.kind, item.obj, pending)
    if item.kind == "process":
        checked_processes.add(item.obj.get("id"))
    waiting = f"; {checked.pending} field(s) wait for what the push creates first" if checked.pending else ""
    return f"{checked.outcome} (dry run{waiting})"


def _local_file(item, path, field):
    file = (item.source.parent / Path(path).expanduser()).resolve()
    if not file.is_file():
        raise ValueError(f"{field}: {path}: no such file (looked for {file})")
    return file


def _upload_local_media(client, item, uploaded, upload_options, progress_for):
    """Upload the local files a process refers to and put their media paths in their place."""
    for key, holder, field in media_references(item.obj):
        if holder["path"].startswith(MEDIA_PATH_ROOT):
            continue
        file = _local_file(item, holder["path"], field)
        destination = _destination(file, MEDIA_KIND[key], f"{field}: {holder['path']}")
        if (file, destination) not in uploaded:
            try:
                with progress_for(file) if progress_for else nullcontext({}) as hooks:
                    uploaded[file, destination] = client.upload(file, destination, **upload_options, **hooks)
            except ServerUnreachable:
                raise
            except ClientError as error:
                raise ValueError(f"{field}: cannot upload {holder['path']}: {describe(error)}") from None
        holder["path"] = uploaded[file, destination]


def _destination(file, kind, where):
    """The destination of a local file from its content, if it is of the kind (image or video) the field holds."""
    fmt = file_format(file)
    destination = FORMAT_DESTINATIONS.get(fmt)
    if destination is None or DESTINATIONS[destination].kind != kind:
        accepted = " or ".join(FORMATS[f].label for d in DESTINATIONS.values() if d.kind == kind for f in d.formats)
        what = f"a {FORMATS[fmt].label} file" if fmt else "not a recognised image or video file"
        raise ValueError(f"{where}: {'an' if kind == 'image' else 'a'} {kind} file must be {accepted}; this is {what}")
    return destination
