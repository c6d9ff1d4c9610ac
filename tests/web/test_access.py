"""Each scope against every endpoint (CONTRACT 16), on both backends: every view of the app declares what it needs
(service.web.auth.requires), this module has a request for every view, and each is sent with no credential, with a
token of each scope and with the pages' session cookie, expecting what the declaration says. A new view that declares
nothing, or that the table below does not name, fails here."""
import hmac
from pathlib import Path

import pytest

from service.domain import token_directory
from service.domain.tokens import SCOPES, allows, create_token, list_tokens
from service.storage.contract import utc_timestamp
from service.web.auth import FLASK_VIEWS, PUBLIC, SIGNED_IN, UNDECLARED, declared_access
from service.web.sessions import COOKIE_NAME
from support.tokens import HEADERS, READ_TOKEN, SCOPED_HEADERS

# endpoint -> (method, path, keyword arguments of the test client): a request each view answers once it is let in
# (often a 400 or 404 of its own: what matters is that it is not a 401, 403, or a page's redirect to the login).
REQUESTS = {
    "events.follow": ("GET", "/events?after=-1", {}),  # a 400, after the check: no stream is held open
    "graphql.get": ("GET", "/graph/v2?query={latestEventSeq}", {"headers": {"Accept": "application/json"}}),
    "graphql.run": ("POST", "/graph/v2", {"json": {"query": "{ latestEventSeq }"}}),
    "health.healthz": ("GET", "/healthz", {}),
    "health.readyz": ("GET", "/readyz", {}),
    "observability.metrics_view": ("GET", "/metrics", {}),
    "openapi.openapi_document": ("GET", "/openapi.json", {}),
    "pages.home": ("GET", "/", {}),
    "pages.login": ("GET", "/view/login", {}),
    "pages.login_submit": ("POST", "/view/login", {"data": {"token": "not a token"}}),
    "pages.logout": ("POST", "/view/logout", {}),
    "pages.processes": ("GET", "/view/processes", {}),
    "pages.process": ("GET", "/view/processes/no_such_process", {}),
    "pages.products": ("GET", "/view/products", {}),
    "pages.product": ("GET", "/view/products/no_such_product", {}),
    "pages.stations": ("GET", "/view/stations", {}),
    "pages.history": ("GET", "/view/stations/no_such_station/history", {}),
    "static": ("GET", "/static/pages.css", {}),
    "testing_api.add_fault": ("POST", "/_test/faults", {"json": {}}),
    "testing_api.clear_faults": ("DELETE", "/_test/faults", {}),
    "testing_api.list_faults": ("GET", "/_test/faults", {}),
    "testing_api.objects": ("GET", "/_test/objects", {}),
    "testing_api.requests_received": ("GET", "/_test/requests", {}),
    "testing_api.reset": ("POST", "/_test/reset", {}),
    "testing_api.restore": ("POST", "/_test/restore", {"data": b"not an archive"}),
    "testing_api.snapshot": ("POST", "/_test/snapshot", {}),
    "testing_api.webhooks_due": ("POST", "/_test/webhooks/due", {}),
    "uploads.create_upload": ("POST", "/uploads", {"json": {}}),
    "uploads.delete_stream": ("DELETE", "/uploads/no_such_stream", {}),
    "uploads.media": ("GET", "/api/v1/images/no-such-image.png", {}),
    "uploads.send_chunk": ("PATCH", "/uploads/no_such_stream", {"data": {"chunkIndex": "0"}}),
    "uploads.stream_status": ("GET", "/uploads/no_such_stream", {}),
    "uploads.tus_options": ("OPTIONS", "/uploads", {}),
}
CREDENTIALS = ("nothing", "session", *SCOPES)


@pytest.fixture
def app(make_app):
    # Test mode for /_test/; the metrics behind a token, so that their view is held to its declared scope.
    return make_app(TEST_MODE=True, METRICS_REQUIRE_TOKEN=True)


def test_every_view_declares_what_it_needs_and_is_in_the_table(app):
    endpoints = {rule.endpoint for rule in app.url_map.iter_rules()}
    undeclared = {endpoint for endpoint in endpoints
                  if endpoint not in FLASK_VIEWS and not hasattr(app.view_functions[endpoint], "access")}
    assert undeclared == set(), "each view declares its scope: @requires(...) (service.web.auth)"
    assert endpoints == set(REQUESTS), "each view has a request in REQUESTS"


def expected(access, credential):
    """What a request of `credential` to a view that declares `access` gets: "in", "401", "403" or "login"."""
    if access.scope is None:
        return "in"
    if not access.header:  # a page: its session, or the login
        return "in" if credential == "session" else "login"
    if credential == "session":
        return "in" if access.cookie else "401"
    if credential == "nothing":
        return "401"
    return "in" if allows(credential, access.scope) else "403"


def outcome(response):
    if response.status_code in (401, 403):
        return str(response.status_code)
    if response.status_code == 302 and response.headers["Location"].startswith("/view/login"):
        return "login"
    return "in"


@pytest.mark.parametrize("endpoint", sorted(REQUESTS))
def test_each_credential_gets_what_the_view_declares(app, endpoint):
    access = declared_access(app, endpoint)
    assert access is not UNDECLARED
    method, path, options = REQUESTS[endpoint]
    for credential in CREDENTIALS:
        client = app.test_client()
        headers = dict(options.get("headers", {}))
        if credential == "session":
            # A session started with the admin token: it still only reads.
            assert client.post("/view/login", data={"token": HEADERS["x-service-api-org"]}).status_code == 303
        elif credential != "nothing":
            headers.update(SCOPED_HEADERS[credential])
        response = client.open(path, method=method, **{**options, "headers": headers})
        assert outcome(response) == expected(access, credential), (credential, response.status_code,
                                                                  response.get_data(as_text=True)[:300])
        if outcome(response) == "403":
            assert response.is_json and f"the {access.scope} scope" in response.get_json()["error"]


def test_a_forbidden_upload_or_stream_deletion_changes_nothing(client, auth):
    read = {"x-service-api-org": READ_TOKEN}
    stream = {"destinationId": "stepImage", "fileName": "a.png", "fileSize": 10, "sha": "a" * 64}
    created = client.post("/uploads", headers=auth, json=stream).get_json()["streamId"]
    assert client.post("/uploads", headers=read, json=stream).status_code == 403
    assert client.delete(f"/uploads/{created}", headers=read).status_code == 403
    assert client.patch(f"/uploads/{created}", headers=read, data={"chunkIndex": "0", "totalChunks": "1"}).status_code \
        == 403
    assert client.get(f"/uploads/{created}", headers=auth).get_json()["receivedChunks"] == []


def test_the_session_cookie_opens_no_graphql_even_for_a_read(app):
    client = app.test_client()
    client.post("/view/login", data={"token": READ_TOKEN})
    assert client.get_cookie(COOKIE_NAME) is not None
    assert client.post("/graph/v2", json={"query": "{ latestEventSeq }"}).status_code == 401


def test_public_views_need_nothing(app):
    assert {endpoint for endpoint in REQUESTS if declared_access(app, endpoint) == PUBLIC} == {
        "health.healthz", "health.readyz", "openapi.openapi_document", "pages.home", "pages.login",
        "pages.login_submit", "pages.logout", "static", "uploads.tus_options"}
    assert {endpoint for endpoint in REQUESTS if declared_access(app, endpoint) == SIGNED_IN} == {
        "pages.processes", "pages.process", "pages.products", "pages.product", "pages.stations", "pages.history"}


def test_a_view_that_declares_nothing_needs_an_admin_token(app):
    @app.get("/undeclared")
    def undeclared():
        return "in"

    client = app.test_client()
    assert [client.get("/undeclared", headers=SCOPED_HEADERS[scope]).status_code for scope in SCOPES] == [
        403, 403, 200]
    assert client.get("/undeclared").status_code == 401


def test_a_request_compares_its_token_once_however_many_tokens_there_are(make_app, monkeypatch):
    """Constant time and no scan: the token's SHA-256 is looked up, then compared once, whether it is known or not."""
    many = ",".join(f"org{number}:token-number-{number}" for number in range(300))
    client = make_app(API_TOKENS=f"{many},{HEADERS['x-service-api-org']}").test_client()
    made, compare = [], hmac.compare_digest

    def counted(a, b):
        made.append(1)
        return compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counted)
    for token, status in (("token-number-150", 200), ("token-number-1500", 401)):
        before = len(made)
        response = client.post("/graph/v2", headers={"x-service-api-org": token}, json={"query": "{ latestEventSeq }"})
        assert (response.status_code, len(made) - before) == (status, 1)


@pytest.mark.file_backend_only("the shared backend has no embedded default token: it requires WIS_API_TOKENS")
def test_the_embedded_default_token_is_admin_and_signs_its_changes_default_token(make_app, monkeypatch):
    monkeypatch.setenv("WIS_DEFAULT_TOKEN_ANNOUNCED", "1")
    app = make_app(API_TOKENS="", TEST_MODE=True)
    token = (Path(app.config["DATA_DIR"]) / "default-token").read_text().strip()
    client, headers = app.test_client(), {"x-service-api-org": token}
    create = 'mutation { stationCreate(input: {station: {id: "st_1", name: "A"}}, comment: "first") }'
    assert client.post("/graph/v2", headers=headers, json={"query": create}).get_json() == {
        "data": {"stationCreate": "CREATED"}}
    answer = client.post("/graph/v2", headers=headers, json={"query": '{ stationHistory(id: "st_1") { author } }'})
    assert answer.get_json()["data"]["stationHistory"] == [{"author": "default-token"}]
    assert client.get("/_test/objects", headers=headers).status_code == 200


def test_a_stored_tokens_use_is_written_after_a_response_once_a_minute_not_per_request(app, repo, monkeypatch):
    token, _ = create_token(repo, "default", "tablet", "read")
    client, headers = app.test_client(), {"x-service-api-org": token}
    for _ in range(5):
        assert client.post("/graph/v2", headers=headers, json={"query": "{ latestEventSeq }"}).status_code == 200
    assert [stored.last_used_at for stored in list_tokens(repo)] == [None]  # within the process's first minute
    monkeypatch.setattr(token_directory, "USE_RECORD_SECONDS", 0)  # as if the minute had passed
    client.post("/graph/v2", headers=headers, json={"query": "{ latestEventSeq }"})
    [used] = [stored.last_used_at for stored in list_tokens(repo)]
    assert used is not None and used <= utc_timestamp()
