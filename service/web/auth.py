"""Who a request is and what it may do (CONTRACT 2 and 16): its token's org, name and scope, checked against the scope
its view declares before anything else of the request runs.

Every view declares what it needs with `requires(Access(...))` (pages with `login_required`, service.web.pages.auth):
the scope a token must have, whether the pages' session cookie stands in for a token (page elements that cannot send a
header: media for `<img>`, the event stream for an EventSource), and whether the request needs nothing (the explorer
page). One before_request hook (`authorize`) reads the declaration of the request's view: a view that declares nothing
needs an `admin` token, and tests/web/test_access.py names every view with what it declares, so a new view that
forgets is a failing test, never an open door. GraphQL's root fields have a table of their own
(service.web.graphql.scopes), checked once the document is parsed.

Tokens come from WIS_API_TOKENS (service.domain.tokens.parse_api_tokens), or the embedded default token when none
are configured, and from `wis token create` (service.domain.token_directory.TokenDirectory).
"""
import functools
import logging
import os
import sys
from pathlib import Path
from typing import Callable, NamedTuple

from flask import current_app, g, request

from service.domain.token_directory import TokenDirectory
from service.domain.tokens import (
    ADMIN, DEFAULT_ORG, READ, WRITE, allows, default_credential, digest_of, parse_api_tokens)
from service.errors import Forbidden, Unauthenticated
from service.interface import TOKEN_HEADER, TOKEN_HEADER_ALIAS
from service.storage import get_repository
from service.storage.common.data_dir_secrets import DEFAULT_TOKEN_FILE, ensure_default_token
from service.web.sessions import session_credential

log = logging.getLogger(__name__)

ANNOUNCED_ENV = "WIS_DEFAULT_TOKEN_ANNOUNCED"
# No token is longer (anything past this is not worth hashing).
MAX_TOKEN_LENGTH = 4096


class Access(NamedTuple):
    """What a view needs (CONTRACT 16)."""
    scope: str | None  # the scope a token must have; None: nothing (a public view)
    cookie: bool = False  # the pages' session cookie stands in for a token: a read (or, with header False, a page)
    header: bool = True  # the token header is accepted (False: a page, checked by its login_required)
    exempt: Callable[[], bool] | None = None  # True for a request of this view that needs nothing at all


PUBLIC = Access(None)
READ_TOKEN = Access(READ)
WRITE_TOKEN = Access(WRITE)
ADMIN_TOKEN = Access(ADMIN)
# A read of a page's element: the token, or the session's cookie.
READ_OR_SESSION = Access(READ, cookie=True)
# A page: a session (service.web.pages.auth.login_required), never the token header.
SIGNED_IN = Access(READ, cookie=True, header=False)
UNDECLARED = Access(ADMIN)  # its own object: a view that declared admin is not undeclared
# The views Flask makes itself: the app's static files (the pages' stylesheet, the explorer's scripts).
FLASK_VIEWS = {"static": PUBLIC}


def declared_access(app, endpoint):
    """What the view of `endpoint` declares it needs (UNDECLARED when it declares nothing)."""
    if endpoint in FLASK_VIEWS:
        return FLASK_VIEWS[endpoint]
    return getattr(app.view_functions[endpoint], "access", UNDECLARED)


def requires(access):
    """Declare what a view needs; `authorize` holds every request of it to that."""
    def declare(view):
        view.access = access
        return view

    return declare


def announce_default_token(config):
    """With no tokens configured, create the default token and say on stderr where it is kept.

    The token itself is printed only by the start that creates it: stderr goes to logs (journald, a platform's log
    drain) that more people read than the token is meant for, so later starts name the file instead. Called by the
    gunicorn master before it forks (so the line is printed once, not once per worker) and by init_app otherwise.
    Returns whether the embedded default is in use.
    """
    if parse_api_tokens(config["API_TOKENS"]):
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
    """The app's tokens (WIS_API_TOKENS', else the embedded default, and the stored ones), and the check of every
    request. Called after the body limits' init_app: a body is held to its limit first, then the scope is checked,
    then the rest of the request runs."""
    configured = parse_api_tokens(app.config["API_TOKENS"])
    if not configured:
        announce_default_token(app.config)
        configured = [default_credential(ensure_default_token(app.config["DATA_DIR"])[0])]
    app.extensions["tokens"] = TokenDirectory(get_repository(app).tokens, configured)
    app.before_request(authorize)
    app.after_request(_record_uses)


def token_directory(app=None):
    return (app or current_app).extensions["tokens"]


def request_token():
    """The token a request carries: in TOKEN_HEADER, else in the vendor's spelling TOKEN_HEADER_ALIAS (when both are
    sent, TOKEN_HEADER is the one checked)."""
    return request.headers.get(TOKEN_HEADER) or request.headers.get(TOKEN_HEADER_ALIAS, "")


def credential_of(token):
    """The Credential of a token, or None (none sent, unknown, revoked, or longer than any token)."""
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return token_directory().find(digest_of(token))


def authorize():
    """before_request: set g.org and g.credential from the request's token (or session, where its view accepts one),
    or refuse: 401 without a valid one, 403 when its scope does not reach the view's (CONTRACT 16)."""
    if request.endpoint is None or _automatic_options():
        return  # no view runs: a 404, a 405, or Flask's own answer to OPTIONS (the methods, nothing else)
    access = declared_access(current_app, request.endpoint)
    if access.scope is None or not access.header or (access.exempt is not None and access.exempt()):
        return
    token = request_token()
    if not token and access.cookie:
        credential = session_credential()
        if credential is not None:
            g.org, g.credential, g.by_session = credential.org, credential, True
            return
    credential = credential_of(token)
    if credential is None:
        raise Unauthenticated()
    if not allows(credential.scope, access.scope):
        raise Forbidden(f"{request.method} {request.path}", access.scope, credential.name, credential.scope)
    g.org, g.credential = credential.org, credential


def _automatic_options():
    rule = request.url_rule
    return request.method == "OPTIONS" and rule is not None and rule.provide_automatic_options


def _record_uses(response):
    """after_request: the uses of stored tokens are written at most once a minute, after a response has gone."""
    if "credential" in g:
        response.call_on_close(functools.partial(_record_uses_of, token_directory()))
    return response


def _record_uses_of(directory):
    try:
        directory.record_uses_when_due()
    except Exception:  # noqa: BLE001 (the store's outage: a minute's uses are not recorded; `last used` is coarse)
        log.exception("recording when API tokens were last used failed")
