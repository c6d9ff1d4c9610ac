"""What the commands of `wis` share: usage errors, argument types, the options that name a server, the client they
make, and the progress bars and result lines of transfers."""
import argparse
import os
import re
import select
import sys
from contextlib import contextmanager
from pathlib import Path

from service.client import DEFAULT_CHUNK_SIZE, DEFAULT_PARALLEL, Client
from service.client.transport import token_problem
from service.config import load_config
from service.interface import MB
from service.storage.common.data_dir_secrets import DEFAULT_TOKEN_FILE

DEFAULT_URL = "http://127.0.0.1:8000"
# The status a shell reports for a command that SIGPIPE ended (128 + 13), as `yes` of `yes | head -1`: what `wis`
# exits with when the reader of its output went away (Python ignores SIGPIPE, and gets BrokenPipeError instead).
CLOSED_OUTPUT = 141
# --timeout's largest: a day is longer than anyone waits for one answer, and far below what overflows the socket's
# clock (`--timeout inf` or 1e10 was an OverflowError traceback).
MAX_TIMEOUT = 24 * 3600


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


def number_argument(unit, accepts, within):
    """An argparse type: a number (of `unit`) for which `within(value)` holds, else a message saying what it `accepts`
    (nan holds for no comparison, so `within` refuses it)."""
    def number(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of {unit}: {text!r}") from None
        if not within(value):
            raise argparse.ArgumentTypeError(f"must be {accepts}, not {text!r}")
        return value

    return number


# Seconds above 0 and at most MAX_TIMEOUT (not inf, nor nan).
timeout_argument = number_argument("seconds", f"a number of seconds above 0 and at most {MAX_TIMEOUT}",
                                   lambda seconds: 0 < seconds <= MAX_TIMEOUT)


def add_server_options(command):
    """The options of a command that talks to a server: where it is, the token, retries, uploads' chunks."""
    command.add_argument("--url", default=os.environ.get("WIS_URL", DEFAULT_URL),
                         help=f"service URL (default: $WIS_URL or {DEFAULT_URL})")
    command.add_argument("--token", help="API token (default: $WIS_TOKEN, else the embedded default token "
                                          "of a service on this machine, DATA_DIR/default-token)")
    command.add_argument("--data-dir", help="data directory of a service on this machine, whose default token "
                                            "is used when no token is given (default: $WIS_DATA_DIR or ./data)")
    command.add_argument("--timeout", type=timeout_argument, default=60.0,
                         help=f"seconds to wait for each answer (default 60, at most {MAX_TIMEOUT})")
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


def add_comment_option(command):
    """--comment: why, kept in the history beside the name of the token (CONTRACT 16)."""
    command.add_argument("--comment", help="why: kept with each change in its history, beside the name of the token "
                                           "(at most 500 characters)")


def find_token(args):
    """--token, else $WIS_TOKEN, else the default token a service on this machine keeps in its data directory; without
    the whitespace around it (a token has none: a copy-paste's), and refused, naming where it came from but never
    showing it, when it holds what an HTTP header cannot carry."""
    for token, source in ((args.token, "--token"), (os.environ.get("WIS_TOKEN"), "WIS_TOKEN")):
        if token and token.strip():
            return _sendable(token.strip(), source)
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
    return _sendable(token, file)


def _sendable(token, source):
    problem = token_problem(token)
    if problem:
        raise UsageError(f"the API token from {source} {problem}; it is not shown here")
    return token


def make_client(args):
    return Client(args.url, find_token(args), timeout=args.timeout, retries=args.retries)


def _bars_shown(args):
    """Progress bars are drawn on stderr when it is a terminal, unless --no-progress. (tqdm, imported only then, is
    a tenth of a second of every command's start-up.)"""
    return not args.no_progress and sys.stderr.isatty()


@contextmanager
def progress_bar(args, path):
    """A progress bar on stderr for the upload of one file; its value is the client's progress callbacks."""
    if not _bars_shown(args):
        yield {"progress": lambda n: None, "resumed": lambda held: None}
        return
    from tqdm import tqdm
    path = Path(path)
    size = path.stat().st_size if path.is_file() else 0
    with tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, desc=path.name, file=sys.stderr,
              leave=False) as bar:
        def resumed(held):
            # What the server already holds is the bar's start, not bytes sent at some rate.
            bar.initial = bar.n = bar.last_print_n = held
            bar.refresh()

        yield {"progress": bar.update, "resumed": resumed}


def upload_options(args):
    return {"chunk_size": args.chunk_size, "parallel": args.parallel, "state_dir": args.state_dir}


def show_result(result):
    """One line of a transfer's results. When stdout's reader went away (`wis push dir/ | head -1`), the lines are lost
    but not the work: the push (import, export) goes on to its end and exits with its own status."""
    try:
        print(f"{result.label}: {result.outcome}" if result.error is None else f"{result.label}: error: {result.error}",
              flush=True)
    except BrokenPipeError:
        if not stdout_closed():
            raise


def stdout_closed():
    """True when stdout is a pipe whose reader is gone; stdout then goes to /dev/null from here on, so that nothing more
    fails on it (what is still buffered, the interpreter's last flush)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        events = poll.poll(0)
    except (OSError, ValueError):  # no descriptor: closed, or replaced (a test's capture)
        return False
    if not any(event & select.POLLERR for _, event in events):  # Linux: POLLERR once no reader is left
        return False
    nowhere = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(nowhere, sys.stdout.fileno())
    finally:
        os.close(nowhere)
    return True


@contextmanager
def transfer_progress(args, media_bytes=None, objects=None):
    """Two bars on stderr, media bytes and objects; the value is the `progress(what, n)` of service.client.transfer."""
    if not _bars_shown(args):
        yield lambda what, n: None
        return
    from tqdm import tqdm
    with tqdm(total=media_bytes, unit="B", unit_scale=True, unit_divisor=1024, desc="media", file=sys.stderr,
              leave=False) as media, \
            tqdm(total=objects, unit=" objects", desc="objects", file=sys.stderr, leave=False,
                 position=1) as counted:
        yield lambda what, n: (media if what == "media" else counted).update(n)
