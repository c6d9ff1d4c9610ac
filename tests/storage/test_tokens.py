"""API tokens kept by both backends (CONTRACT 16; service.storage.contract.TokenStore): only the SHA-256 of a token is
stored, never the token; names are unique per org for ever (a revoked token keeps its own); a revocation through one
repository (another worker, or node) is refused by the token directory of another within its refresh; a use is
recorded when it is later than the one kept."""
import hashlib

import pytest

from service.domain.token_directory import REFRESH_SECONDS, TokenDirectory
from service.domain.tokens import create_token, list_tokens, revoke_token
from service.domain.validation import InvalidInput
from service.errors import TokenNameTaken, TokenNotFound


def stored_bytes(app, repo):
    """Everything the backend keeps of tokens, as bytes: every file of the data directory, or the token table."""
    if app.config.get("DATABASE_URL"):
        with repo.database.transaction() as connection:
            return repr(connection.execute("SELECT * FROM api_tokens").fetchall()).encode()
    return b"".join(path.read_bytes() for path in repo.data_dir.rglob("*") if path.is_file())


def test_a_token_is_stored_as_its_sha256_only(app, repo):
    token, stored = create_token(repo, "acme", "tablet-1", "read")
    kept = stored_bytes(app, repo)
    assert token.encode() not in kept and token[4:20].encode() not in kept
    assert hashlib.sha256(token.encode()).hexdigest().encode() in kept
    [listed] = list_tokens(repo)
    assert listed == stored and listed.digest == hashlib.sha256(token.encode()).hexdigest()
    assert (listed.last_used_at, listed.revoked_at) == (None, None)


def test_a_name_is_given_once_per_org_even_after_its_revocation(repo):
    create_token(repo, "acme", "pipeline", "write")
    create_token(repo, "other", "pipeline", "write")
    with pytest.raises(TokenNameTaken, match="'pipeline'"):
        create_token(repo, "acme", "pipeline", "read")
    revoked = revoke_token(repo, "acme", "pipeline")
    assert revoked.revoked_at is not None
    with pytest.raises(TokenNameTaken):
        create_token(repo, "acme", "pipeline", "write")
    with pytest.raises(TokenNotFound):
        revoke_token(repo, "acme", "pipeline")
    with pytest.raises(TokenNotFound):
        revoke_token(repo, "acme", "nobody")
    assert [(token.org, token.name, token.revoked_at is None) for token in list_tokens(repo)] == [
        ("acme", "pipeline", False), ("other", "pipeline", True)]
    assert [token.org for token in list_tokens(repo, "other")] == ["other"]


@pytest.mark.parametrize("org, name, scope, fields", [
    ("acme", "Tablet", "read", ["name"]),
    ("acme", "x" * 65, "read", ["name"]),
    ("acme", "env-2", "read", ["name"]),
    ("acme", "default-token", "admin", ["name"]),
    ("acme", "tablet", "owner", ["scope"]),
    ("no org", "tablet", "read", ["org"]),
    ("", "", "", ["org", "name", "scope"]),
])
def test_a_bad_org_name_or_scope_is_refused_naming_it_and_nothing_is_stored(repo, org, name, scope, fields):
    with pytest.raises(InvalidInput) as refused:
        create_token(repo, org, name, scope)
    assert [field for field, _ in refused.value.errors] == fields
    assert list_tokens(repo) == [] and repo.tokens.version() in (None, 0)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_revocation_through_another_repository_is_refused_within_the_refresh(repo, other_repo):
    token, stored = create_token(repo, "acme", "tablet", "read")
    clock = Clock()
    directory = TokenDirectory(other_repo.tokens, [], clock)
    found = directory.find(stored.digest)
    assert (found.org, found.name, found.scope) == ("acme", "tablet", "read")
    revoke_token(repo, "acme", "tablet")
    clock.now += REFRESH_SECONDS
    assert directory.find(stored.digest) is None and not directory.is_valid(found)


def test_a_use_is_recorded_when_later_than_the_one_kept(repo):
    _, first = create_token(repo, "acme", "one", "read")
    _, second = create_token(repo, "acme", "two", "read")
    repo.tokens.record_use({first.digest: "2030-01-01T00:00:02.000Z", "0" * 64: "2030-01-01T00:00:00.000Z"})
    repo.tokens.record_use({first.digest: "2030-01-01T00:00:01.000Z", second.digest: "2030-01-01T00:00:03.000Z"})
    assert [token.last_used_at for token in list_tokens(repo)] == ["2030-01-01T00:00:02.000Z",
                                                                   "2030-01-01T00:00:03.000Z"]
