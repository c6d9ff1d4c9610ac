"""CORS (CONTRACT 9) through the Flask test client: WIS_CORS_ORIGINS, preflights on every route, headers on answers
and errors. The same in a real browser against gunicorn: test_cors_browser.py."""
import pytest

from service import create_app
from service.config import load_config
from service.web.auth import PUBLIC, requires
from service.web.cors import ALLOWED_REQUEST_HEADERS, EXPOSED_HEADERS, PREFLIGHT_MAX_AGE_SECONDS
from service.errors import ConfigurationError
from service.interface import MAX_REQUEST_BODY, TOKEN_HEADER
from support.media import PNG
from support.tokens import HEADERS, TOKENS
from support.uploads import upload

PAGE = "http://127.0.0.1:8765"
OTHER_PAGE = "https://app.example.com"
UNLISTED = "http://127.0.0.1:9999"
IMAGE = PNG + bytes(range(256)) * 4
CORS_HEADERS = ("Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers",
                "Access-Control-Expose-Headers", "Access-Control-Max-Age", "Access-Control-Allow-Credentials")
STREAM = "/uploads/0123456789abcdef0123456789abcdef"
MEDIA = "/api/v1/images/0123456789abcdef-photo.png"
# Every route, and the methods a preflight for it allows (HEAD comes with GET, OPTIONS with every rule).
ROUTES = [
    ("/graph/v2", "GET, HEAD, OPTIONS, POST"),
    ("/graphql", "GET, HEAD, OPTIONS, POST"),
    ("/uploads", "OPTIONS, POST"),
    (STREAM, "DELETE, GET, HEAD, OPTIONS, PATCH"),
    (MEDIA, "GET, HEAD, OPTIONS"),
    ("/api/v1/videos/0123456789abcdef-clip.mp4", "GET, HEAD, OPTIONS"),
    ("/healthz", "GET, HEAD, OPTIONS"),
    ("/metrics", "GET, HEAD, OPTIONS"),
    ("/events", "GET, HEAD, OPTIONS"),
    ("/openapi.json", "GET, HEAD, OPTIONS"),
    ("/_test/faults", "DELETE, GET, HEAD, OPTIONS, POST"),
    ("/_test/requests", "GET, HEAD, OPTIONS"),
]


@pytest.fixture
def app(tmp_path):
    return create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "TESTING": True, "TEST_MODE": True,
                       "CORS_ORIGINS": f"{PAGE}, {OTHER_PAGE}"})


def preflight(client, path, origin=PAGE, method="POST", headers=f"{TOKEN_HEADER}, content-type"):
    return client.options(path, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                         "Access-Control-Request-Headers": headers})


def cors_headers(response):
    return {name: response.headers[name] for name in CORS_HEADERS if name in response.headers}


# -- configuration ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, origins", [
    ("", ()),
    (" , ", ()),
    ("http://127.0.0.1:8765", ("http://127.0.0.1:8765",)),
    ("https://App.Example.COM, http://localhost:3000", ("https://app.example.com", "http://localhost:3000")),
    # Browsers leave the default port out of Origin, so a listed default port would never match as written.
    ("https://app.example.com:443,http://app.example.com:80", ("https://app.example.com", "http://app.example.com")),
    ("http://[::1]:8080", ("http://[::1]:8080",)),
    ("http://a.example, http://a.example", ("http://a.example",)),
])
def test_origins_are_read_as_browsers_send_them(value, origins):
    assert load_config(environ={"WIS_CORS_ORIGINS": value})["CORS_ORIGINS"] == origins


@pytest.mark.parametrize("value", [
    "*", "null", "app.example.com", "https://app.example.com/", "https://app.example.com/page",
    "ftp://app.example.com", "https://user@app.example.com", "https://app.example.com:0",
    "https://app.example.com:65536", "https://app.example.com?x=1", "https://app.example.com#top",
    "https://bad_host.example", "http://127.0.0.1:8765, https://", "https://ex ample.com",
])
def test_a_malformed_origin_stops_start_up_naming_the_variable(monkeypatch, tmp_path, value):
    monkeypatch.setenv("WIS_CORS_ORIGINS", value)
    with pytest.raises(ConfigurationError, match="WIS_CORS_ORIGINS"):
        create_app({"DATA_DIR": str(tmp_path), "API_TOKENS": TOKENS})


def test_origins_given_by_an_embedding_caller_are_checked_as_well(tmp_path):
    config = load_config({"CORS_ORIGINS": ["HTTP://Localhost:3000"]}, environ={})
    assert config["CORS_ORIGINS"] == ("http://localhost:3000",)
    with pytest.raises(ConfigurationError, match="WIS_CORS_ORIGINS.*not an origin"):
        create_app({"DATA_DIR": str(tmp_path), "API_TOKENS": TOKENS, "CORS_ORIGINS": "localhost:3000"})


def test_without_origins_no_response_has_cors_headers(tmp_path):
    app = create_app({"DATA_DIR": str(tmp_path), "API_TOKENS": TOKENS, "TESTING": True})
    client = app.test_client()
    assert app.config["CORS_ORIGINS"] == ()
    answers = [preflight(client, "/graph/v2"), preflight(client, "/uploads"),
               client.post("/graph/v2", json={"query": "{ stations { id } }"},
                           headers={"Origin": PAGE, **HEADERS}),
               client.get("/healthz", headers={"Origin": PAGE})]
    assert [cors_headers(answer) for answer in answers] == [{}] * 4
    assert ["Origin" in answer.vary for answer in answers] == [False] * 4


# -- preflights ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, methods", ROUTES)
def test_a_listed_origin_gets_a_preflight_answer_on_every_route_without_a_token(client, path, methods):
    response = preflight(client, path, method="PATCH")
    assert response.status_code == 204
    assert response.get_data() == b"" and "Content-Type" not in response.headers
    assert cors_headers(response) == {
        "Access-Control-Allow-Origin": PAGE,
        "Access-Control-Allow-Methods": methods,
        "Access-Control-Allow-Headers": (f"{TOKEN_HEADER}, x-pico-api-org, content-type, tus-resumable, upload-length, "
                                         "upload-offset, upload-metadata, upload-checksum, last-event-id"),
        "Access-Control-Max-Age": "600",
    }
    assert "Origin" in response.vary


def test_the_preflight_lists_the_contract_headers_and_a_ten_minute_max_age():
    assert ALLOWED_REQUEST_HEADERS == (TOKEN_HEADER, "x-pico-api-org", "content-type", "tus-resumable", "upload-length",
                                       "upload-offset", "upload-metadata", "upload-checksum", "last-event-id")
    assert EXPOSED_HEADERS == ("Location", "Upload-Offset", "Upload-Length", "Upload-Expires", "Tus-Resumable",
                               "Tus-Version", "Tus-Max-Size", "Tus-Extension", "Media-Path", "ETag", "X-Request-Id")
    assert PREFLIGHT_MAX_AGE_SECONDS == 600


def test_every_listed_origin_is_answered_with_its_own_origin(client):
    assert preflight(client, "/graph/v2", origin=OTHER_PAGE).headers["Access-Control-Allow-Origin"] == OTHER_PAGE
    assert preflight(client, "/graph/v2", origin=PAGE).headers["Access-Control-Allow-Origin"] == PAGE


@pytest.mark.parametrize("origin", [UNLISTED, "http://127.0.0.1:87650", "HTTP://127.0.0.1:8765", "null",
                                    PAGE + "/", "https://app.example.com.evil.example"])
@pytest.mark.parametrize("path", ["/graph/v2", "/uploads", STREAM, "/healthz"])
def test_an_unlisted_origin_gets_no_cors_headers(client, origin, path):
    response = preflight(client, path, origin=origin)
    assert cors_headers(response) == {}
    assert "Origin" in response.vary


def test_a_preflight_for_an_unknown_path_is_the_404_with_cors_headers(client):
    response = preflight(client, "/no-such-route")
    assert response.status_code == 404
    assert "error" in response.get_json()
    assert response.headers["Access-Control-Allow-Origin"] == PAGE
    assert "Access-Control-Allow-Methods" not in response.headers


def test_an_options_request_that_is_no_preflight_goes_on_to_the_route(client):
    response = client.options("/healthz", headers={"Origin": PAGE})
    assert response.status_code == 200
    assert response.allow.as_set() == {"get", "head", "options"}  # Flask's own answer to OPTIONS
    assert response.headers["Access-Control-Allow-Origin"] == PAGE
    assert "Access-Control-Allow-Methods" not in response.headers


def test_a_tus_options_view_is_reached_by_plain_options_and_not_by_preflights(app, client):
    # tus discovery (OPTIONS, no token) has no Access-Control-Request-Method: its view answers it, CORS does not.
    calls = []

    @app.route("/tus-discovery", methods=["OPTIONS"])
    @requires(PUBLIC)
    def tus_discovery():
        calls.append(1)
        return "", 204, {"Tus-Resumable": "1.0.0", "Tus-Version": "1.0.0"}

    plain = client.options("/tus-discovery", headers={"Origin": PAGE})
    assert (plain.status_code, plain.headers["Tus-Version"], calls) == (204, "1.0.0", [1])
    assert plain.headers["Access-Control-Allow-Origin"] == PAGE
    assert "Tus-Version" in plain.headers["Access-Control-Expose-Headers"]
    answered = preflight(client, "/tus-discovery", method="OPTIONS")
    assert (answered.status_code, answered.headers["Access-Control-Allow-Methods"], calls) == (204, "OPTIONS", [1])
    assert "Tus-Version" not in answered.headers


# -- answers and errors -----------------------------------------------------------------------------

def test_an_answer_to_a_listed_origin_allows_it_and_exposes_the_contract_headers(client, auth):
    response = client.post("/graph/v2", json={"query": "{ stations { id } }"}, headers={"Origin": PAGE, **auth})
    assert response.status_code == 200
    assert cors_headers(response) == {
        "Access-Control-Allow-Origin": PAGE,
        "Access-Control-Expose-Headers": ("Location, Upload-Offset, Upload-Length, Upload-Expires, Tus-Resumable, "
                                          "Tus-Version, Tus-Max-Size, Tus-Extension, Media-Path, ETag, X-Request-Id"),
    }
    assert response.vary.as_set() == {"origin"}


def test_an_upload_and_its_media_carry_the_cors_headers(client, auth):
    headers = {"Origin": PAGE, **auth}
    uploaded = upload(client, headers, IMAGE)
    assert uploaded.status_code == 201
    assert uploaded.headers["Access-Control-Allow-Origin"] == PAGE
    media = client.get(uploaded.get_json()["path"], headers=headers)
    assert media.status_code == 200 and media.get_data() == IMAGE
    assert media.headers["Access-Control-Allow-Origin"] == PAGE
    assert "ETag" in media.headers["Access-Control-Expose-Headers"]
    # A conditional request answered 304 is still readable by the page.
    again = client.get(uploaded.get_json()["path"], headers={"If-None-Match": media.headers["ETag"], **headers})
    assert again.status_code == 304
    assert again.headers["Access-Control-Allow-Origin"] == PAGE


def test_an_answer_to_an_unlisted_origin_or_to_no_origin_has_no_cors_headers(client, auth):
    for headers in ({"Origin": UNLISTED, **auth}, auth):
        response = client.post("/graph/v2", json={"query": "{ stations { id } }"}, headers=headers)
        assert response.status_code == 200
        assert cors_headers(response) == {}
        assert "Origin" in response.vary


def test_errors_to_a_listed_origin_carry_the_cors_headers(app, client, auth):
    @app.get("/boom")
    @requires(PUBLIC)
    def boom():
        raise RuntimeError("exploded")

    origin = {"Origin": PAGE}
    answers = {
        "401 GraphQL": client.post("/graph/v2", json={"query": "{ stations { id } }"}, headers=origin),
        "401 uploads": client.get(STREAM, headers=origin),
        "404 stream": client.get(STREAM, headers={**origin, **auth}),
        "404 media": client.get(MEDIA, headers={**origin, **auth}),
        "404 route": client.get("/no-such-route", headers=origin),
        "405": client.put("/uploads", headers={**origin, **auth}),
        "400": client.post("/uploads", data=b"x", content_type="text/plain", headers={**origin, **auth}),
        "413": client.post("/graph/v2", data=b"x" * (MAX_REQUEST_BODY + 1),
                           content_type="application/json", headers={**origin, **auth}),
        "500": client.get("/boom", headers=origin),
    }
    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert statuses == {name: int(name.split()[0]) for name in answers}
    for name, answer in answers.items():
        assert answer.headers.get("Access-Control-Allow-Origin") == PAGE, name
        assert "X-Request-Id" in answer.headers["Access-Control-Expose-Headers"], name
        assert "error" in answer.get_json(), name


def test_no_credentials_are_ever_allowed(client, auth):
    answers = [preflight(client, "/graph/v2"), client.get("/healthz", headers={"Origin": PAGE}),
               client.post("/graph/v2", json={"query": "{ stations { id } }"}, headers={"Origin": PAGE, **auth})]
    assert [answer.headers.get("Access-Control-Allow-Credentials") for answer in answers] == [None] * 3
    assert [answer.headers["Access-Control-Allow-Origin"] for answer in answers] == [PAGE] * 3


def test_every_rule_of_the_app_answers_a_preflight(app, client):
    # Sample values for the variable parts of the rules, so that routes added later are covered too.
    samples = {"stream_id": STREAM.rsplit("/", 1)[1], "segment": "images", "name": "0123456789abcdef-a.png",
               "filename": "graphiql/graphiql.min.css", "identifier": "gearbox_assembly", "kind": "processes"}
    adapter = app.url_map.bind("localhost")
    rules = list(app.url_map.iter_rules())
    assert {"/graph/v2", "/uploads", "/uploads/<stream_id>", "/healthz"} <= {rule.rule for rule in rules}
    for rule in rules:
        path = adapter.build(rule.endpoint, {argument: samples[argument] for argument in rule.arguments})
        response = preflight(client, path)
        assert response.status_code == 204, path
        assert set(rule.methods) <= set(response.headers["Access-Control-Allow-Methods"].split(", ")), path
