"""`wis token create`, `wis token list` and `wis token revoke`: the API tokens a service keeps (CONTRACT 16), run where
its storage is (its data directory, or its database) like `wis gc`. The tokens of WIS_API_TOKENS are not kept there:
they are changed by editing that variable."""
import os
import sys
from contextlib import closing
from pathlib import Path

from service.cli.common import UsageError
from service.cli.operations import open_checked_repository
from service.config import load_config, uses_shared_backend
from service.domain.tokens import SCOPES, create_token, list_tokens, revoke_token
from service.interface import TOKEN_HEADER

COLUMNS = ("ORG", "NAME", "SCOPE", "CREATED", "LAST USED", "REVOKED")


def add_commands(commands):
    token = commands.add_parser(
        "token", help="create, list and revoke API tokens (on the service's data directory or database)",
        description="API tokens of a scope (read: the tablet on the line; write: a pipeline; admin: an administrator), "
                    "kept hashed in the service's data directory ($WIS_DATA_DIR or ./data) or, with "
                    "WIS_DATABASE_URL, its database. Run it where the service's storage is.")
    token_commands = token.add_subparsers(dest="token_command", required=True, metavar="TOKEN_COMMAND")

    create = token_commands.add_parser("create", help="make a new token and print it, this once")
    create.add_argument("--org", required=True, help="the org the token belongs to")
    create.add_argument("--scope", required=True, choices=SCOPES, help="what the token may do")
    create.add_argument("--name", required=True, help="its name, unique in the org for ever: the author of the "
                                                      "changes it makes (1-64 of a-z, 0-9, '_', '-')")
    create.set_defaults(run=create_command)

    listing = token_commands.add_parser("list", help="list the tokens (never the tokens themselves)")
    listing.add_argument("--org", help="only this org's")
    listing.set_defaults(run=list_command)

    revoke = token_commands.add_parser("revoke", help="revoke a token: every node refuses it within seconds")
    revoke.add_argument("--org", required=True)
    revoke.add_argument("name", metavar="NAME")
    revoke.set_defaults(run=revoke_command)

    for command in (create, listing, revoke):
        command.add_argument("--data-dir", default=os.environ.get("WIS_DATA_DIR"),
                             help="the service's data directory (default: $WIS_DATA_DIR or ./data); not used with "
                                  "WIS_DATABASE_URL")


def open_tokens_repository(args):
    """The repository of the service's storage; UsageError when there is none to open (no database configured and no
    data directory there): a token made in a new, empty directory would be accepted by no service."""
    config = load_config({"DATA_DIR": args.data_dir} if args.data_dir else {}, serving=False)
    if not uses_shared_backend(config) and not (Path(config["DATA_DIR"]) / "orgs").is_dir():
        raise UsageError(f"no service storage here: {config['DATA_DIR']} is not a data directory of the service, and no "
                         "database is configured. Run wis token where the service keeps its data, with --data-dir "
                         "(or WIS_DATA_DIR) naming its data directory, or WIS_DATABASE_URL its database")
    return open_checked_repository(config)


def create_command(args):
    with closing(open_tokens_repository(args)) as repo:
        token, stored = create_token(repo, args.org, args.name, args.scope)
    print(token)
    print(f"token {stored.name!r} of org {stored.org!r} ({stored.scope}) created; it is printed this once and kept "
          f"only hashed: send it as the header  {TOKEN_HEADER}: <the token>", file=sys.stderr)


def list_command(args):
    with closing(open_tokens_repository(args)) as repo:
        tokens = list_tokens(repo, args.org)
    rows = [(token.org, token.name, token.scope, token.created_at, token.last_used_at or "never",
             token.revoked_at or "-") for token in tokens]
    widths = [max(len(row[column]) for row in [COLUMNS, *rows]) for column in range(len(COLUMNS))]
    for row in [COLUMNS, *rows]:
        print("  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip())
    if not rows:
        print("no stored tokens" + (f" of org {args.org!r}" if args.org else "") + " (those of WIS_API_TOKENS are "
              "not stored)", file=sys.stderr)


def revoke_command(args):
    with closing(open_tokens_repository(args)) as repo:
        revoked = revoke_token(repo, args.org, args.name)
    print(f"token {revoked.name!r} of org {revoked.org!r} revoked at {revoked.revoked_at}: every node refuses it "
          "within seconds, and ends the event streams and page sessions started with it")
