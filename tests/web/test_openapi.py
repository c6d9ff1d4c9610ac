"""service/openapi.json: served without a token, a valid OpenAPI document, and true to real responses."""
import base64
import hashlib
import io
import json
import re
from pathlib import Path

import pytest
from openapi_core import Config, OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from openapi_spec_validator import validate

import service
from service.interface import MAX_REQUEST_BODY, MAX_SNAPSHOT_BYTES

from support.paths import REPOSITORY
from support.tokens import READ_HEADERS

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
MP4 = b"\0\0\0\x18ftypmp42" + b"\1" * 500


@pytest.fixture(scope="module")
def document():
    return json.loads((Path(service.__file__).parent / "openapi.json").read_text())


@pytest.fixture(scope="module")
def openapi(document):
    # GraphQL over HTTP's own media type is JSON; openapi-core knows application/json by name only.
    return OpenAPI.from_dict(document, config=Config(
        extra_media_type_deserializers={"application/graphql-response+json": json.loads}))


def test_document_is_served_without_token_and_valid(client, document):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.content_type == "application/json"
    assert response.get_json() == document
    validate(document)


def test_every_file_the_document_names_is_in_the_repository(document):
    """Its readers (clients, integrators) have the repository, not the files its authors worked from."""
    named = re.findall(r"[\w./-]+\.md\b", json.dumps(document))
    assert named, "the document points its readers at the docs"
    root = REPOSITORY  # the checkout (the package may be installed elsewhere)
    assert [name for name in named if not (root / name).is_file()] == []


def test_document_covers_the_upload_media_graphql_events_and_test_endpoints(document):
    assert {path: sorted(ops) for path, ops in document["paths"].items()} == {
        "/uploads": ["options", "post"],
        "/uploads/{streamId}": ["delete", "get", "head", "parameters", "patch"],
        "/api/v1/images/{name}": ["get", "head"],
        "/api/v1/videos/{name}": ["get", "head"],
        # Both GraphQL paths are one path item (the vendor's /graphql is an alias).
        "/graph/v2": ["$ref"],
        "/graphql": ["$ref"],
        "/events": ["get"],
        "/_test/reset": ["post"],
        "/_test/snapshot": ["post"],
        "/_test/restore": ["post"],
        "/_test/objects": ["get"],
        "/_test/requests": ["get"],
        "/_test/faults": ["delete", "get", "post"],
        "/_test/webhooks/due": ["post"],
    }
    assert sorted(document["components"]["pathItems"]["GraphQL"]) == ["get", "post"]


def test_document_names_both_spellings_of_the_token_header(document):
    scheme = document["components"]["securitySchemes"]["apiToken"]
    assert (scheme["in"], scheme["name"]) == ("header", "x-service-api-org")
    assert "x-pico-api-org" in scheme["description"] and "x-pico-api-org" in document["info"]["description"]


def test_the_pages_session_cookie_opens_reading_media_and_the_event_stream_and_nothing_else(document):
    scheme = document["components"]["securitySchemes"]["pageSession"]
    assert (scheme["in"], scheme["name"]) == ("cookie", "wis_session")
    opened = sorted((path, method) for path, item in document["paths"].items() for method, operation in item.items()
                    if isinstance(operation, dict) and {"pageSession": []} in operation.get("security", []))
    assert opened == [(path, method) for path in ("/api/v1/images/{name}", "/api/v1/videos/{name}")
                      for method in ("get", "head")] + [("/events", "get")]


class AnsweredRequest(WerkzeugOpenAPIRequest):
    """The request of a response, for finding its operation; its body was consumed by the app."""

    @property
    def body(self):
        return b""


def chunk(index, total, data):
    return {"chunkIndex": str(index), "totalChunks": str(total), "file": (_bytes_io(data), "part.bin")}


def _bytes_io(data):
    return io.BytesIO(data)


def test_real_responses_match_the_document(client, auth, other_auth, openapi):
    seen = []

    def call(method, path, expected_status, **kwargs):
        response = client.open(path, method=method, **kwargs)
        assert response.status_code == expected_status, response.get_data(as_text=True)
        openapi.validate_response(AnsweredRequest(response.request), WerkzeugOpenAPIResponse(response))
        seen.append((method, expected_status))
        return response

    single = {"destinationId": "stepImage", "file": (_bytes_io(PNG), "photo.png")}
    image = call("POST", "/uploads", 201, headers=auth, data=single).get_json()["path"]
    call("POST", "/uploads", 201, headers=auth, data={**single, "file": (_bytes_io(PNG), "p.png"),
                                                        "sha": hashlib.sha256(PNG).hexdigest()})
    call("POST", "/uploads", 400, headers=auth, data={"destinationId": "stepVideo", "file": (_bytes_io(PNG), "x.png")})
    call("POST", "/uploads", 400, headers=auth, json={"destinationId": "nowhere"})
    call("POST", "/uploads", 401, data={"destinationId": "stepImage", "file": (_bytes_io(PNG), "photo.png")})
    call("POST", "/uploads", 413, headers=auth, json={"destinationId": "stepImage", "fileName": "huge.png",
                                                      "fileSize": 8 * 1024 * 1024 + 1, "sha": "0" * 64})
    call("POST", "/uploads", 413, headers=auth, data=b" " * (MAX_REQUEST_BODY + 1), content_type="application/json")

    stream_body = {"destinationId": "stepVideo", "fileName": "clip.mp4", "fileSize": len(MP4),
                   "sha": hashlib.sha256(MP4).hexdigest()}
    stream = call("POST", "/uploads", 201, headers=auth, json=stream_body).get_json()["streamId"]
    call("GET", f"/uploads/{stream}", 200, headers=auth)
    call("PATCH", f"/uploads/{stream}", 200, headers=auth, data=chunk(1, 2, MP4[300:]))
    call("PATCH", f"/uploads/{stream}", 400, headers=auth, data=chunk(5, 2, MP4[:300]))
    call("GET", f"/uploads/{stream}", 200, headers=auth)
    video = call("PATCH", f"/uploads/{stream}", 201, headers=auth, data=chunk(0, 2, MP4[:300])).get_json()["path"]
    call("GET", f"/uploads/{stream}", 200, headers=auth)
    call("PATCH", f"/uploads/{stream}", 404, headers=other_auth, data=chunk(0, 2, MP4[:300]))
    call("GET", f"/uploads/{stream}", 401)
    call("GET", f"/uploads/{stream}", 403, headers=READ_HEADERS)  # a stream's state needs the write scope
    call("DELETE", f"/uploads/{stream}", 204, headers=auth)
    call("DELETE", f"/uploads/{stream}", 404, headers=auth)
    call("GET", f"/uploads/{'0' * 32}", 404, headers=auth)

    etag = call("GET", image, 200, headers=auth).headers["ETag"]
    call("HEAD", image, 200, headers=auth)
    call("GET", image, 206, headers={**auth, "Range": "bytes=0-9"})
    call("GET", image, 304, headers={**auth, "If-None-Match": etag})
    call("GET", image, 416, headers={**auth, "Range": f"bytes={len(PNG) + 10}-"})
    call("GET", image, 404, headers=other_auth)
    call("GET", image, 401)
    call("GET", video, 200, headers=auth)
    call("HEAD", video, 200, headers=auth)

    # tus 1.0 on the same resources
    tus = {**auth, "Tus-Resumable": "1.0.0"}
    octets = {**tus, "Content-Type": "application/offset+octet-stream"}
    metadata = "destinationId " + base64.b64encode(b"stepVideo").decode()
    assert "Tus-Extension" in call("OPTIONS", "/uploads", 204).headers
    created = call("POST", "/uploads", 201, headers={**tus, "Upload-Length": str(len(MP4)), "Upload-Metadata": metadata})
    upload = created.headers["Location"]
    assert created.get_json() == {"streamId": upload.rsplit("/", 1)[1]}
    call("POST", "/uploads", 412, headers={**auth, "Upload-Length": "10", "Upload-Metadata": metadata})
    call("POST", "/uploads", 413, headers={**tus, "Upload-Length": str(600 * 1024 * 1024), "Upload-Metadata": metadata})
    assert call("HEAD", upload, 200, headers=tus).headers["Upload-Offset"] == "0"
    call("PATCH", upload, 204, headers={**octets, "Upload-Offset": "0"}, data=MP4[:100])
    call("PATCH", upload, 409, headers={**octets, "Upload-Offset": "0"}, data=MP4[100:])
    call("PATCH", upload, 460, headers={**octets, "Upload-Offset": "100", "Upload-Checksum": "sha256 " + base64.b64encode(
        b"x" * 32).decode()}, data=MP4[100:])
    call("PATCH", upload, 412, headers={**auth, "Content-Type": "application/offset+octet-stream", "Upload-Offset": "100"},
         data=MP4[100:])
    done = call("PATCH", upload, 204, headers={**octets, "Upload-Offset": "100"}, data=MP4[100:])
    assert done.headers["Media-Path"].startswith("/api/v1/videos/")
    call("HEAD", upload, 200, headers=tus)
    call("DELETE", upload, 204, headers=tus)

    assert len(seen) == 41


def test_graphql_and_test_mode_responses_match_the_document(make_app, auth, openapi):
    client = make_app(TEST_MODE=True).test_client()
    vendor = {"x-pico-api-org": auth["x-service-api-org"]}
    seen = []

    def call(method, path, expected_status, **kwargs):
        response = client.open(path, method=method, **kwargs)
        assert response.status_code == expected_status, response.get_data(as_text=True)
        openapi.validate_response(AnsweredRequest(response.request), WerkzeugOpenAPIResponse(response))
        seen.append((method, path, expected_status))
        return response

    mutation = {"query": 'mutation { stationCreate(input: {station: {id: "st_1", name: "Press"}}) }'}
    for path in ("/graph/v2", "/graphql"):
        call("POST", path, 200, headers=auth, json=mutation)
        call("POST", path, 200, headers=vendor, json={"query": "{ stations { id } }"})
        call("POST", path, 400, headers=auth, json={"query": "{ nothing }"})
        call("POST", path, 401, json={"query": "{ stations { id } }"})
        call("POST", path, 413, headers=auth, json={"query": "{" * 100_001})
        call("GET", path, 200, headers={**auth, "Accept": "application/json"}, query_string={"query": "{ stations { id } }"})
        call("GET", path, 200, headers={**vendor, "Accept": "application/graphql-response+json"},
             query_string={"query": "query Q($n: Int) { stations(first: $n) { id } }", "variables": '{"n": 1}'})
        call("GET", path, 200, headers={"Accept": "text/html"})
        call("GET", path, 400, headers={**auth, "Accept": "application/json"}, query_string={"variables": "[1]"})
        call("GET", path, 401, headers={"Accept": "application/json"}, query_string={"query": "{ stations { id } }"})
        call("GET", path, 405, headers={**auth, "Accept": "application/json"}, query_string=mutation)

    call("POST", "/_test/faults", 201, headers=auth, json={"path": "^/healthz$", "status": 503, "rate": 0.5, "times": 3})
    call("POST", "/_test/webhooks/due", 200, headers=auth)
    call("POST", "/_test/faults", 400, headers=auth, json={"status": 503, "rate": 2})
    call("GET", "/_test/faults", 200, headers=vendor)
    call("DELETE", "/_test/faults", 204, headers=auth)
    call("GET", "/_test/requests", 200, headers=auth)
    call("GET", "/_test/requests", 200, headers=auth, query_string={"since": "3"})
    call("GET", "/_test/requests", 400, headers=auth, query_string={"since": "three"})
    call("GET", "/_test/requests", 401)
    call("GET", "/_test/objects", 200, headers=auth)
    call("POST", "/_test/reset", 200, headers=auth)
    snapshot = call("POST", "/_test/snapshot", 200, headers=auth).get_data()
    call("POST", "/_test/snapshot", 401)
    gzip_body = {**auth, "Content-Type": "application/gzip"}
    call("POST", "/_test/restore", 200, headers=gzip_body, data=snapshot)
    call("POST", "/_test/restore", 400, headers=gzip_body, data=snapshot[:-10])
    call("POST", "/_test/restore", 413, headers=gzip_body, data=b"",
         environ_overrides={"CONTENT_LENGTH": str(MAX_SNAPSHOT_BYTES + 1)})
    assert len(seen) == 38


def test_the_events_of_a_stream_match_their_description(client, document, auth):
    """Each message of GET /events (a reset, then events) is the object the document describes; read as a client
    does, a few messages and then hang up."""
    from jsonschema import Draft202012Validator
    from service.client.events import lines_of, messages

    for number in range(2):
        client.post("/graph/v2", headers=auth, json={"query": 'mutation { stationCreate(input: {station: {id: '
                                                              f'"st_oa", name: "Press {number}"}}}}) }}'})
    event_schema = document["paths"]["/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    response = client.get("/events", headers={**auth, "Last-Event-ID": "100"}, buffered=False)
    found = []
    for message in messages(lines_of(response.response)):
        found.append({key: value for key, value in message.items()})
        if len(found) == 3:
            break
    response.close()
    assert [message.get("event") for message in found] == ["message", "reset", "station.created"]
    validator = Draft202012Validator(event_schema)
    for message in found:
        assert not list(validator.iter_errors(message)), message
