"""Browser sessions of the preview pages (CONTRACT 11): a signed cookie that names an org, started by a login with an
API token and read by the pages and by the media paths (so that `<img>` and `<video>` work).

The cookie holds the org and a fingerprint of the token the session was started with (an HMAC of the token under
the signing key, never the token), signed with a timestamp by itsdangerous (the signer of Flask's own session). It is
valid while its signature is, for WIS_SESSION_HOURS from the login, and while its token is still configured: removing
a token from WIS_API_TOKENS ends the sessions started with it. The cookie is `HttpOnly`, `SameSite=Strict` and, on an
HTTPS request or with WIS_SECURE_COOKIES, `Secure`.

Not Flask's `session`: Flask opens its session for every request before any view runs, so its key must be known
then; the key lives in the storage backend (the database, on the shared backend), and only the requests that carry
this cookie to a page or a media path should need it, or fail (503) when the database is out of reach. The key is
read once per process, on first use.
"""
import hashlib
import hmac
import threading
from typing import NamedTuple

from flask import current_app, g, request
from itsdangerous import BadData, URLSafeTimedSerializer

from service.storage import get_repository
from service.web.auth import request_token, require_org

COOKIE_NAME = "wis_session"
# What the signature is for: a signature made for anything else with the same key is no session.
SALT = "wis-preview-session"
FINGERPRINT_DOMAIN = b"wis-session-token\0"


class Keyed(NamedTuple):
    """What is made from the signing key: the cookie serializer and the fingerprint of each configured token."""
    key: str
    serializer: URLSafeTimedSerializer
    orgs_by_fingerprint: dict


class SessionKeys:
    """The signing key of one app (WIS_SECRET_KEY, else the repository's, read on first use) and what is made from
    it."""

    def __init__(self, app):
        self._app = app
        self._lock = threading.Lock()
        self._keyed = None

    def keyed(self):
        if self._keyed is None:
            with self._lock:
                if self._keyed is None:
                    key = self._app.config["SECRET_KEY"] or get_repository(self._app).secret_key()
                    orgs = {_fingerprint(key, token): org for token, org in self._app.extensions["api_tokens"].items()}
                    self._keyed = Keyed(key, URLSafeTimedSerializer(key, salt=SALT), orgs)
        return self._keyed


def _fingerprint(key, token):
    """An HMAC of the token under the signing key: what a cookie holds instead of the token."""
    return hmac.new(key.encode(), FINGERPRINT_DOMAIN + token.encode(), hashlib.sha256).hexdigest()


def _keyed():
    return current_app.extensions["sessions"].keyed()


def lifetime_seconds():
    return int(current_app.config["SESSION_HOURS"] * 3600)


def session_org():
    """The org of the session the request's cookie carries, or None: no cookie, a tampered or expired one, or one
    whose token is no longer configured. Never raises for anything the cookie holds."""
    cookie = request.cookies.get(COOKIE_NAME)
    if not cookie:
        return None
    keyed = _keyed()
    try:
        payload = keyed.serializer.loads(cookie, max_age=lifetime_seconds())
    except BadData:  # a bad signature, an expired timestamp, a payload that is not JSON
        return None
    if not (isinstance(payload, dict) and isinstance(payload.get("org"), str)
            and isinstance(payload.get("fp"), str)):
        return None
    # The fingerprint of a token no longer configured names no org: removing a token ends its sessions.
    if keyed.orgs_by_fingerprint.get(payload["fp"]) != payload["org"]:
        return None
    return payload["org"]


def require_org_or_session():
    """before a read that a page's element makes without headers (media for `<img>` and `<video>`, the event stream
    for `EventSource`): set g.org from the token when one is sent, else from a valid session cookie, else refuse with
    401. Nothing that writes accepts the cookie, so no page of another site can make a signed-in browser write."""
    if not request_token():
        org = session_org()
        if org is not None:
            g.org = org
            g.by_session = True
            return
    require_org()


def carries_cookie():
    """True when the request sent a session cookie (valid or not)."""
    return COOKIE_NAME in request.cookies


def start_session(response, org, token):
    """Set the cookie of a new session for `org`, started with `token`, on `response`."""
    keyed = _keyed()
    value = keyed.serializer.dumps({"org": org, "fp": _fingerprint(keyed.key, token)})
    response.set_cookie(COOKIE_NAME, value, max_age=lifetime_seconds(), path="/", secure=_secure(), httponly=True,
                        samesite="Strict")


def end_session(response):
    """Remove the session cookie from the browser."""
    response.delete_cookie(COOKIE_NAME, path="/", secure=_secure(), httponly=True, samesite="Strict")


def _secure():
    # Behind a proxy that ends TLS, gunicorn takes the scheme from X-Forwarded-Proto when the proxy is one of its
    # forwarded_allow_ips; WIS_SECURE_COOKIES covers every other set-up.
    return bool(current_app.config["SECURE_COOKIES"]) or request.is_secure


def init_app(app):
    app.extensions["sessions"] = SessionKeys(app)
