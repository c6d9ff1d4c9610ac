"""`wis webhooks`: list, subscribe, unsubscribe, read the delivery log, redeliver (CONTRACT 15; an admin token)."""
import json

from service.cli.common import UsageError, add_server_options, int_at_least, make_client


def add_commands(commands):
    webhooks = commands.add_parser("webhooks", help="manage the org's webhook subscriptions and read their deliveries")
    actions = webhooks.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="the subscriptions, one a line: id, URL, types, state, created")
    listing.add_argument("--json", action="store_true", help="each subscription as one line of JSON (with its secret)")
    listing.set_defaults(run=list_command)

    subscribe = actions.add_parser("subscribe", help="subscribe a URL to the org's events (again: replace its settings "
                                                     "and enable it)")
    subscribe.add_argument("id", help="the subscription's id: 1 to 64 letters, digits, '_' or '-'")
    subscribe.add_argument("webhook_url", metavar="URL", help="where to POST each event (https)")
    subscribe.add_argument("--types", nargs="+", metavar="TYPE", help="only these: process.created, product.*, ...")
    subscribe.add_argument("--header", action="append", default=[], metavar="NAME=VALUE",
                           help="a header sent with every delivery (repeat for more)")
    subscribe.add_argument("--secret", help="whsec_... (default: keep the current one; a new subscription gets one "
                                            "made, printed here)")
    subscribe.add_argument("--fragment", help="a GraphQL fragment on Event that shapes the body (@FILE reads a file)")
    subscribe.set_defaults(run=subscribe_command)

    unsubscribe = actions.add_parser("unsubscribe", help="remove a subscription, its retries and its log")
    unsubscribe.add_argument("id")
    unsubscribe.set_defaults(run=unsubscribe_command)

    deliveries = actions.add_parser("deliveries", help="a subscription's delivery log, newest event first: seq, type, "
                                                       "state, attempts, last status, last attempt, next attempt, "
                                                       "last error")
    deliveries.add_argument("id")
    deliveries.add_argument("--first", type=int_at_least(1), default=100, help="at most this many (default 100)")
    deliveries.add_argument("--before", type=int_at_least(1), metavar="SEQ", help="only events before this seq")
    deliveries.add_argument("--json", action="store_true", help="each delivery as one line of JSON")
    deliveries.set_defaults(run=deliveries_command)

    redeliver = actions.add_parser("redeliver", help="send a logged delivery again now")
    redeliver.add_argument("id")
    redeliver.add_argument("seq", type=int_at_least(1))
    redeliver.set_defaults(run=redeliver_command)
    for command in (listing, subscribe, unsubscribe, deliveries, redeliver):
        add_server_options(command)


def list_command(args):
    with make_client(args) as client:
        for subscription in client.webhook_subscriptions():
            if args.json:
                print(json.dumps(subscription), flush=True)
                continue
            state = ("enabled" if subscription["disabledAt"] is None else
                     f"disabled ({subscription['disabledReason']}) since {subscription['disabledAt']}")
            print("\t".join((subscription["subscriptionID"], subscription["webhookUrl"],
                             ",".join(subscription["types"] or ["*"]), state, subscription["createdAt"])))


def subscribe_command(args):
    headers = dict(_header(entry) for entry in args.header) or None
    fragment = args.fragment
    if fragment is not None and fragment.startswith("@"):
        with open(fragment[1:], encoding="utf-8") as handle:
            fragment = handle.read()
    with make_client(args) as client:
        result = client.webhook_subscribe(args.id, args.webhook_url, headers, args.types, args.secret, fragment)
        print(f"{result} {args.id}")
        if result == "SUBSCRIBED" and args.secret is None:
            secret = next(item["secret"] for item in client.webhook_subscriptions() if item["subscriptionID"] == args.id)
            print(f"secret: {secret} (verify each delivery's webhook-signature with it)")


def _header(entry):
    name, equals, value = entry.partition("=")
    if not equals or not name.strip():
        raise UsageError(f"--header takes NAME=VALUE; got {entry!r}")
    return name.strip(), value


def unsubscribe_command(args):
    with make_client(args) as client:
        print(f"{client.webhook_unsubscribe(args.id)} {args.id}")


def deliveries_command(args):
    with make_client(args) as client:
        for delivery in client.webhook_deliveries(args.id, args.first, args.before):
            print(json.dumps(delivery) if args.json else _delivery_line(delivery), flush=True)


def redeliver_command(args):
    with make_client(args) as client:
        print(_delivery_line(client.webhook_redeliver(args.id, args.seq)))


def _delivery_line(delivery):
    fields = ("seq", "type", "state", "attempts", "lastStatus", "lastAttemptAt", "nextAttemptAt", "lastError")
    return "\t".join("" if delivery[field] is None else str(delivery[field]) for field in fields)
