"""API tokens and their scopes (CONTRACT 16): what each scope allows, the tokens of WIS_API_TOKENS, and the tokens
`wis token create` makes, lists and revokes.

A token is kept, and looked up, by its SHA-256 only: a stored token never leaves `create_token`, whose caller prints it
once. A token is 32 random bytes, so its SHA-256 needs no salt nor a slow hash: nobody can guess one from its digest.
"""
import hashlib
import re
import secrets
from typing import NamedTuple

from service.domain.validation import Problems, quoted
from service.errors import ConfigurationError
from service.interface import ORG_PATTERN
from service.storage.contract import StoredToken, utc_timestamp

# Each scope allows what the ones before it allow, and more (CONTRACT 16).
READ, WRITE, ADMIN = "read", "write", "admin"
SCOPES = (READ, WRITE, ADMIN)
NAME_PATTERN = re.compile(r"[a-z0-9_-]{1,64}")
NAME_RULE = "must be 1 to 64 lower-case letters, digits, '_' or '-'"
# The names of the tokens that are not stored: WIS_API_TOKENS' (env-1, env-2, ...) and the embedded default's.
ENV_NAME = re.compile(r"env-[0-9]+")
DEFAULT_TOKEN_NAME = "default-token"
DEFAULT_ORG = "default"
# No token of WIS_API_TOKENS is shorter.
MIN_TOKEN_LENGTH = 8
# What a made token starts with: `wis token create`'s, as the embedded default token (never a leading "-", which a
# command line would read as an option).
TOKEN_PREFIX = "wis-"


class Credential(NamedTuple):
    """What a request's token is: its org, its name (the author of the changes it makes), its scope and its digest."""
    org: str
    name: str
    scope: str
    digest: str


def allows(scope, needed):
    """True when a token of `scope` may do what needs `needed`."""
    return SCOPES.index(scope) >= SCOPES.index(needed)


def digest_of(token):
    """The SHA-256 of a token, in hex: how a token is stored and looked up."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token():
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def parse_api_tokens(raw):
    """The credentials of WIS_API_TOKENS: comma-separated `org:token` (a bare `token` is org `default`'s), each
    `admin` unless a scope follows after a second colon (`acme:tok:read`); named `env-<n>`, n counting the entries
    from 1 (empty ones between commas are not counted). ConfigurationError naming the entry (by position and org,
    never by its token) when one cannot be read, or repeats the token of another."""
    credentials, positions = [], {}
    for position, entry in enumerate((part.strip() for part in raw.split(",") if part.strip()), start=1):
        parts = entry.split(":")
        org, token, scope = (DEFAULT_ORG, parts[0], ADMIN) if len(parts) == 1 else (*parts, ADMIN)[:3]
        where = f"WIS_API_TOKENS, entry {position}"
        if len(parts) > 3:
            raise ConfigurationError(f"{where}: has {len(parts) - 1} colons; an entry is token, org:token or "
                                     f"org:token:scope (a token holds no colon)")
        if not ORG_PATTERN.fullmatch(org):
            raise ConfigurationError(f"{where}: org name {org!r} must be 1-64 letters, digits, '_' or '-'")
        if len(token) < MIN_TOKEN_LENGTH:
            raise ConfigurationError(f"{where} (org {org!r}): the token is shorter than {MIN_TOKEN_LENGTH} characters")
        if scope not in SCOPES:
            raise ConfigurationError(f"{where} (org {org!r}): unknown scope {scope!r}; the scopes are "
                                     f"{', '.join(SCOPES)}")
        digest = digest_of(token)
        if digest in positions:
            raise ConfigurationError(f"{where} (org {org!r}): repeats the token of entry {positions[digest]}")
        positions[digest] = position
        credentials.append(Credential(org, f"env-{position}", scope, digest))
    return credentials


def default_credential(token):
    """The credential of the embedded default token: org `default`, every right."""
    return Credential(DEFAULT_ORG, DEFAULT_TOKEN_NAME, ADMIN, digest_of(token))


def create_token(repo, org, name, scope):
    """Store a new token of the org, named `name`, of `scope`; answer (the token, as it is stored). InvalidInput naming
    `org`, `name` or `scope`; TokenNameTaken when the org has, or had, a token of that name."""
    problems = Problems()
    if not isinstance(org, str) or not ORG_PATTERN.fullmatch(org):
        problems.add("org", f"must be 1-64 letters, digits, '_' or '-' (as in WIS_API_TOKENS); got {quoted(org)}")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        problems.add("name", f"{NAME_RULE}; got {quoted(name)}")
    elif ENV_NAME.fullmatch(name) or name == DEFAULT_TOKEN_NAME:
        problems.add("name", f"{name!r} is the name of a token that is not stored (env-<n>: WIS_API_TOKENS' tokens; "
                             f"{DEFAULT_TOKEN_NAME}: the embedded default token); choose another")
    if scope not in SCOPES:
        problems.add("scope", f"must be one of {', '.join(SCOPES)}; got {quoted(scope)}")
    problems.raise_if_any()
    token = new_token()
    stored = StoredToken(org, name, scope, digest_of(token), utc_timestamp())
    repo.tokens.add(stored)
    return token, stored


def revoke_token(repo, org, name):
    """Revoke the org's token `name`: every node refuses it within seconds (service.domain.token_directory); answer
    it as stored now. TokenNotFound when the org has no such token that is not revoked."""
    return repo.tokens.revoke(org, name)


def list_tokens(repo, org=None):
    """The stored tokens (of `org` when given), revoked ones too, by org then name."""
    return [token for token in repo.tokens.all() if org is None or token.org == org]
