"""`wis`: serve the service, upload media, push work instructions from files, export and import an org, delete and
restore objects, collect garbage, upgrade the shared backend's database and move a data directory into it."""
import argparse
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from service.archive import ArchiveError, ArchiveReader
from service.client import DEFAULT_CHUNK_SIZE, DEFAULT_PARALLEL, Client, ClientError, describe, transfer
from service.config import load_config, uses_shared_backend
from service.domain.media_gc import delete_unreferenced, unreferenced_media
from service.errors import ConfigurationError, StorageFailed
from service.interface import DESTINATIONS, MB
from service.storage import database_options, open_repository
from service.storage.files import FileRepository
from service.storage.migration import copy_data_directory, is_data_directory
from service.storage.tokens import DEFAULT_TOKEN_FILE

DEFAULT_URL = "http://127.0.0.1:8000"


class UsageError(Exception):
    """A mistake on the command line or in an input file, reported as one line."""


def size_argument(text):
    """Parse `5242880`, `512K`, `5M` or `5MB` into bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)[bB]?\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use bytes, or a number with K or M)")
    return int(match.group(1)) * {"": 1, "k": 1024, "m": MB}[match.group(2).lower()]


def int_at_least(minimum):
    """An argparse type: an integer no smaller than `minimum`."""
    def integer(text):
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}")
        return value

    return integer


def build_parser():
    parser = argparse.ArgumentParser(prog="wis", description="Serve the work-instruction service, upload media, "
                                     "push work instructions from files, export and import an org, delete and "
                                     "restore objects, collect garbage.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the service with gunicorn")
    serve.add_argument("--bind", help="host:port to listen on (default: $WIS_BIND, else 0.0.0.0:$PORT when PORT "
                                      "is set, else 127.0.0.1:8000)")
    serve.add_argument("--workers", type=int_at_least(1), help="worker processes (default: $WIS_WORKERS or CPUs + 1)")
    serve.add_argument("--data-dir", help="data directory (default: $WIS_DATA_DIR or ./data)")
    serve.add_argument("--dev", action="store_true", help="one worker that reloads when the code changes")
    serve.set_defaults(run=serve_command)

    def add_server_options(command):
        command.add_argument("--url", default=os.environ.get("WIS_URL", DEFAULT_URL),
                             help=f"service URL (default: $WIS_URL or {DEFAULT_URL})")
        command.add_argument("--token", help="API token (default: $WIS_TOKEN, else the embedded default token "
                                              "of a service on this machine, DATA_DIR/default-token)")
        command.add_argument("--data-dir", help="data directory of a service on this machine, whose default token "
                                                "is used when no token is given (default: $WIS_DATA_DIR or ./data)")
        command.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each answer")
        command.add_argument("--retries", type=int_at_least(0), default=4,
                             help="retries of a request after a connection error, timeout or 500/502/503/504; "
                                  "a mutation only when the connection could not be made (default 4)")
        command.add_argument("--chunk-size", type=size_argument, default=DEFAULT_CHUNK_SIZE,
                             help="chunk size of files over 10 MB, e.g. 5M (default 5M, at most 10M)")
        command.add_argument("--parallel", type=int_at_least(1), default=DEFAULT_PARALLEL,
                             help=f"chunks sent at the same time (default {DEFAULT_PARALLEL})")
        command.add_argument("--state-dir", default=os.environ.get("WIS_STATE_DIR"),
                             help="where interrupted uploads are remembered (default ~/.cache/wis/uploads)")
        command.add_argument("--no-progress", action="store_true",
                             help="do not draw progress bars (drawn on stderr when it is a terminal)")

    upload = commands.add_parser("upload", help="upload a media file and print its path")
    upload.add_argument("file")
    upload.add_argument("--destination", choices=list(DESTINATIONS),
                        help="default: from the file's content: PNG or JPEG -> stepImage, MP4 -> stepVideo, "
                             "GIF -> stepVideoGif")
    add_server_options(upload)
    upload.set_defaults(run=upload_command)

    push = commands.add_parser(
        "push", help="create or update stations, processes and products described in JSON or YAML files",
        description="Each file holds one object or a list of objects, each of the form {\"station\": {...}}, "
                    "{\"process\": {...}} or {\"product\": {...}}. Directories are searched for "
                    ".json, .yaml and .yml files. Local media paths are uploaded first, to the destination "
                    "their content says.")
    push.add_argument("files", nargs="+", metavar="FILE")
    push.add_argument("--dry-run", action="store_true",
                      help="write nothing: check the files, the local media (format, size) and every object with the "
                           "server's dryRun")
    add_server_options(push)
    push.set_defaults(run=push_command)

    export = commands.add_parser(
        "export", help="write one org's stations, processes, products and their media into an archive (.tar.gz)",
        description="Reads every object of the token's org in input form and the media its processes refer to, "
                    "through the API, into an archive of format 1 that `wis import` reads.")
    export.add_argument("file", metavar="FILE", help="the archive to write (replaced if it exists)")
    export.add_argument("--org", default="default",
                        help="the org's name recorded in the archive's manifest (the API does not tell a client its "
                             "org; default: default)")
    add_server_options(export)
    export.set_defaults(run=export_command)

    import_ = commands.add_parser(
        "import", help="send an archive of `wis export` to a server (media, stations, processes, products)",
        description="Checks the whole archive first (a damaged one sends nothing), then uploads its media, rewrites "
                    "the media paths of its processes to the paths the server answers, and creates or updates "
                    "stations, processes and products. Running it again changes nothing.")
    import_.add_argument("file", metavar="FILE")
    import_.add_argument("--dry-run", action="store_true",
                         help="write nothing: check the archive, its media locally and every object with the "
                              "server's dryRun")
    add_server_options(import_)
    import_.set_defaults(run=import_command)

    def add_object_command(name, run, help, revisions=(), condition=None):
        """A verb on one object: KIND ID and the revision numbers named in `revisions`, with --if-revision and
        --dry-run when `condition` says what the condition means."""
        command = commands.add_parser(name, help=help)
        command.add_argument("kind", choices=("process", "product", "station"), metavar="KIND",
                             help="process, product or station")
        command.add_argument("id", metavar="ID")
        for revision in revisions:
            command.add_argument(revision, type=int_at_least(1), metavar=revision.upper())
        if condition:
            command.add_argument("--if-revision", type=int_at_least(0), metavar="N", help=condition)
            command.add_argument("--dry-run", action="store_true", help="check, write nothing")
        add_server_options(command)
        command.set_defaults(run=run)

    add_object_command("delete", delete_command, "delete a process, product or station (its history stays)",
                       condition="only if its current revision is N")
    add_object_command("restore", restore_command, "make a past revision of an object its newest (deleted ones too)",
                       revisions=("revision",),
                       condition="only if its current revision is N (0: only if it does not exist now)")
    add_object_command("history", history_command, "list the revisions of an object, newest first")
    add_object_command("diff", diff_command, "print what changed from revision FROM to revision TO, a change a line",
                       revisions=("from", "to"))

    gc = commands.add_parser("gc", help="remove expired upload streams and list (or delete) unreferenced media")
    gc.add_argument("--data-dir", default=os.environ.get("WIS_DATA_DIR"),
                    help="data directory (default: $WIS_DATA_DIR or ./data)")
    gc.add_argument("--min-age-hours", type=float, default=1.0,
                    help="only media older than this count as garbage, so a file uploaded for a process "
                         "that is about to be pushed is spared (default 1)")
    gc.add_argument("--delete", action="store_true", help="delete the unreferenced media")
    gc.set_defaults(run=gc_command)

    db = commands.add_parser("db", help="the shared backend's PostgreSQL database (WIS_DATABASE_URL)")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="DB_COMMAND")
    upgrade = db_commands.add_parser("upgrade", help="bring the database schema up to date (safe to run again, and "
                                                     "from several nodes at once)")
    upgrade.set_defaults(run=db_upgrade_command)

    migrate = commands.add_parser(
        "migrate", help="copy a data directory into the shared backend",
        description="Copy the documents (keeping createdAt, updatedAt and revision), media and open upload streams of "
                    "a file data directory into the shared backend configured by WIS_DATABASE_URL and WIS_S3_BUCKET. "
                    "Safe to run again: what is already there is left unchanged.")
    migrate.add_argument("--from-data-dir", required=True, metavar="DIR", help="the data directory to copy from")
    migrate.set_defaults(run=migrate_command)
    return parser


def main(argv=None):
    """Entry point of the `wis` console script."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except ClientError as error:
        print(f"error: {describe(error)}", file=sys.stderr)
    # ValueError: a request the client refused; ArchiveError: an archive that cannot be used at all.
    except (UsageError, ConfigurationError, ValueError, ArchiveError) as error:
        print(f"error: {error}", file=sys.stderr)
    except StorageFailed as error:  # the database, the bucket or the disk of a storage command failed
        print(f"error: {error}", file=sys.stderr)
    except OSError as error:
        # A local file or directory (input, upload state, data directory) that cannot be used.
        print(f"error: {error.strerror or error}: {error.filename}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume an upload", file=sys.stderr)
        return 130
    return 1


# -- serve ------------------------------------------------------------------------------------------

def serve_command(args):
    argv = [sys.executable, "-m", "gunicorn", "-c", "python:service.gunicorn_config"]
    if args.bind:
        argv += ["--bind", args.bind]
    if args.dev:
        argv += ["--reload", "--workers", "1"]
    elif args.workers:
        argv += ["--workers", str(args.workers)]
    argv.append("service:create_app()")
    if args.data_dir:
        os.environ["WIS_DATA_DIR"] = args.data_dir
    sys.stdout.flush()
    sys.stderr.flush()
    # Replace this process, so signals (TERM from a supervisor, Ctrl-C) reach gunicorn itself.
    os.execv(sys.executable, argv)


# -- upload and push --------------------------------------------------------------------------------

def find_token(args):
    """--token, else $WIS_TOKEN, else the default token a service on this machine keeps in its data directory."""
    token = args.token or os.environ.get("WIS_TOKEN")
    if token:
        return token
    data_dir = load_config({"DATA_DIR": args.data_dir} if args.data_dir else {})["DATA_DIR"]
    file = Path(data_dir).absolute() / DEFAULT_TOKEN_FILE
    try:
        token = file.read_text().strip()
    except FileNotFoundError:
        token, reason = None, "does not exist"
    except OSError as error:
        token, reason = None, f"cannot be read ({error.strerror or error})"
    else:
        reason = "is empty"
    if not token:
        raise UsageError(f"no API token: no --token, WIS_TOKEN is not set, and {file} {reason} (a service started "
                         f"without WIS_API_TOKENS keeps its token there; point --data-dir or WIS_DATA_DIR at its "
                         f"data directory)")
    return token


def make_client(args):
    return Client(args.url, find_token(args), timeout=args.timeout, retries=args.retries)


@contextmanager
def progress_bar(args, path):
    """A progress bar on stderr for the upload of one file; its value is the client's progress callbacks."""
    path = Path(path)
    size = path.stat().st_size if path.is_file() else 0
    with tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, desc=path.name, file=sys.stderr,
              disable=True if args.no_progress else None, leave=False) as bar:
        def resumed(held):
            # What the server already holds is the bar's start, not bytes sent at some rate.
            bar.initial = bar.n = bar.last_print_n = held
            bar.refresh()

        yield {"progress": bar.update, "resumed": resumed}


def upload_options(args):
    return {"chunk_size": args.chunk_size, "parallel": args.parallel, "state_dir": args.state_dir}


def upload_command(args):
    with make_client(args) as client, progress_bar(args, args.file) as hooks:
        path = client.upload(args.file, args.destination, **upload_options(args), **hooks)
    print(path)


def show_result(result):
    print(f"{result.label}: {result.outcome}" if result.error is None else f"{result.label}: error: {result.error}",
          flush=True)


def push_command(args):
    with make_client(args) as client:
        results = client.push(args.files, on_result=show_result, progress_for=lambda file: progress_bar(args, file),
                              dry_run=args.dry_run, **upload_options(args))
    return 1 if any(result.error is not None for result in results) else 0


# -- export and import ------------------------------------------------------------------------------

@contextmanager
def transfer_progress(args, media_bytes=None, objects=None):
    """Two bars on stderr, media bytes and objects; the value is the `progress(what, n)` of service.client.transfer."""
    disable = True if args.no_progress else None
    with tqdm(total=media_bytes, unit="B", unit_scale=True, unit_divisor=1024, desc="media", file=sys.stderr,
              disable=disable, leave=False) as media, \
            tqdm(total=objects, unit=" objects", desc="objects", file=sys.stderr, disable=disable, leave=False,
                 position=1) as counted:
        yield lambda what, n: (media if what == "media" else counted).update(n)


def export_command(args):
    with make_client(args) as client, transfer_progress(args) as progress:
        exported = transfer.export_org(client, args.file, args.org, on_result=show_result, progress=progress)
    counts = exported.counts
    print(f"exported {counts['stations']} station(s), {counts['processes']} process(es), {counts['products']} "
          f"product(s) and {counts['media']} media file(s) of org {args.org} to {args.file}", file=sys.stderr)
    return 1 if exported.problems else 0


def import_command(args):
    reader = ArchiveReader(args.file)
    contents = reader.check()
    print(f"{args.file}: org {contents.org}, exported {contents.exported_at}: "
          f"{contents.counts['stations']} station(s), "
          f"{contents.counts['processes']} process(es), {contents.counts['products']} product(s), "
          f"{contents.counts['media']} media file(s)" + (" (dry run: nothing is written)" if args.dry_run else ""),
          file=sys.stderr)
    media_bytes = sum(record["size"] for record in contents.media.values())
    objects = sum(len(ids) for ids in contents.ids.values())
    with make_client(args) as client, transfer_progress(args, media_bytes, objects) as progress:
        results = transfer.import_archive(client, reader, dry=args.dry_run, on_result=show_result,
                                          progress=progress, upload_options=upload_options(args))
    failed = sum(result.error is not None for result in results)
    print(f"{len(results) - failed} entr{'y' if len(results) - failed == 1 else 'ies'} "
          f"{'checked' if args.dry_run else 'imported'}, {failed} failed", file=sys.stderr)
    return 1 if failed else 0


# -- delete, restore, history -----------------------------------------------------------------------

def delete_command(args):
    with make_client(args) as client:
        outcome = client.delete(args.kind, args.id, if_revision=args.if_revision, dry_run=args.dry_run)
    print(f"{args.kind} {args.id}: {outcome}" + (" (dry run)" if args.dry_run else ""))


def restore_command(args):
    with make_client(args) as client:
        outcome = client.restore(args.kind, args.id, args.revision, if_revision=args.if_revision,
                                 dry_run=args.dry_run)
    print(f"{args.kind} {args.id}: {outcome} from revision {args.revision}" + (" (dry run)" if args.dry_run else ""))


def history_command(args):
    with make_client(args) as client:
        after = None
        while True:
            page = client.history(args.kind, args.id, first=100, after=after)
            for revision in page:
                print(f"{revision['revision']}\t{revision['savedAt']}\t{revision['change']}")
            if len(page) < 100:
                break
            after = page[-1]["revision"]


def diff_command(args):
    with make_client(args) as client:
        lines = client.changes(args.kind, args.id, getattr(args, "from"), args.to)
    for line in lines:
        print(line)
    if not lines:
        print(f"nothing changed from revision {getattr(args, 'from')} to revision {args.to}", file=sys.stderr)


# -- storage commands: gc, db upgrade, migrate ------------------------------------------------------

def open_checked_repository(config):
    """The configured repository; the shared backend's is checked first (database reachable and upgraded, bucket
    there), so a wrong setting is one line, not a failure half-way."""
    repo = open_repository(config)
    if uses_shared_backend(config):
        repo.check_start()
    return repo


def gc_command(args):
    overrides = {"DATA_DIR": args.data_dir} if args.data_dir else {}
    config = load_config(overrides, serving=False)
    if not uses_shared_backend(config) and not Path(config["DATA_DIR"]).is_dir():
        raise UsageError(f"data directory {config['DATA_DIR']} does not exist")
    repo = open_checked_repository(config)
    removed = repo.sweep()
    print(f"removed {removed} expired upload stream(s)", file=sys.stderr)
    garbage = unreferenced_media(repo, older_than=time.time() - args.min_age_hours * 3600)
    if args.delete:
        deleted = delete_unreferenced(repo, garbage)
        for org, path in deleted:
            print(f"{org}\t{path}")
        print(f"{len(deleted)} unreferenced media file(s) deleted", file=sys.stderr)
        if len(deleted) < len(garbage):
            print(f"{len(garbage) - len(deleted)} listed media file(s) kept: a process refers to them now, or they "
                  "were gone already", file=sys.stderr)
        return
    for org, path in garbage:
        print(f"{org}\t{path}")
    print(f"{len(garbage)} unreferenced media file(s) found (use --delete to delete them)", file=sys.stderr)


def db_upgrade_command(args):
    config = load_config(serving=False)
    if not uses_shared_backend(config):
        raise UsageError("no database configured: set WIS_DATABASE_URL (or DATABASE_URL, as Procfile platforms do) to "
                         "the PostgreSQL database of the shared backend")
    from service.storage.shared.database import Database  # psycopg loads only for the shared backend

    before, after = Database(config["DATABASE_URL"], **database_options(config)).upgrade()
    print(f"database schema at version {after} " + (f"(was {before})" if before != after else "(already up to date)"))


def migrate_command(args):
    config = load_config(serving=False)
    if not uses_shared_backend(config):
        raise UsageError("wis migrate copies into the shared backend: set WIS_DATABASE_URL (or DATABASE_URL) and "
                         "WIS_S3_BUCKET to the database and bucket to copy into")
    if not is_data_directory(args.from_data_dir):
        raise UsageError(f"{args.from_data_dir} is not a data directory of the service (it has no orgs folder)")
    target = open_checked_repository(config)
    source = FileRepository(args.from_data_dir, config["STREAM_TTL_HOURS"] * 3600)
    counts = copy_data_directory(source, target)
    for what, outcomes in counts.items():
        print(f"{what}: {outcomes['copied']} copied, {outcomes['unchanged']} unchanged")
    copied = sum(outcomes["copied"] for outcomes in counts.values())
    print(f"{copied} item(s) copied" if copied else "nothing changed: the shared backend already holds everything")
    token_file = Path(args.from_data_dir).absolute() / DEFAULT_TOKEN_FILE
    if token_file.is_file():
        # The token is a secret: say where it is and the form of the entry, never the token itself.
        print(f"the org `default` used the default token kept in {token_file}: the shared backend accepts only "
              f"WIS_API_TOKENS, so add `default:<the token in that file>` to it, or its clients are refused (401); "
              "see docs/shared-backend.md, \"Moving in\"", file=sys.stderr)
