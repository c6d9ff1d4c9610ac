from service.auth import parse_tokens


def test_healthz_needs_no_token(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_unknown_route_is_json_404(client, auth):
    response = client.get("/no-such-route", headers=auth)
    assert response.status_code == 404
    assert "error" in response.get_json()


def test_parse_tokens_assigns_bare_token_to_default_org():
    assert parse_tokens("acme:secret-acme, bare-token-1") == {"secret-acme": "acme", "bare-token-1": "default"}
