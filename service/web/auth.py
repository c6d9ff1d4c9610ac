"""API tokens: which org a request belongs to.

Tokens come from WIS_API_TOKENS (`org:token` entries, a bare token belongs to org `default`). With
none configured, one token for org `default` is created once under the data directory and reused.
"""
import hmac
import os
import sys
from pathlib import Path

from flask import current_app, g, request

from service.errors import ConfigurationError, Unauthenticated
from service.interface import ORG_PATTERN, TOKEN_HEADER, TOKEN_HEADER_ALIAS
from service.storage.common.data_dir_secrets import DEFAULT_TOKEN_FILE, ensure_default_token

DEFAULT_ORG = "default"
ANNOUNCED_ENV = "WIS_DEFAULT_TOKEN_ANNOUNCED"


def parse_tokens(raw):
    """Parse `org:token,token` into {token: org}; refuse malformed entries at start-up."""
    tokens = {}
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        org, sep, token = entry.rpartition(":")
        org = org if sep else DEFAULT_ORG
        if not ORG_PATTERN.fullmatch(org):
            raise ConfigurationError(f"WIS_API_TOKENS: org name {org!r} must be 1-64 letters, digits, '_' or '-'")
        if len(token) < 8:
            raise ConfigurationError(f"WIS_API_TOKENS: the token of org {org!r} is shorter than 8 characters")
        tokens[token] = org
    return tokens


def announce_default_token(config):
    """With no tokens configured, create the default token and say on stderr where it is kept.

    The token itself is printed only by the start that creates it: stderr goes to logs (journald, a platform's log
    drain) that more people read than the token is meant for, so later starts name the file instead. Called by the
    gunicorn master before it forks (so the line is printed once, not once per worker) and by init_app otherwise.
    Returns whether the embedded default is in use.
    """
    if parse_tokens(config["API_TOKENS"]):
        return False
    token, created = ensure_default_token(config["DATA_DIR"])
    if not config.get("QUIET_STARTUP") and not os.environ.get(ANNOUNCED_ENV):
        kept = Path(config["DATA_DIR"]) / DEFAULT_TOKEN_FILE
        if created:
            message = (f"no WIS_API_TOKENS set; created a token for org '{DEFAULT_ORG}', kept in {kept} (printed "
                       f"this once)\n  send it as the header:  {TOKEN_HEADER}: {token}")
        else:
            message = (f"no WIS_API_TOKENS set; org '{DEFAULT_ORG}' uses the token kept in {kept} (printed only "
                       f"when it was created)")
        print(f"work-instruction service: {message}", file=sys.stderr, flush=True)
        # Forked workers inherit this and stay quiet.
        os.environ[ANNOUNCED_ENV] = "1"
    return True


def init_app(app):
    tokens = parse_tokens(app.config["API_TOKENS"])
    if not tokens:
        announce_default_token(app.config)
        tokens = {ensure_default_token(app.config["DATA_DIR"])[0]: DEFAULT_ORG}
    app.extensions["api_tokens"] = tokens


def org_for_token(token):
    """Return the org of a token, comparing in constant time against every known token."""
    found = None
    for known, org in current_app.extensions["api_tokens"].items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = org
    return found


def request_token():
    """The token a request carries: in TOKEN_HEADER, else in the vendor's spelling TOKEN_HEADER_ALIAS (when both are
    sent, TOKEN_HEADER is the one checked)."""
    return request.headers.get(TOKEN_HEADER) or request.headers.get(TOKEN_HEADER_ALIAS, "")


def require_org():
    """before_request hook: set g.org or refuse with 401."""
    token = request_token()
    org = org_for_token(token) if token else None
    if org is None:
        raise Unauthenticated()
    g.org = org
