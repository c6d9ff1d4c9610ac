"""The tokens every app and server of the tests is configured with, and the headers that send them.

TOKEN and OTHER_TOKEN have no scope in WIS_API_TOKENS, so they are `admin` (as every token was before scopes); the
org `default` also has a token of each lower scope (CONTRACT 16). Their names, as authors of the changes they make,
are their positions in the list: env-1, env-2, env-3, env-4."""
from service.interface import TOKEN_HEADER

TOKEN = "test-token-default"
OTHER_TOKEN = "test-token-other"
READ_TOKEN = "test-token-read"
WRITE_TOKEN = "test-token-write"
TOKENS = f"default:{TOKEN},other:{OTHER_TOKEN},default:{READ_TOKEN}:read,default:{WRITE_TOKEN}:write"
TOKEN_NAME, READ_TOKEN_NAME, WRITE_TOKEN_NAME = "env-1", "env-3", "env-4"
HEADERS = {TOKEN_HEADER: TOKEN}
OTHER_HEADERS = {TOKEN_HEADER: OTHER_TOKEN}
READ_HEADERS = {TOKEN_HEADER: READ_TOKEN}
WRITE_HEADERS = {TOKEN_HEADER: WRITE_TOKEN}
# The headers of a token of each scope, by scope.
SCOPED_HEADERS = {"read": READ_HEADERS, "write": WRITE_HEADERS, "admin": HEADERS}
