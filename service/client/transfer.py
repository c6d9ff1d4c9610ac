"""`export` and `import`: one org's objects and media, through the API of any server, into and out of an archive of
format 1 (service.interface.archive; CONTRACT 10).

Export reads every station, process and product in input form (the `input` field, a page at a time) and writes each
at once, then downloads the media the processes name, one at a time through a temporary file. Import checks the whole
archive first (a bad archive sends nothing), uploads its media (deduplication makes a second import upload nothing
new), rewrites the media paths of each process to the paths the target answered, and sends stations, processes and
products through the create mutations (an unchanged push changes nothing). An entry that fails is reported with its
reason, and what depends on it (a process whose media failed) is reported too, never sent half-rewritten.
"""
import collections
import copy
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from service.interface.kinds import KINDS
from service.interface.archive import MEDIA, ArchiveReader, ArchiveWriter, media_path_of
from service.client import dry_run
from service.client.errors import ClientError, ServerUnreachable, describe
from service.client.push import PushResult
from service.interface.media_references import media_references, referenced_media

PAGE = 500
# How many of an archive's refused entries an import reports one by one.
SHOWN_PROBLEMS = 20
# service.interface.archive's folder of each kind, and the client's word for it.
KIND_OF_FOLDER = {"stations": "station", "processes": "process", "products": "product"}


class ExportResult(NamedTuple):
    counts: dict  # {folder: entries written}
    problems: list  # PushResult of each media that could not be exported


def export_org(client, target, org, on_result=None, progress=None):
    """Write the org's objects and the media they refer to into the archive `target` (a path or a binary file
    opened for writing). `progress(kind, n)` is called with "objects" and 1, or "media" and bytes written."""
    report, advance = on_result or (lambda result: None), progress or (lambda what, n: None)
    problems = []
    with ArchiveWriter(target, org) as writer:
        referenced = set()
        for folder in KINDS:
            after = None
            while True:
                page = client.list_inputs(KIND_OF_FOLDER[folder], first=PAGE, after=after)
                for found in page:
                    writer.add_object(folder, found["id"], found["input"])
                    if folder == "processes":
                        referenced |= referenced_media(found["input"])
                    advance("objects", 1)
                if len(page) < PAGE:
                    break
                after = page[-1]["id"]
        with tempfile.TemporaryDirectory(prefix="wis-export-") as directory:
            spool = Path(directory) / "media"
            for path in sorted(referenced):
                try:
                    size = client.download(path, spool)
                except ServerUnreachable:
                    raise
                except ClientError as error:
                    problems.append(PushResult(f"media {path}", error=f"not exported: {describe(error)}"))
                    report(problems[-1])
                    continue
                writer.add_media_file(path, spool)
                advance("media", size)
        counts = writer.manifest()["counts"]
    return ExportResult(counts, problems)


def import_archive(client, path, dry=False, on_result=None, progress=None, upload_options=None, parallel=4,
                   comment=None):
    """Send the archive at `path` (or an ArchiveReader of it) to the server, each change with `comment`; a PushResult
    per entry (also to `on_result` as each is known). ArchiveError, before anything is sent, for an archive that cannot
    be used at all. With `dry`, nothing is written: media checked locally, objects sent with dryRun (see dry_run)."""
    report, advance = on_result or (lambda result: None), progress or (lambda what, n: None)
    results = []

    def record(result):
        results.append(result)
        report(result)

    reader = path if isinstance(path, ArchiveReader) else ArchiveReader(path)
    contents = reader.contents or reader.check()  # objects of one kind are then sent `parallel` at a time
    refused = _refused_media(contents.problems, record, results.append, report)
    moved, failed = {}, dict.fromkeys(refused, "refused in the archive")
    for entry in reader.media():
        label = f"media {entry.path}"
        try:
            if dry:
                destination = dry_run.check_media_file(Path(entry.file))
                record(PushResult(label, outcome=f"would upload to {destination} (checked locally)"))
            else:
                moved[entry.path] = client.upload(entry.file, **(upload_options or {}))
                record(PushResult(label, outcome=moved[entry.path]))
        except ServerUnreachable:
            raise
        except (ClientError, ValueError, OSError) as error:
            failed[entry.path] = _reason(error)
            record(PushResult(label, error=failed[entry.path]))
        advance("media", entry.size)
    pending_media = set(contents.media) - set(failed) if dry else set()
    sent_processes, clients = set(), _ThreadClients(client)

    def send(kind, identifier, obj):
        """(outcome, error) of one object, in a thread of the pool with a Client of its own."""
        try:
            obj = _with_paths(obj, moved, failed)
            if not dry:
                return clients.get().create(kind, obj, comment=comment), None
            pending = dry_run.media_fields(kind, obj, pending_media) | dry_run.process_fields(kind, obj, sent_processes)
            checked = dry_run.check(clients.get(), kind, obj, pending)
            waiting = f"; {checked.pending} field(s) wait for what the import creates first" if checked.pending else ""
            return f"{checked.outcome} (dry run{waiting})", None
        except ServerUnreachable:
            raise
        except (ClientError, ValueError) as error:
            return None, _reason(error)

    with clients, ThreadPoolExecutor(max_workers=parallel) as pool:
        for folder in KINDS:
            kind = KIND_OF_FOLDER[folder]
            # Objects of one kind do not refer to each other: they go `parallel` at a time, reported in archive order.
            sent = _in_order(pool, lambda item: (item[0], *send(kind, *item)), reader.objects(folder), 4 * parallel)
            for identifier, outcome, error in sent:
                record(PushResult(f"{kind} {identifier}", outcome=outcome, error=error))
                if error is None and kind == "process":
                    sent_processes.add(identifier)
                advance("objects", 1)
    return results


def _refused_media(problems, record, keep, report):
    """Record each refused entry: the first SHOWN_PROBLEMS told one by one, the rest kept and told as a count (an
    archive of 100,000 bad entries is not 100,000 lines). The media paths refused."""
    for number, problem in enumerate(problems):
        (record if number < SHOWN_PROBLEMS else keep)(PushResult(problem.entry, error=problem.message))
    if len(problems) > SHOWN_PROBLEMS:
        report(PushResult(f"{len(problems) - SHOWN_PROBLEMS} more entries",
                          error=f"refused in the archive as well (the first {SHOWN_PROBLEMS} are above)"))
    return {media_path_of(problem.entry) for problem in problems if problem.entry.startswith(MEDIA + "/")}


def _in_order(pool, function, items, window):
    """function(item) for each item, run on `pool` with at most `window` submitted ahead, yielded in order."""
    waiting = collections.deque()
    for item in items:
        waiting.append(pool.submit(function, item))
        if len(waiting) >= window:
            yield waiting.popleft().result()
    while waiting:
        yield waiting.popleft().result()


class _ThreadClients(threading.local):
    """A Client per thread of the pool, with the settings of `client` (a Client serves one thread); closed at the
    end of the `with` block."""

    def __init__(self, client):
        self.template, self.made = client, []

    def get(self):
        if not hasattr(self, "client"):
            self.client = self.template.copy()
            self.made.append(self.client)
        return self.client

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        for client in self.made:
            client.close()


def _with_paths(obj, moved, failed):
    """A copy of a process input with each media path the import uploaded replaced by the target's path; ValueError
    naming the first media that failed."""
    obj = copy.deepcopy(obj)
    for _, holder, field in media_references(obj):
        path = holder["path"]
        if path in failed:
            raise ValueError(f"{field}: its media {path} was not imported ({failed[path]})")
        holder["path"] = moved.get(path, path)
    return obj


def _reason(error):
    if isinstance(error, ClientError):
        return describe(error)
    if isinstance(error, OSError):
        return f"{error.strerror or error}: {error.filename}"
    return str(error)

