"""`wis gc`, `wis db upgrade` and `wis migrate`: commands on the storage itself, run where it is."""
import math
import os
import sys
import time
from pathlib import Path

from service.cli.common import UsageError, number_argument
from service.config import load_config, uses_shared_backend
from service.domain.media_gc import delete_unreferenced, unreferenced_media
from service.storage import database_options, open_repository
from service.storage.common.data_dir_secrets import DEFAULT_TOKEN_FILE
from service.storage.files import FileRepository
from service.storage.migration import copy_data_directory, is_data_directory


# Hours, 0 or more and finite. A negative age (or -inf) made every medium count as old enough, so `--delete` could
# remove what was uploaded a moment ago for a process about to be pushed; nan listed nothing.
age_hours = number_argument("hours", "a finite number of hours, 0 or more", lambda hours: 0 <= hours < math.inf)


def add_commands(commands):
    gc = commands.add_parser("gc", help="remove expired upload streams and list (or delete) unreferenced media")
    gc.add_argument("--data-dir", default=os.environ.get("WIS_DATA_DIR"),
                    help="data directory (default: $WIS_DATA_DIR or ./data)")
    gc.add_argument("--min-age-hours", type=age_hours, default=1.0,
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
