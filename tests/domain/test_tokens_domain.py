"""Token rules (service.domain.tokens) and the token directory of a process (service.domain.token_directory), without
a backend: WIS_API_TOKENS entries and their refusals, what a lookup costs (one comparison, whether the token is known
or not; no read of the store between refreshes), a revocation seen at the next refresh, and uses written at most once a
minute."""
import hmac

import pytest

from service.domain import token_directory as directory_module
from service.domain.token_directory import REFRESH_SECONDS, USE_RECORD_SECONDS, TokenDirectory
from service.domain.tokens import ADMIN, READ, WRITE, Credential, allows, digest_of, parse_api_tokens
from service.errors import ConfigurationError, StorageFailed
from service.storage.contract import StoredToken


def test_each_scope_allows_those_below_it():
    assert [allows(scope, needed) for scope in (READ, WRITE, ADMIN) for needed in (READ, WRITE, ADMIN)] == [
        True, False, False, True, True, False, True, True, True]


def test_entries_of_wis_api_tokens_are_admin_unless_they_name_a_scope_and_are_named_by_position():
    assert parse_api_tokens(" acme:tok-acme-1 ,, bare-token-1,acme:tok-acme-2:read , acme:tok-acme-3:write,") == [
        Credential("acme", "env-1", ADMIN, digest_of("tok-acme-1")),
        Credential("default", "env-2", ADMIN, digest_of("bare-token-1")),
        Credential("acme", "env-3", READ, digest_of("tok-acme-2")),
        Credential("acme", "env-4", WRITE, digest_of("tok-acme-3"))]
    assert parse_api_tokens("") == [] and parse_api_tokens(" , ") == []


@pytest.mark.parametrize("raw, message", [
    ("acme:tok-acme-1,acme:tok-acme-2:reed", "entry 2 (org 'acme'): unknown scope 'reed'; the scopes are read, write, "
                                             "admin"),
    ("acme:tok-acme-1:read:x", "entry 1: has 3 colons"),
    ("acme:tok-acme-1:", "entry 1 (org 'acme'): unknown scope ''"),
    ("acme::read", "entry 1 (org 'acme'): the token is shorter than 8 characters"),
    ("bad org!:tok-acme-1", "entry 1: org name 'bad org!'"),
    ("acme:tok-acme-1,other:tok-acme-1:read", "entry 2 (org 'other'): repeats the token of entry 1"),
])
def test_an_entry_that_cannot_be_read_stops_the_start_naming_it_never_its_token(raw, message):
    with pytest.raises(ConfigurationError) as refused:
        parse_api_tokens(raw)
    assert str(refused.value).startswith(f"WIS_API_TOKENS, {message}")
    assert "tok-acme" not in str(refused.value)


class Store:
    """A TokenStore in memory that counts its calls."""

    def __init__(self, tokens=()):
        self.tokens = list(tokens)
        self.calls = {"version": 0, "all": 0, "record_use": 0}
        self.recorded = []
        self.failing = False

    def version(self):
        self.calls["version"] += 1
        if self.failing:
            raise StorageFailed()
        return len(self.tokens), sum(token.revoked_at is not None for token in self.tokens)

    def all(self):
        self.calls["all"] += 1
        return list(self.tokens)

    def record_use(self, used):
        self.calls["record_use"] += 1
        self.recorded.append(dict(used))


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def stored(number, scope=READ):
    return StoredToken("acme", f"tablet-{number}", scope, digest_of(f"token-{number}"), "2030-01-01T00:00:00.000Z")


@pytest.fixture
def comparisons(monkeypatch):
    """The calls of hmac.compare_digest made by the token directory."""
    made, compare = [], hmac.compare_digest

    def counted(a, b):
        made.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(directory_module.hmac, "compare_digest", counted)
    return made


def test_a_lookup_costs_one_comparison_and_no_read_whether_the_token_is_known_or_not(comparisons):
    store, clock = Store([stored(number) for number in range(1000)]), Clock()
    configured = [Credential("acme", f"env-{number}", ADMIN, digest_of(f"env-token-{number}")) for number in range(100)]
    directory = TokenDirectory(store, configured, clock)
    directory.find(digest_of("warm-up"))  # the first lookup reads the store
    reads = dict(store.calls)
    for token in ("token-7", "env-token-42", "no such token", "token-7x"):
        before = len(comparisons)
        found = directory.find(digest_of(token))
        assert len(comparisons) - before == 1
        assert (found.name if found else None) == {"token-7": "tablet-7", "env-token-42": "env-42"}.get(token)
    assert store.calls == reads


def test_the_store_is_looked_at_once_a_refresh_and_read_again_only_when_it_changed():
    store, clock = Store([stored(1)]), Clock()
    directory = TokenDirectory(store, [], clock)
    found = directory.find(digest_of("token-1"))
    assert found.name == "tablet-1" and store.calls == {"version": 1, "all": 1, "record_use": 0}
    clock.now += REFRESH_SECONDS / 2
    assert directory.find(digest_of("token-1")) == found and store.calls["version"] == 1
    clock.now += REFRESH_SECONDS / 2
    assert directory.find(digest_of("token-1")) == found and store.calls == {"version": 2, "all": 1, "record_use": 0}
    store.tokens[0] = store.tokens[0]._replace(revoked_at="2030-01-01T00:00:01.000Z")
    assert directory.find(digest_of("token-1")) == found  # not looked at yet
    clock.now += REFRESH_SECONDS
    assert directory.find(digest_of("token-1")) is None and not directory.is_valid(found)
    assert store.calls["all"] == 2


def test_uses_are_written_at_most_once_a_minute_and_only_those_of_stored_tokens():
    store, clock = Store([stored(1), stored(2)]), Clock()
    directory = TokenDirectory(store, [Credential("acme", "env-1", ADMIN, digest_of("env-token"))], clock)
    for _ in range(int(USE_RECORD_SECONDS) * 3):
        clock.now += 1
        for token in ("token-1", "env-token", "nothing"):
            directory.find(digest_of(token))
        directory.record_uses_when_due()
    assert store.calls["record_use"] == 3  # at 60, 120 and 180 s: not on each of 540 lookups
    assert [set(used) for used in store.recorded] == [{digest_of("token-1")}] * 3


def test_while_the_store_does_not_answer_configured_tokens_still_work_and_stored_ones_fail():
    store, clock = Store([stored(1)]), Clock()
    configured = Credential("acme", "env-1", ADMIN, digest_of("env-token"))
    directory = TokenDirectory(store, [configured], clock)
    store.failing = True
    assert directory.find(digest_of("env-token")) == configured and directory.is_valid(configured)
    with pytest.raises(StorageFailed):
        directory.find(digest_of("token-1"))
