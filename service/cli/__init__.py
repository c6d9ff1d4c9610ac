"""`wis`, the command line: `main` is the console script's entry point; the commands are in service.cli.commands.

This module imports nothing but `sys`, and the commands (with the client, requests and the rest, a tenth of a second)
are imported inside `main`'s handling of Ctrl-C: an interrupt that comes while they load is the same quiet exit 130 as
one that comes later, where it used to be a KeyboardInterrupt traceback."""
import sys

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command that Ctrl-C ended


def main(argv=None):
    """Entry point of the `wis` console script: the exit status of the command of `argv` (default: sys.argv)."""
    try:
        from service.cli.commands import run

        return run(argv)
    except KeyboardInterrupt:
        # Only an interrupt during the imports gets here: run() answers those that come later, by the command.
        print("interrupted", file=sys.stderr)
        return INTERRUPTED
