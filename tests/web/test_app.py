import secrets
import stat

import pytest
import requests

from service import create_app
from service.domain.tokens import ADMIN, Credential, digest_of, parse_api_tokens
from service.cli.commands import build_parser
from service.errors import ConfigurationError
from service.interface import TOKEN_HEADER
from service.storage.common.data_dir_secrets import ensure_default_token


def test_the_token_header_is_the_one_the_contract_names():
    # The one place the tests spell it: everywhere else they take service.interface.TOKEN_HEADER (through support).
    assert TOKEN_HEADER == "x-service-api-org"


def test_healthz_needs_no_token(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_unknown_route_is_json_404(client, auth):
    response = client.get("/no-such-route", headers=auth)
    assert response.status_code == 404
    assert "error" in response.get_json()


def test_parse_tokens_assigns_bare_token_to_default_org():
    assert parse_api_tokens("acme:secret-acme, bare-token-1") == [
        Credential("acme", "env-1", ADMIN, digest_of("secret-acme")),
        Credential("default", "env-2", ADMIN, digest_of("bare-token-1"))]


@pytest.mark.parametrize("setting, named", [
    ({"WIS_API_TOKENS": "acme:short"}, "WIS_API_TOKENS"),
    ({"WIS_API_TOKENS": "bad org!:a-long-enough-token"}, "WIS_API_TOKENS"),
    ({"WIS_API_TOKENS": "acme:a-long-enough-token:reed"}, "WIS_API_TOKENS, entry 1 .org 'acme'.: unknown scope 'reed'"),
    ({"WIS_STREAM_TTL_HOURS": "a day"}, "WIS_STREAM_TTL_HOURS"),
    ({"WIS_MAX_OPEN_STREAMS": "0"}, "WIS_MAX_OPEN_STREAMS"),
    ({"WIS_MAX_OPEN_STREAMS": "many"}, "WIS_MAX_OPEN_STREAMS"),
])
def test_a_malformed_setting_is_an_exception_naming_it_for_an_embedding_caller(monkeypatch, tmp_path, setting,
                                                                              named):
    for variable, value in setting.items():
        monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=named):
        create_app({"DATA_DIR": str(tmp_path)})


def test_the_default_token_file_is_readable_by_its_owner_only(monkeypatch, tmp_path):
    monkeypatch.delenv("WIS_API_TOKENS", raising=False)
    monkeypatch.setenv("WIS_DEFAULT_TOKEN_ANNOUNCED", "1")
    create_app({"DATA_DIR": str(tmp_path)})
    token_file = tmp_path / "default-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(token_file.read_text().strip()) >= 24
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []


def test_the_default_token_is_taken_by_the_wis_command_line_even_when_its_random_part_starts_with_a_dash(
        monkeypatch, tmp_path):
    monkeypatch.setattr(secrets, "token_urlsafe", lambda size: "-" + "x" * (size - 1))
    token, created = ensure_default_token(tmp_path)
    assert created
    args = build_parser().parse_args(["upload", "photo.png", "--token", token])
    assert args.token == token


def test_the_default_token_is_printed_by_the_start_that_creates_it_and_never_again(monkeypatch, tmp_path, capsys):
    """Stderr ends up in logs (journald, a platform's log drain): later starts name the file, not the token."""
    monkeypatch.delenv("WIS_API_TOKENS", raising=False)
    for start in range(2):
        monkeypatch.setenv("WIS_DEFAULT_TOKEN_ANNOUNCED", "")  # each start is a new process
        create_app({"DATA_DIR": str(tmp_path)})
        printed = capsys.readouterr().err
        token = (tmp_path / "default-token").read_text().strip()
        assert str(tmp_path / "default-token") in printed
        assert printed.count(token) == (1 if start == 0 else 0), printed


def test_embedded_default_token_is_created_once_and_printed_once(tmp_path, start_gunicorn):
    """With no WIS_API_TOKENS, gunicorn's master prints the token once (not once per worker), and it works."""
    data_dir = tmp_path / "data"
    env = {"WIS_API_TOKENS": "", "WIS_DEFAULT_TOKEN_ANNOUNCED": "", "WIS_WORKERS": "2"}
    server = start_gunicorn(data_dir, env=env, extra_args=("-c", "python:service.gunicorn_config"))
    try:
        token = (data_dir / "default-token").read_text().strip()
        query = {"query": "{ stations { id } }"}
        assert requests.post(server.url + "/graph/v2", json=query, timeout=10).status_code == 401
        answer = requests.post(server.url + "/graph/v2", json=query, headers={TOKEN_HEADER: token}, timeout=10)
        assert answer.status_code == 200 and answer.json() == {"data": {"stations": []}}
    finally:
        server.stop()
    output = server.stderr_text
    assert output.count(f"{TOKEN_HEADER}: {token}") == 1
