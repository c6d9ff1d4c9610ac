"""The shared backend's API tokens (CONTRACT 16): table `api_tokens`, one row per token `wis token create` made (its
SHA-256, never the token), and `api_tokens_version`, one row whose number every add and revoke raises in its own
transaction: what each process of each node reads (one row, at most once a second) before it reads the tokens again.
"""
import psycopg

from service.errors import TokenNameTaken, TokenNotFound
from service.storage.contract import StoredToken
from service.storage.shared.database import utc_text

COLUMNS = "org, name, scope, digest, created_at, last_used_at, revoked_at"
CHANGED = "UPDATE api_tokens_version SET version = version + 1"
REVOKE = f"""
    UPDATE api_tokens SET revoked_at = {utc_text()}
    WHERE org = %s AND name = %s AND revoked_at IS NULL
    RETURNING {COLUMNS}
"""
# A token of a file data directory (`wis migrate`): added, or revoked when it was revoked there since; else unchanged.
IMPORT = f"""
    INSERT INTO api_tokens AS kept ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (digest) DO UPDATE SET revoked_at = EXCLUDED.revoked_at
        WHERE kept.revoked_at IS NULL AND EXCLUDED.revoked_at IS NOT NULL
"""
RECORD_USE = """
    UPDATE api_tokens SET last_used_at = used.at
    FROM unnest(%s::text[], %s::text[]) AS used(digest, at)
    WHERE api_tokens.digest = used.digest AND (api_tokens.last_used_at IS NULL OR api_tokens.last_used_at < used.at)
"""


class SharedTokenStore:
    """Every org's stored tokens in the `api_tokens` table of `database` (service.storage.contract.TokenStore)."""

    def __init__(self, database):
        self.database = database

    def add(self, token):
        try:
            with self.database.transaction() as connection:
                connection.execute(f"INSERT INTO api_tokens ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)", token)
                connection.execute(CHANGED)
        except psycopg.errors.UniqueViolation:
            raise TokenNameTaken(token.org, token.name) from None

    def revoke(self, org, name):
        with self.database.transaction() as connection:
            row = connection.execute(REVOKE, (org, name)).fetchone()
            if row is None:
                raise TokenNotFound(org, name)
            connection.execute(CHANGED)
        return StoredToken(*row)

    def all(self):
        with self.database.transaction() as connection:
            rows = connection.execute(f"SELECT {COLUMNS} FROM api_tokens ORDER BY org, name").fetchall()
        return [StoredToken(*row) for row in rows]

    def version(self):
        with self.database.transaction() as connection:
            return connection.execute("SELECT version FROM api_tokens_version").fetchone()[0]

    def import_token(self, token):
        """Copy a stored token of a file data directory (`wis migrate`): "copied" when it was added, or revoked since
        the last copy; "unchanged" otherwise. TokenNameTaken when the org has another token of its name here."""
        try:
            with self.database.transaction() as connection:
                if connection.execute(IMPORT, token).rowcount == 0:
                    return "unchanged"
                connection.execute(CHANGED)
        except psycopg.errors.UniqueViolation:
            raise TokenNameTaken(token.org, token.name) from None
        return "copied"

    def record_use(self, used):
        digests = sorted(used)
        with self.database.transaction() as connection:
            connection.execute(RECORD_USE, (digests, [used[digest] for digest in digests]))
