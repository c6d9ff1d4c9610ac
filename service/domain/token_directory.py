"""The tokens one process accepts (CONTRACT 16), looked up by their SHA-256 on every request without a query or a scan.

The configured tokens (WIS_API_TOKENS', or the embedded default token) are fixed at start-up. The stored ones (`wis
token create`) are read again when the store's version has changed, which is looked at most every REFRESH_SECONDS: a
token revoked on any node is refused here within that, plus the time of one read, and streams started with it end at
the next look of the streams' hub (service.web.events.hub). So a lookup costs a SHA-256, a dictionary lookup or two and
one constant-time comparison, whether the token is known or not, and at most once a second one read of the store's
version (never for a configured token: its requests neither wait for the store nor fail with it).

A use is remembered in memory and written to the store at most every USE_RECORD_SECONDS (`record_uses_when_due`, after
a response): `last used` is accurate to about a minute, and no request writes.
"""
import hmac
import threading
import time
from typing import NamedTuple

from service.storage.contract import utc_timestamp
from service.domain.tokens import Credential

REFRESH_SECONDS = 1.0
USE_RECORD_SECONDS = 60.0
# Compared with the digest of a token that matches none, so that a miss costs the comparison a hit costs.
NO_DIGEST = "0" * 64
# The store's version before any was read.
UNREAD = object()


class Table(NamedTuple):
    """Credentials by digest, and the generation of the stored tokens they were made from (+1 each time those are read
    again: service.web.sessions keys what it makes of them on it)."""
    generation: int
    by_digest: dict


class TokenDirectory:
    """Every token this process accepts, by digest: the configured ones and those of a TokenStore."""

    def __init__(self, store, configured, clock=time.monotonic):
        """`configured`: the Credentials of WIS_API_TOKENS (or of the embedded default token)."""
        self._store = store
        self._configured = {credential.digest: credential for credential in configured}
        self._clock = clock
        self._lock = threading.Lock()
        self._table = Table(0, dict(self._configured))  # with the stored tokens not revoked, as last read
        self._version = UNREAD
        self._checked_at = None
        self._used = {}  # digest -> when last used, not yet recorded
        self._recorded_at = clock()

    def find(self, digest):
        """The Credential of the token whose SHA-256 is `digest`, or None. StorageFailed when the stored tokens are
        due to be read again and the store does not answer (a configured token is found without them)."""
        found = self._configured.get(digest) or self._current().by_digest.get(digest)
        if not hmac.compare_digest(found.digest if found else NO_DIGEST, digest):
            return None
        if digest not in self._configured:
            self._used[digest] = utc_timestamp()
        return found

    def is_valid(self, credential):
        """True while the token of `credential` is accepted: configured, or stored and not revoked."""
        return credential.digest in self._configured or credential.digest in self._current().by_digest

    def credentials(self):
        """The Table of every Credential accepted now, configured and stored."""
        return self._current()

    def _current(self):
        """The Table of every token accepted, the stored ones read again first when the store's version changed (looked
        at most every REFRESH_SECONDS)."""
        now = self._clock()
        if self._checked_at is None or now - self._checked_at >= REFRESH_SECONDS:
            with self._lock:
                if self._checked_at is None or now - self._checked_at >= REFRESH_SECONDS:
                    version = self._store.version()
                    if version != self._version:
                        stored = {token.digest: Credential(token.org, token.name, token.scope, token.digest)
                                  for token in self._store.all() if token.revoked_at is None}
                        self._table = Table(self._table.generation + 1, {**stored, **self._configured})
                        self._version = version
                    self._checked_at = now
        return self._table

    def record_uses_when_due(self):
        """Write the uses of stored tokens since the last time to the store, if USE_RECORD_SECONDS have passed; for one
        caller at a time."""
        now = self._clock()
        if now - self._recorded_at < USE_RECORD_SECONDS or not self._used:
            return
        with self._lock:
            if now - self._recorded_at < USE_RECORD_SECONDS:
                return
            self._recorded_at = now
            used, self._used = self._used, {}
        self._store.record_use(used)
