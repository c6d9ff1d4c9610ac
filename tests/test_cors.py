"""CORS (CONTRACT 9) through the Flask test client: WIS_CORS_ORIGINS, preflights on every route, headers on answers
and errors. The same in a real browser against gunicorn: test_cors_browser.py."""
import io

import pytest

from conftest import TOKEN, TOKENS
from service import create_app
from service.config import load_config
from service.errors import ConfigurationError

PAGE = "http://127.0.0.1:8765"
OTHER_PAGE = "https://app.example.com"
UNLISTED = "http://127.0.0.1:9999"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
CORS_HEADERS = ("Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers",
                "Access-Control-Expose-Headers", "Access-Control-Max-Age", "Access-Control-Allow-Credentials")
STREAM = "/uploads/0123456789abcdef0123456789abcdef"
MEDIA = "/api/v1/images/0123456789abcdef-photo.png"
# Every route, and the methods a preflight for it allows (HEAD comes with GET, OPTIONS with every rule).
ROUTES = [
    ("/graph/v2", "GET, HEAD, OPTIONS, POST"),
    ("/uploads", "OPTIONS, POST"),
    (STREAM, "DELETE, GET, HEAD, OPTIONS, PATCH"),
    (MEDIA, "GET, HEAD, OPTIONS"),
    ("/api/v1/videos/0123456789abcdef-clip.mp4", "GET, HEAD, OPTIONS"),
    ("/healthz", "GET, HEAD, OPTIONS"),
    ("/metrics", "GET, HEAD, OPTIONS"),
    ("/openapi.json", "GET, HEAD, OPTIONS"),
    ("/_test/faults", "DELETE, GET, HEAD, OPTIONS, POST"),
]


@pytest.fixture
def app(tmp_path):
    return create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "TESTING": True, "TEST_MODE": True,
                       "CORS_ORIGINS": f"{PAGE}, {OTHER_PAGE}"})


def preflight(client, path, origin=PAGE, method="POST", headers="x-service-api-org, content-type"):
    return client.options(path, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                         "Access-Control-Request-Headers": headers})


def cors_headers(response):
    return {name: response.headers[name] for name in CORS_HEADERS if name in response.headers}


def upload_png(client, headers):
    form = {"destinationId": "stepImage", "file": (io.BytesIO(PNG), "photo.png")}
    return client.post("/uploads", headers=headers, data=form)


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
                           headers={"Origin": PAGE, "x-service-api-org": TOKEN}),
               client.get("/healthz", headers={"Origin": PAGE})]
    assert [cors_headers(answer) for answer in answers] == [{}] * 4
    assert ["Origin" in answer.vary for answer in answers] == [False] * 4
