"""GraphQL over GET (GraphQL over HTTP), the explorer for browsers, and the vendor's spellings of the path and token
header (CONTRACT 12): `/graphql` and `x-pico-api-org` work everywhere `/graph/v2` and `x-service-api-org` do."""
import json

import pytest
import requests

from support.media import png
from support.servers import shipped_server
from support.tokens import HEADERS, TOKEN
from support.uploads import upload

STATIONS = "{ stations { id name } }"
STATION_CREATE = 'mutation { stationCreate(input: {station: {id: "st_1", name: "Press"}}) }'
JSON = {"Accept": "application/json"}
# What Chromium sends when it opens a page.
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"}
VENDOR_HEADERS = {"x-pico-api-org": TOKEN}
PATHS = ["/graph/v2", "/graphql"]


def get(client, path=PATHS[0], headers=None, **params):
    return client.get(path, query_string=params, headers={**HEADERS, **JSON, **(headers or {})})


def stations(client):
    response = client.post("/graph/v2", json={"query": STATIONS}, headers=HEADERS)
    return response.get_json()["data"]["stations"]


@pytest.fixture
def station(client):
    response = client.post("/graph/v2", json={"query": STATION_CREATE}, headers=HEADERS)
    assert response.get_json() == {"data": {"stationCreate": "CREATED"}}


# -- GET runs queries -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS)
def test_a_query_in_the_url_is_answered_as_json_not_with_the_explorer(client, station, path):
    response = get(client, path, query=STATIONS)
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.get_json() == {"data": {"stations": [{"id": "st_1", "name": "Press"}]}}
    # One org's data behind a header: no cache may keep it for another client.
    assert response.headers["Cache-Control"] == "no-store"


def test_variables_and_operation_name_come_as_url_parameters(client, station):
    document = "query All { stations { id } } query One($id: String!) { station(id: $id) { name } }"
    response = get(client, query=document, variables=json.dumps({"id": "st_1"}), operationName="One")
    assert response.get_json() == {"data": {"station": {"name": "Press"}}}
    # An empty operationName is no operationName (GraphQL over HTTP).
    response = get(client, query="{ stations { id } }", operationName="")
    assert response.get_json() == {"data": {"stations": [{"id": "st_1"}]}}


@pytest.mark.parametrize("accept, content_type", [
    ("application/graphql-response+json", "application/graphql-response+json; charset=utf-8"),
    ("application/graphql-response+json, application/json", "application/graphql-response+json; charset=utf-8"),
    ("application/json, application/graphql-response+json;q=0.9", "application/json"),
    ("application/json", "application/json"),
    ("*/*", "application/json"),
])
def test_the_answer_has_the_media_type_the_client_prefers(client, accept, content_type):
    for response in (get(client, headers={"Accept": accept}, query=STATIONS),
                     client.post("/graph/v2", json={"query": STATIONS}, headers={**HEADERS, "Accept": accept})):
        assert response.status_code == 200
        assert response.headers["Content-Type"] == content_type
        assert json.loads(response.get_data()) == {"data": {"stations": []}}


@pytest.mark.parametrize("document", [STATION_CREATE, "query Q { stations { id } } mutation M { "
                                                       'stationCreate(input: {station: {id: "st_1", name: "P"}}) }'])
def test_a_mutation_over_get_is_405_and_changes_nothing(client, document):
    params = {"query": document} if document == STATION_CREATE else {"query": document, "operationName": "M"}
    response = get(client, **params)
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert response.get_json()["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED"
    assert stations(client) == []
    # The same document's query operation runs over GET.
    if document != STATION_CREATE:
        assert get(client, query=document, operationName="Q").get_json() == {"data": {"stations": []}}


@pytest.mark.parametrize("params, message", [
    ({}, "`query` must be a non-empty string"),
    ({"query": "  "}, "`query` must be a non-empty string"),
    ({"query": STATIONS, "variables": "{not json"}, "the `variables` parameter must be a JSON object"),
    ({"query": STATIONS, "variables": "[1, 2]"}, "`variables` must be a JSON object"),
    ({"query": "{ stations { id }"}, "Syntax Error"),
    ({"query": "{ nothing }"}, "Cannot query field 'nothing'"),
    ({"query": "query A { stations { id } } query B { stations { id } }"}, "say which one to run"),
])
def test_malformed_get_requests_are_400_with_graphql_errors(client, params, message):
    response = get(client, **params)
    assert response.status_code == 400
    assert message in response.get_json()["errors"][0]["message"]


def test_get_uses_the_query_length_limit_of_post(client):
    response = get(client, query="{" + " " * 100_000 + "stations { id } }")
    assert response.status_code == 413
    assert response.get_json()["errors"][0]["extensions"]["code"] == "PAYLOAD_TOO_LARGE"


@pytest.mark.parametrize("headers", [{}, {"x-service-api-org": "wrong-token-123"}])
def test_a_query_over_get_needs_the_token(client, headers):
    response = client.get("/graph/v2", query_string={"query": STATIONS}, headers={**JSON, **headers})
    assert response.status_code == 401
    assert response.get_json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


# -- the explorer ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("headers, params", [
    (BROWSER, {}),
    (BROWSER, {"query": STATIONS}),  # a link to the explorer with a query in it
    ({}, {}),  # no Accept and no query: someone opening the URL
    ({"Accept": "*/*"}, {}),
])
def test_a_browser_or_a_bare_get_gets_the_explorer_without_a_token(client, path, headers, params):
    response = client.get(path, query_string=params, headers=headers)
    assert response.status_code == 200 and response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert "graphiql" in page.lower()
    # It posts to the path it was opened on, and names both spellings of the token header.
    assert f'"endpoint": "{path}"' in page
    assert '"header": "x-service-api-org"' in page and '"headerAlias": "x-pico-api-org"' in page
    assert "x-pico-api-org" in json.loads(page.split("const settings = ", 1)[1].split(";\n", 1)[0])["defaultQuery"]


def test_a_json_client_without_a_query_is_told_what_is_missing(client):
    response = client.get("/graph/v2", headers={**HEADERS, **JSON})
    assert response.status_code == 400
    assert "`query`" in response.get_json()["errors"][0]["message"]


# -- the vendor's spellings ------------------------------------------------------------------------------------------

def test_the_vendor_path_and_header_run_mutations_and_queries(client):
    response = client.post("/graphql", json={"query": STATION_CREATE}, headers=VENDOR_HEADERS)
    assert response.get_json() == {"data": {"stationCreate": "CREATED"}}
    response = client.get("/graphql", query_string={"query": STATIONS}, headers={**VENDOR_HEADERS, **JSON})
    assert response.get_json() == {"data": {"stations": [{"id": "st_1", "name": "Press"}]}}
    assert client.post("/graphql", json={"query": STATIONS}, headers={"x-pico-api-org": "wrong-token-123"}
                       ).status_code == 401


def test_the_documented_header_is_the_one_checked_when_both_are_sent(client):
    both = {"x-service-api-org": "wrong-token-123", "x-pico-api-org": TOKEN}
    assert client.post("/graph/v2", json={"query": STATIONS}, headers=both).status_code == 401
    both = {"x-service-api-org": TOKEN, "x-pico-api-org": "wrong-token-123"}
    assert client.post("/graph/v2", json={"query": STATIONS}, headers=both).status_code == 200


def test_the_vendor_header_works_for_uploads_and_media(client):
    response = upload(client, VENDOR_HEADERS, png(300, seed=1))
    assert response.status_code == 201
    path = response.get_json()["path"]
    assert client.get(path, headers=VENDOR_HEADERS).data == png(300, seed=1)
    assert client.get(path, headers={"x-pico-api-org": "wrong-token-123"}).status_code == 401


def test_the_vendor_header_works_for_the_test_endpoints(make_app):
    client = make_app(TEST_MODE=True).test_client()
    assert client.get("/_test/objects", headers=VENDOR_HEADERS).status_code == 200
    assert client.get("/_test/requests", headers=VENDOR_HEADERS).status_code == 200


def test_browsers_may_send_the_vendor_header(make_app):
    client = make_app(CORS_ORIGINS="http://page.example").test_client()
    response = client.options("/graphql", headers={"Origin": "http://page.example",
                                                   "Access-Control-Request-Method": "POST",
                                                   "Access-Control-Request-Headers": "x-pico-api-org, content-type"})
    assert response.status_code == 204
    assert "x-pico-api-org" in response.headers["Access-Control-Allow-Headers"].split(", ")


# -- logging ------------------------------------------------------------------------------------------------------------

def test_a_query_string_never_reaches_the_access_log(tmp_path, start_gunicorn):
    server = shipped_server(start_gunicorn, tmp_path, tmp_path / "data")
    try:
        secret = "S3cretValueInTheQueryString"
        response = requests.get(server.url + "/graphql", headers={**HEADERS, **JSON}, timeout=30,
                                params={"query": f'{{ stations(after: "{secret}") {{ id }} }}'})
        assert response.json() == {"data": {"stations": []}}
    finally:
        server.stop()
    log = (tmp_path / "access.log").read_text()
    assert '"path": "/graphql"' in log and "GET /graphql 200" in log
    assert secret not in log and "query=" not in log
