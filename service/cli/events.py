"""`wis events`: the org's change events, one a line; with --follow, as they commit."""
import json
import sys

from service.cli.common import add_server_options, int_at_least, make_client
from service.client.events import follow

PAGE = 1000


def add_commands(commands):
    events = commands.add_parser(
        "events", help="print the org's change events, one a line (with --follow, as they commit)",
        description="Each line: seq, commit time, type, id, revision and name, tab-separated (--json: the event's "
                    "envelope as the stream sends it). Without --follow, every event after --after (default: from "
                    "the oldest kept) is printed and the command ends; with --follow it goes on, reconnecting by "
                    "itself, until interrupted (from --after when given, else from the latest).")
    events.add_argument("--follow", action="store_true", help="keep printing events as they commit")
    events.add_argument("--after", type=int_at_least(0), metavar="SEQ", help="start after this seq")
    events.add_argument("--types", nargs="+", metavar="TYPE",
                        help="only these types: process.created, product.*, station.deleted, ...")
    events.add_argument("--json", action="store_true", help="print each event's envelope as one line of JSON")
    add_server_options(events)
    events.set_defaults(run=events_command)


def events_command(args):
    with make_client(args) as client:
        if args.follow:
            for envelope in follow(client.transport, args.after, args.types, on_outage=_say_outage):
                print(json.dumps(envelope) if args.json else _envelope_line(envelope), flush=True)
            return
        after = args.after or 0
        while True:
            page = client.events(after, PAGE, args.types)
            for event in page:
                print(json.dumps(_envelope_of(event)) if args.json else _line(event), flush=True)
            if len(page) < PAGE:
                break
            after = page[-1]["seq"]


def _say_outage(reason):
    """On stderr, once an outage: following does not stop by itself, and would otherwise print nothing for as long as
    the server is out of reach."""
    if reason is None:
        print("wis events: following again", file=sys.stderr, flush=True)
    else:
        print(f"wis events: {reason}; trying again until interrupted", file=sys.stderr, flush=True)


def _line(event):
    return "\t".join(str(value) for value in (event["seq"], event["timestamp"], event["type"], event["id"],
                                              event["revision"], event["name"] if event["name"] is not None else ""))


def _envelope_of(event):
    """A feed event in the envelope the stream sends (so that both forms of the command print the same)."""
    return {"type": event["type"], "timestamp": event["timestamp"],
            "data": {"seq": event["seq"], "kind": event["kind"], "id": event["id"], "revision": event["revision"],
                     "change": event["change"], "name": event["name"], "author": event["author"],
                     "comment": event["comment"]}}


def _envelope_line(envelope):
    if envelope["type"] == "reset":
        return f"reset\tthe events before {envelope['data']['oldest']} are no longer kept: read the state again"
    data = envelope["data"]
    return _line({**data, "type": envelope["type"], "timestamp": envelope["timestamp"]})
