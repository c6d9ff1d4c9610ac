"""`wis`: serve the service, upload media, push work instructions from files, collect garbage."""
import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

import yaml
from tqdm import tqdm

from service.client import DEFAULT_CHUNK_SIZE, DEFAULT_PARALLEL, DESTINATIONS, MB, Client, ClientError, ServerUnreachable
from service.config import load_config
from service.domain.media_gc import delete_media, media_references, unreferenced_media
from service.storage import Repository

DEFAULT_URL = "http://127.0.0.1:8000"
PUSH_KINDS = ("station", "process", "product")  # also the order objects are applied in
PUSH_SUFFIXES = (".json", ".yaml", ".yml")
VIDEO_DESTINATIONS = {".mp4": "stepVideo", ".gif": "stepVideoGif"}


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
                                     "push work instructions from files, collect garbage.")
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
        command.add_argument("--token", default=os.environ.get("WIS_TOKEN"),
                             help="API token (default: $WIS_TOKEN)")
        command.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each answer")
        command.add_argument("--retries", type=int_at_least(0), default=4,
                             help="retries of a request after a connection error, timeout or 5xx (default 4)")
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
    upload.add_argument("--destination", required=True, choices=DESTINATIONS)
    add_server_options(upload)
    upload.set_defaults(run=upload_command)

    push = commands.add_parser(
        "push", help="create or update stations, processes and products described in JSON or YAML files",
        description="Each file holds one object or a list of objects, each of the form {\"station\": {...}}, "
                    "{\"process\": {...}} or {\"product\": {...}}. Directories are searched for "
                    ".json, .yaml and .yml files. Local media paths are uploaded first.")
    push.add_argument("files", nargs="+", metavar="FILE")
    add_server_options(push)
    push.set_defaults(run=push_command)

    gc = commands.add_parser("gc", help="remove expired upload streams and list (or delete) unreferenced media")
    gc.add_argument("--data-dir", default=os.environ.get("WIS_DATA_DIR"),
                    help="data directory (default: $WIS_DATA_DIR or ./data)")
    gc.add_argument("--min-age-hours", type=float, default=1.0,
                    help="only media older than this count as garbage, so a file uploaded for a process "
                         "that is about to be pushed is spared (default 1)")
    gc.add_argument("--delete", action="store_true", help="delete the unreferenced media")
    gc.set_defaults(run=gc_command)
    return parser


def main(argv=None):
    """Entry point of the `wis` console script."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except ClientError as error:
        print(f"error: {describe(error)}", file=sys.stderr)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
    except OSError as error:
        # A local file or directory (input, upload state, data directory) that cannot be used.
        print(f"error: {error.strerror or error}: {error.filename}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume an upload", file=sys.stderr)
        return 130
    return 1


def describe(error):
    """One line for a ClientError: the message, the field when not already named, the HTTP status."""
    message = error.message
    if error.field and error.field not in message:
        message = f"{error.field}: {message}"
    if error.status is not None and error.status >= 400:
        message += f" (HTTP {error.status})"
    return message


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

def make_client(args):
    if not args.token:
        raise UsageError("no API token: pass --token or set WIS_TOKEN")
    return Client(args.url, args.token, timeout=args.timeout, retries=args.retries)


def upload_file(client, args, path, destination):
    """Upload one file with a progress bar on stderr; return its media path."""
    path = Path(path)
    size = path.stat().st_size if path.is_file() else 0
    with tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, desc=path.name, file=sys.stderr,
              disable=True if args.no_progress else None, leave=False) as bar:
        return client.upload(path, destination, chunk_size=args.chunk_size, parallel=args.parallel,
                             progress=bar.update, state_dir=args.state_dir)


def upload_command(args):
    client = make_client(args)
    print(upload_file(client, args, args.file, args.destination))


def push_command(args):
    client = make_client(args)
    items, failures = collect_objects(args.files)
    uploaded = {}
    # Stations and processes first: products reference processes.
    for item in sorted(items, key=lambda item: PUSH_KINDS.index(item.kind)):
        label = f"{item.kind} {item.obj.get('id', '?')}"
        try:
            if item.kind == "process":
                upload_local_media(client, args, item, uploaded)
            result = getattr(client, f"create_{item.kind}")(item.obj)
        except ServerUnreachable:
            raise  # every further object would wait through the same retries
        except ClientError as error:
            failures += 1
            print(f"{label}: error: {describe(error)}", flush=True)
        except UsageError as error:
            failures += 1
            print(f"{label}: error: {error}", flush=True)
        else:
            print(f"{label}: {result}", flush=True)
    return 1 if failures else 0


class PushItem(NamedTuple):
    kind: str
    obj: dict
    source: Path


def input_files(paths):
    """The files named, and the .json/.yaml/.yml files under the directories named, in a stable order."""
    for name in paths:
        path = Path(name)
        if path.is_dir():
            yield from sorted(
                found for found in path.rglob("*")
                if found.suffix.lower() in PUSH_SUFFIXES and found.is_file()
                and not any(part.startswith(".") for part in found.relative_to(path).parts)
            )
        else:
            yield path


def collect_objects(paths):
    """Read every input file; return (items, number of failures), printing one line per unreadable entry."""
    items, failures = [], 0
    for path in input_files(paths):
        try:
            with open(path, encoding="utf-8") as handle:
                content = json.load(handle) if path.suffix.lower() == ".json" else yaml.safe_load(handle)
        except (OSError, ValueError, yaml.YAMLError) as error:
            failures += 1
            reason = error.strerror if isinstance(error, OSError) and error.strerror else " ".join(str(error).split())
            print(f"{path}: error: cannot read: {reason}", flush=True)
            continue
        entries = content if isinstance(content, list) else [content]
        for position, entry in enumerate(entries):
            where = f"{path}[{position}]" if isinstance(content, list) else str(path)
            if (not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in PUSH_KINDS
                    or not isinstance(next(iter(entry.values())), dict)):
                failures += 1
                print(f"{where}: error: expected one object of the form {{\"station\": {{...}}}}, "
                      f"{{\"process\": {{...}}}} or {{\"product\": {{...}}}}", flush=True)
                continue
            kind, obj = next(iter(entry.items()))
            items.append(PushItem(kind, obj, path))
    return items, failures


def upload_local_media(client, args, item, uploaded):
    """Upload the local files a process refers to and put their media paths in their place."""
    for key, holder, field in media_references(item.obj):
        if holder["path"].startswith("/api/v1/"):
            continue
        file = (item.source.parent / Path(holder["path"]).expanduser()).resolve()
        if key == "video":
            destination = VIDEO_DESTINATIONS.get(file.suffix.lower())
            if destination is None:
                raise UsageError(f"{field}: {holder['path']}: a video must be an .mp4 or a .gif file")
        else:
            destination = "stepImage"
        if not file.is_file():
            raise UsageError(f"{field}: {holder['path']}: no such file (looked for {file})")
        if (file, destination) not in uploaded:
            try:
                uploaded[file, destination] = upload_file(client, args, file, destination)
            except ServerUnreachable:
                raise
            except ClientError as error:
                raise UsageError(f"{field}: cannot upload {holder['path']}: {describe(error)}") from None
        holder["path"] = uploaded[file, destination]


# -- gc ---------------------------------------------------------------------------------------------

def gc_command(args):
    overrides = {"DATA_DIR": args.data_dir} if args.data_dir else {}
    config = load_config(overrides)
    if not Path(config["DATA_DIR"]).is_dir():
        raise UsageError(f"data directory {config['DATA_DIR']} does not exist")
    repo = Repository(config["DATA_DIR"], config["STREAM_TTL_HOURS"] * 3600)
    removed = repo.sweep()
    print(f"removed {removed} expired upload stream(s)", file=sys.stderr)
    garbage = unreferenced_media(repo, older_than=time.time() - args.min_age_hours * 3600)
    for org, path in garbage:
        if args.delete:
            delete_media(repo, org, path)
        print(f"{org}\t{path}")
    verb = "deleted" if args.delete else "found (use --delete to delete them)"
    print(f"{len(garbage)} unreferenced media file(s) {verb}", file=sys.stderr)
