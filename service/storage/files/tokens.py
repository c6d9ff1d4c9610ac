"""The file backend's API tokens (CONTRACT 16): every org's stored tokens in one file, `<data>/tokens.json`, readable
by the service's user only (it holds digests, never tokens), replaced whole under its lock by each change.

One file, not one per token: a process reads every token again when the file changes (its version is the file's
identity and time, one stat), and a deployment has tens of tokens, not thousands. A use is recorded at most once a
minute per worker process (service.domain.token_directory), so the file is not written per request.
"""
import os

import orjson

from service.errors import TokenNameTaken, TokenNotFound
from service.storage.common.disk import atomic_write_bytes, lock
from service.storage.contract import StoredToken, utc_timestamp

TOKENS_FILE = "tokens.json"


class FileTokenStore:
    """Every org's stored tokens, in one file of the data directory (service.storage.contract.TokenStore)."""

    def __init__(self, data_dir):
        self.path = data_dir / TOKENS_FILE

    def add(self, token):
        with lock(self.path):
            tokens = self._read()
            if any((kept.org, kept.name) == (token.org, token.name) for kept in tokens):
                raise TokenNameTaken(token.org, token.name)
            self._write([*tokens, token])

    def revoke(self, org, name):
        with lock(self.path):
            tokens = self._read()
            for position, kept in enumerate(tokens):
                if (kept.org, kept.name) == (org, name) and kept.revoked_at is None:
                    tokens[position] = revoked = kept._replace(revoked_at=utc_timestamp())
                    self._write(tokens)
                    return revoked
        raise TokenNotFound(org, name)

    def all(self):
        return sorted(self._read(), key=lambda token: (token.org, token.name))

    def version(self):
        """The file's inode, time and size: a replacement is a new inode, so no change goes unseen."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return None
        return found.st_ino, found.st_mtime_ns, found.st_size

    def record_use(self, used):
        with lock(self.path):
            tokens = self._read()
            recorded = [token._replace(last_used_at=used[token.digest])
                        if token.digest in used and (token.last_used_at or "") < used[token.digest] else token
                        for token in tokens]
            if recorded != tokens:
                self._write(recorded)

    def _read(self):
        try:
            with open(self.path, "rb") as handle:
                return [StoredToken.from_json(value) for value in orjson.loads(handle.read())["tokens"]]
        except FileNotFoundError:
            return []

    def _write(self, tokens):
        # atomic_write_bytes makes its temporary file with mkstemp: mode 600 before the first byte is in it.
        atomic_write_bytes(self.path, orjson.dumps({"tokens": [token.to_json() for token in tokens]},
                                                   option=orjson.OPT_INDENT_2))
