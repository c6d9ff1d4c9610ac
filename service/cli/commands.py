"""`wis`: serve the service, upload media, push work instructions from files, export and import an org, delete and
restore objects, follow change events, manage webhooks, collect garbage, upgrade the shared backend's database and
move a data directory into it, manage API tokens. One module a group of commands; each adds its commands to the parser
and runs them. `run` is what the console script's `main` (service.cli) runs."""
import argparse
import os
import sys

from service.cli import INTERRUPTED, events, objects, operations, serve, tokens, transfers, webhooks
from service.cli.common import CLOSED_OUTPUT, UsageError, stdout_closed
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
        status = args.run(args) or 0
        sys.stdout.flush()  # a closed pipe is met here, not in the interpreter's last flush (exit status 120)
        return status
    except ClientError as error:
        print(f"error: {describe(error)}", file=sys.stderr)
    # ValueError: a request the client refused; ArchiveError: an archive that cannot be used at all.
    except (UsageError, ConfigurationError, ValueError, ArchiveError) as error:
        print(f"error: {error}", file=sys.stderr)
    # A storage command's refusal (a token's name taken), or its database, bucket or disk that failed.
    except ServiceError as error:
        print(f"error: {error}", file=sys.stderr)
    except OSError as error:
        if isinstance(error, BrokenPipeError) and stdout_closed():
            return CLOSED_OUTPUT  # `wis history ... | head -1`: as any Unix tool whose reader went away, quietly
        # A local file or directory (input, upload state, data directory) that cannot be used.
        print(f"error: {os_error_message(error)}", file=sys.stderr)
    except KeyboardInterrupt:
        # What the command says an interrupt leaves (an upload to resume, an archive as it was), else no more.
        print(getattr(args, "interrupted", "interrupted"), file=sys.stderr)
        return INTERRUPTED
    return 1


def os_error_message(error):
    """`<reason>: <file>` of an OSError, with the file (or both files of a rename) only when it names one: a full disk
    or a closed pipe has none, and was `No space left on device: None`."""
    names = [os.fsdecode(name) if isinstance(name, (str, bytes)) else str(name)
             for name in (error.filename, error.filename2) if name is not None]
    return ": ".join([error.strerror or str(error), *names])
