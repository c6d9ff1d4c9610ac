"""`wis`: serve the service, upload media, push work instructions from files, export and import an org, delete and
restore objects, follow change events, manage webhooks, collect garbage, upgrade the shared backend's database and
move a data directory into it, manage API tokens. One module a group of commands; each adds its commands to the parser
and runs them. `run` is what the console script's `main` (service.cli) runs."""
import argparse
import sys

from service.cli import INTERRUPTED, events, objects, operations, serve, tokens, transfers, webhooks
from service.cli.common import UsageError
from service.client import ClientError, describe
from service.errors import ConfigurationError, ServiceError
from service.interface.archive import ArchiveError


def build_parser():
    parser = argparse.ArgumentParser(prog="wis", description="Serve the work-instruction service, upload media, "
                                     "push work instructions from files, export and import an org, delete and "
                                     "restore objects, collect garbage.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (serve, transfers, objects, events, webhooks, operations, tokens):
        group.add_commands(commands)
    return parser


def run(argv=None):
    """Run the command of `argv` (default: the process's arguments); its exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except ClientError as error:
        print(f"error: {describe(error)}", file=sys.stderr)
    # ValueError: a request the client refused; ArchiveError: an archive that cannot be used at all.
    except (UsageError, ConfigurationError, ValueError, ArchiveError) as error:
        print(f"error: {error}", file=sys.stderr)
    # A storage command's refusal (a token's name taken), or its database, bucket or disk that failed.
    except ServiceError as error:
        print(f"error: {error}", file=sys.stderr)
    except OSError as error:
        # A local file or directory (input, upload state, data directory) that cannot be used.
        print(f"error: {error.strerror or error}: {error.filename}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume an upload", file=sys.stderr)
        return INTERRUPTED
    return 1
