"""The storage contract of API tokens (CONTRACT 16): the tokens `wis token create` made, each kept as the SHA-256 of
the token (never the token itself) with its org, name and scope, and when it was created, last used and revoked. A
revoked token stays, revoked, so that its name is never given again. The tokens of WIS_API_TOKENS are not stored."""
from typing import NamedTuple, Protocol, runtime_checkable


class StoredToken(NamedTuple):
    org: str
    name: str  # unique per org, for ever
    scope: str  # read, write or admin (service.domain.tokens)
    digest: str  # the SHA-256 of the token, in hex
    created_at: str
    last_used_at: str | None = None  # to about a minute (service.domain.token_directory)
    revoked_at: str | None = None

    def to_json(self):
        return {"org": self.org, "name": self.name, "scope": self.scope, "digest": self.digest,
                "createdAt": self.created_at, "lastUsedAt": self.last_used_at, "revokedAt": self.revoked_at}

    @classmethod
    def from_json(cls, value):
        return cls(value["org"], value["name"], value["scope"], value["digest"], value["createdAt"],
                   value.get("lastUsedAt"), value.get("revokedAt"))


@runtime_checkable
class TokenStore(Protocol):
    """Every org's stored tokens (service.storage.files.tokens, service.storage.shared.tokens)."""

    def add(self, token: StoredToken) -> None:
        """Keep a new token; TokenNameTaken when its org has, or had, a token of its name."""

    def revoke(self, org: str, name: str) -> StoredToken:
        """Mark the org's token `name` revoked now, and answer it; TokenNotFound when it has none of that name that is
        not revoked."""

    def all(self) -> list[StoredToken]:
        """Every stored token, revoked ones too, by org, then name."""

    def version(self) -> object:
        """A value that changes with every add and revoke, read at the cost of a stat or of one row: what a process
        compares before it reads all the tokens again."""

    def record_use(self, used: dict[str, str]) -> None:
        """Set the last use of the tokens whose digests `used` holds to the time it gives (when later than the one
        kept); digests of no stored token are passed over."""
