"""Request ids, JSON logs and /metrics in one process (Flask test client)."""
import hashlib
import io
import json
import logging
import os
import re
import time

import pytest

from service import create_app
from service.web.auth import PUBLIC, requires
from service.web.observability import json_handler
from service.storage import get_repository
from support.metrics import metric_value
from support.tokens import HEADERS, TOKEN, TOKENS


@pytest.fixture
def captured_logs():
    """Everything the service logs, as the JSON lines an operator would read."""
    stream = io.StringIO()
    handler = json_handler(stream)
    logger = logging.getLogger("service")
    logger.addHandler(handler)
    yield stream
    logger.removeHandler(handler)


def test_request_id_from_client_is_echoed(client):
    response = client.get("/healthz", headers={"X-Request-Id": "build-42.step:7"})
    assert response.headers["X-Request-Id"] == "build-42.step:7"


@pytest.mark.parametrize("offered", [None, "", "has space", "x" * 129, "tab\there", "caf\u00e9"])
def test_missing_or_invalid_request_id_is_replaced_by_a_generated_one(client, offered):
    headers = {} if offered is None else {"X-Request-Id": offered}
    response = client.get("/healthz", headers=headers)
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Request-Id"])


def test_generated_request_ids_differ(client):
    first = client.get("/healthz").headers["X-Request-Id"]
    second = client.get("/healthz").headers["X-Request-Id"]
    assert first != second


def test_error_responses_carry_the_request_id_too(client):
    response = client.get("/no-such-route", headers={"X-Request-Id": "trace-me"})
    assert response.status_code == 404
    assert response.headers["X-Request-Id"] == "trace-me"


def test_500_is_logged_with_traceback_and_request_id_but_never_the_token(tmp_path, captured_logs):
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS})

    @app.get("/boom")
    @requires(PUBLIC)
    def boom():
        raise RuntimeError("exploded while serving")

    response = app.test_client().get("/boom", headers={**HEADERS, "X-Request-Id": "req-500"})

    assert response.status_code == 500
    assert response.get_json() == {"error": "internal server error"}
    assert "Traceback" not in response.get_data(as_text=True)
    records = [json.loads(line) for line in captured_logs.getvalue().splitlines()]
    [record] = [r for r in records if r.get("request_id") == "req-500"]
    assert record["levelname"] == "ERROR"
    assert "RuntimeError: exploded while serving" in record["exc_info"]
    assert TOKEN not in captured_logs.getvalue()


def test_metrics_count_requests_by_url_rule_and_status(tmp_path):
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS})

    @app.get("/things/<name>")
    @requires(PUBLIC)
    def thing(name):
        return {"name": name}

    client = app.test_client()
    for name in ("a", "b", "c"):
        client.get(f"/things/{name}")
    client.get("/no-such-route")

    text = client.get("/metrics").get_data(as_text=True)
    assert metric_value(text, "wis_http_requests_total", method="GET", route="/things/<name>", status="200") == 3
    assert metric_value(text, "wis_http_requests_total", route="/things/a") == 0
    assert metric_value(text, "wis_http_requests_total", route="<unmatched>", status="404") == 1
    assert metric_value(text, "wis_http_request_duration_seconds_count", route="/things/<name>", status="200") == 3


def test_metric_labels_come_from_a_fixed_set_whatever_the_client_sends(client):
    # Each new label value would be a new series kept for the life of the worker.
    for number in range(20):
        client.open(f"/nothing/{number}", method=f"BREW{number}")
        client.open(f"/uploads/{number:032x}", method=f"BREW{number}")
    text = client.get("/metrics").get_data(as_text=True)
    series = {line.split(" ")[0] for line in text.splitlines() if line.startswith("wis_http_requests_total")}
    assert series == {'wis_http_requests_total{method="<other>",route="<unmatched>",status="404"}',
                      'wis_http_requests_total{method="<other>",route="<unmatched>",status="405"}'}


def test_metrics_need_no_token_by_default(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    assert "wis_upload_streams_open" in response.get_data(as_text=True)


def test_metrics_can_require_the_token(tmp_path, auth):
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS, "METRICS_REQUIRE_TOKEN": True})
    client = app.test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=auth).status_code == 200


def test_open_streams_gauge_is_the_count_of_the_last_sweep(app, client, auth, other_auth):
    def open_streams():
        get_repository(app).sweep()  # as every worker does every few minutes, and `wis gc`
        return metric_value(client.get("/metrics").get_data(as_text=True), "wis_upload_streams_open")

    def create_stream(headers):
        body = {"destinationId": "stepImage", "fileName": "a.png", "fileSize": 10, "sha": "0" * 64}
        response = client.post("/uploads", json=body, headers=headers)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["streamId"]

    assert open_streams() == 0
    first = create_stream(auth)
    create_stream(auth)
    create_stream(other_auth)
    assert open_streams() == 3
    assert client.delete(f"/uploads/{first}", headers=auth).status_code == 204
    assert open_streams() == 2


def test_upload_request_bytes_are_counted_by_route(client, auth):
    body = {"destinationId": "stepImage", "fileName": "a.png", "fileSize": 10, "sha": "0" * 64}
    response = client.post("/uploads", json=body, headers=auth)

    text = client.get("/metrics").get_data(as_text=True)
    assert metric_value(text, "wis_upload_received_bytes_total", method="POST", route="/uploads",
                        status="201") == response.request.content_length


def test_completed_and_expired_streams_are_counted(tmp_path, auth):
    config = {"DATA_DIR": str(tmp_path / "data"), "API_TOKENS": TOKENS}
    client = create_app(config).test_client()
    data = b"GIF89a" + b"\1" * 20
    body = {"destinationId": "stepVideoGif", "fileName": "a.gif", "fileSize": len(data),
            "sha": hashlib.sha256(data).hexdigest()}
    abandoned, stream_id = (client.post("/uploads", json=body, headers=auth).get_json()["streamId"] for _ in "ab")
    chunk = {"chunkIndex": "0", "totalChunks": "1", "file": (io.BytesIO(data), "a.gif")}
    assert client.patch(f"/uploads/{stream_id}", data=chunk, headers=auth).status_code == 201
    # A retried final chunk answers 201 with the same path but completes nothing new.
    retry = {"chunkIndex": "0", "totalChunks": "1", "file": (io.BytesIO(data), "a.gif")}
    assert client.patch(f"/uploads/{stream_id}", data=retry, headers=auth).status_code == 201
    get_repository(client.application).sweep()
    text = client.get("/metrics").get_data(as_text=True)
    assert metric_value(text, "wis_upload_streams_completed_total") == 1
    assert metric_value(text, "wis_upload_streams_open") == 1

    # The abandoned stream idles past its expiry; the first request the next app serves sweeps it.
    [directory] = (tmp_path / "data" / "orgs").glob(f"*/streams/{abandoned}")
    old = time.time() - 25 * 3600
    os.utime(directory, (old, old))
    restarted = create_app(config).test_client()
    restarted.get("/healthz").close()
    text = restarted.get("/metrics").get_data(as_text=True)
    assert metric_value(text, "wis_upload_streams_expired_total") == 1
    assert metric_value(text, "wis_upload_streams_open") == 0


def test_graphql_errors_are_counted_by_code_and_the_build_is_described(client, auth):
    assert client.post("/graph/v2", json={"query": "{ stations { id "}, headers=auth).status_code in (200, 400)
    client.post("/graph/v2", json={"query": "{ noSuchField }"}, headers=auth).close()
    client.post("/graph/v2", json={"query": "mutation { stationCreate(input: {station: {id: \"x\", name: \"n\"}}) }"},
                headers=auth).close()
    text = client.get("/metrics").get_data(as_text=True)
    assert metric_value(text, "wis_graphql_errors_total", code="GRAPHQL_PARSE_FAILED") == 1
    assert metric_value(text, "wis_graphql_errors_total", code="GRAPHQL_VALIDATION_FAILED") == 1
    assert metric_value(text, "wis_graphql_errors_total", code="BAD_USER_INPUT") == 1
    backend = "shared" if client.application.config["DATABASE_URL"] else "file"
    assert metric_value(text, "wis_build_info", backend=backend) == 1
