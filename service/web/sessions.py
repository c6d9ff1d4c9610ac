"""Browser sessions of the preview pages (CONTRACT 11): a signed cookie that names an org, started by a login with an
API token of any scope and read by the pages, by the media paths (so that `<img>` and `<video>` work) and by the event
stream (an EventSource sends no header). It authorises reads only (CONTRACT 16).

The cookie holds the org and a fingerprint of the token the session was started with (an HMAC of the token's SHA-256
under the signing key, never the token), signed with a timestamp by itsdangerous (the signer of Flask's own session).
It is valid while its signature is, for WIS_SESSION_HOURS from the login, and while its token is accepted: removing a
token from WIS_API_TOKENS, or revoking a stored one (`wis token revoke`, seen within a second or so:
service.domain.token_directory), ends the sessions started with it. The cookie is `HttpOnly`, `SameSite=Strict` and,
on an HTTPS request or with WIS_SECURE_COOKIES, `Secure`.

Not Flask's `session`: Flask opens its session for every request before any view runs, so its key must be known
then; the key lives in the storage backend (the database, on the shared backend), and only the requests that carry
this cookie to a page, a media path or the stream should need it, or fail (503) when the database is out of reach.
The key is read once per process, on first use.
"""
import hashlib
import hmac
import threading

from flask import current_app, request
from itsdangerous import BadData, URLSafeTimedSerializer

from service.domain.tokens import READ
from service.storage import get_repository

COOKIE_NAME = "wis_session"
# What the signature is for: a signature made for anything else with the same key is no session.
SALT = "wis-preview-session"
FINGERPRINT_DOMAIN = b"wis-session-token\0"


class SessionKeys:
    """The signing key of one app (WIS_SECRET_KEY, else the repository's, read on first use), the cookie serializer
    made from it, and the fingerprint of each token the app accepts (made again when its tokens change)."""

    def __init__(self, app):
        self._app = app
        self._lock = threading.Lock()
        self._key = self._serializer = None
        # The fingerprints of one generation of the token directory's tokens: (generation, {fingerprint: Credential}).
        self._fingerprints = (None, {})

    def key(self):
        if self._key is None:
            with self._lock:
                if self._key is None:
                    key = self._app.config["SECRET_KEY"] or get_repository(self._app).secret_key()
                    self._serializer = URLSafeTimedSerializer(key, salt=SALT)
                    self._key = key
        return self._key

    def serializer(self):
        self.key()
        return self._serializer

    def credential_of(self, fingerprint):
        """The Credential of the accepted token whose fingerprint this is, or None."""
        table = self._app.extensions["tokens"].credentials()
        generation, by_fingerprint = self._fingerprints
        if generation != table.generation:
            key = self.key()
            by_fingerprint = {_fingerprint(key, digest): credential for digest, credential in table.by_digest.items()}
            self._fingerprints = (table.generation, by_fingerprint)
        return by_fingerprint.get(fingerprint)


def _fingerprint(key, digest):
    """An HMAC of the token's SHA-256 under the signing key: what a cookie holds instead of the token."""
    return hmac.new(key.encode(), FINGERPRINT_DOMAIN + digest.encode(), hashlib.sha256).hexdigest()


def _keys():
    return current_app.extensions["sessions"]


def lifetime_seconds():
    return int(current_app.config["SESSION_HOURS"] * 3600)


def session_credential():
    """The Credential of the session the request's cookie carries, at the read scope whatever its token's, or None: no
    cookie, a tampered or expired one, or one whose token is no longer accepted. Never raises for anything the cookie
    holds."""
    cookie = request.cookies.get(COOKIE_NAME)
    if not cookie:
        return None
    try:
        payload = _keys().serializer().loads(cookie, max_age=lifetime_seconds())
    except BadData:  # a bad signature, an expired timestamp, a payload that is not JSON
        return None
    if not (isinstance(payload, dict) and isinstance(payload.get("org"), str)
            and isinstance(payload.get("fp"), str)):
        return None
    credential = _keys().credential_of(payload["fp"])
    if credential is None or credential.org != payload["org"]:
        return None
    return credential._replace(scope=READ)


def session_org():
    """The org of the request's session, or None."""
    credential = session_credential()
    return None if credential is None else credential.org


def carries_cookie():
    """True when the request sent a session cookie (valid or not)."""
    return COOKIE_NAME in request.cookies


def start_session(response, credential):
    """Set the cookie of a new session of the credential's org, started with its token, on `response`."""
    keys = _keys()
    value = keys.serializer().dumps({"org": credential.org, "fp": _fingerprint(keys.key(), credential.digest)})
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
