"""`wis delete`, `wis restore`, `wis history` and `wis diff`: verbs on one process, product or station."""
import sys

from service.cli.common import add_comment_option, add_server_options, int_at_least, make_client


def add_commands(commands):
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
            add_comment_option(command)
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


def delete_command(args):
    with make_client(args) as client:
        outcome = client.delete(args.kind, args.id, if_revision=args.if_revision, dry_run=args.dry_run,
                                comment=args.comment)
    print(f"{args.kind} {args.id}: {outcome}" + (" (dry run)" if args.dry_run else ""))


def restore_command(args):
    with make_client(args) as client:
        outcome = client.restore(args.kind, args.id, args.revision, if_revision=args.if_revision,
                                 dry_run=args.dry_run, comment=args.comment)
    print(f"{args.kind} {args.id}: {outcome} from revision {args.revision}" + (" (dry run)" if args.dry_run else ""))


def history_command(args):
    with make_client(args) as client:
        after = None
        while True:
            page = client.history(args.kind, args.id, first=100, after=after)
            for revision in page:
                print("\t".join(str(value) if value is not None else "" for value in (
                    revision["revision"], revision["savedAt"], revision["change"], revision["author"],
                    revision["comment"])))
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
