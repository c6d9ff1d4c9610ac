"""The scope each GraphQL root field needs (CONTRACT 16), checked before any field of an operation runs.

The table names every root field of schema.graphql; a field it does not name needs `admin`, and
tests/web/graphql/test_graphql_scopes.py fails until it names it: a new root field declares its scope here, in the
table of its root type. An operation that asks for a field beyond its token's scope runs nothing: HTTP 200, each root
field null, and exactly one error, FORBIDDEN, naming the fields and the scope they need.
"""
from service.domain.tokens import ADMIN, READ, SCOPES, WRITE, allows

_READS = ("process", "processes", "product", "products", "station", "stations", "processHistory", "productHistory",
          "stationHistory", "processChanges", "productChanges", "stationChanges", "events", "latestEventSeq")
_WRITES = ("processCreate", "productCreate", "stationCreate", "processDelete", "productDelete", "stationDelete",
           "processRestore", "productRestore", "stationRestore")

# Webhooks' queries and mutations (CONTRACT 15) need admin: they show and set secrets and make the server send requests.
_WEBHOOK_QUERIES = ("webhookSubscriptions", "webhookDeliveries")
_WEBHOOK_MUTATIONS = ("webhookSubscribe", "webhookUnsubscribe", "webhookRedeliver")

# root type -> {field: the scope it needs}. A new root field is one more entry of its root type's dict.
ROOT_FIELD_SCOPES = {
    "Query": {**dict.fromkeys(_READS, READ), **dict.fromkeys(_WEBHOOK_QUERIES, ADMIN)},
    "Mutation": {**dict.fromkeys(_WRITES, WRITE), **dict.fromkeys(_WEBHOOK_MUTATIONS, ADMIN)},
    "Subscription": {"events": READ},
}
# What any token may ask of any root type: the name of the type, and the schema itself (GraphQL's introspection).
INTROSPECTION = {"__typename", "__schema", "__type"}


def needed_scope(root_type, field):
    """The scope a root field of `root_type` (Query, Mutation, Subscription) needs: admin for a field the table does
    not name."""
    if field in INTROSPECTION:
        return READ
    return ROOT_FIELD_SCOPES.get(root_type, {}).get(field, ADMIN)


def refusal(root_type, fields, credential):
    """The one FORBIDDEN error of an operation whose root `fields` (names, in the order written) include some beyond
    the credential's scope, or None when every field is within it."""
    beyond = {field: needed_scope(root_type, field) for field in fields}
    beyond = {field: needed for field, needed in beyond.items() if not allows(credential.scope, needed)}
    if not beyond:
        return None
    needed = max(beyond.values(), key=SCOPES.index)
    names = ", ".join(beyond)
    return {"message": f"{names}: needs a token of the {needed} scope; this token ({credential.name!r}) has the "
                       f"{credential.scope} scope, so nothing of this operation ran (ask an administrator for a token "
                       "of that scope: `wis token create`)",
            "extensions": {"code": "FORBIDDEN", "scope": needed, "fields": list(beyond)}}
