"""Schema-driven fuzzing of the upload, media and GraphQL endpoints from the service's own /openapi.json (schemathesis).

Every operation of the document is called on the WSGI app with generated requests, valid ones and
invalid ones, both against ids nobody has and against a real stream or a real media file: no answer
is a 500, and every answer matches the description (status code, content type, body schema, headers).
"""
import io
import json
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.stateful import run_state_machine_as_test
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

import service
from service import create_app
from service.storage import get_repository
from support.tokens import HEADERS, TOKENS

DOCUMENT = json.loads((Path(service.__file__).parent / "openapi.json").read_text())
# Both GraphQL paths are one path item, referred to by `$ref`.
PATH_ITEMS = {path: DOCUMENT["components"]["pathItems"][item["$ref"].rsplit("/", 1)[1]] if "$ref" in item else item
              for path, item in DOCUMENT["paths"].items()}
# The test-mode endpoints are test tooling, absent (404) from the app fuzzed here; every other operation is fuzzed.
OPERATIONS = [(method.upper(), path) for path, item in PATH_ITEMS.items() for method in item
              if method != "parameters" and "test mode" not in item[method].get("tags", ())]
# Operations on a stream or a media file run twice: on an id nobody has, and on one the org really has.
TARGETS = [(method, path, target) for method, path in OPERATIONS
           for target in (("unknown", "existing") if "{" in path else ("unknown",))]


def _can_be_invalid(parameter, target):
    """Whether an invalid request can get this parameter wrong: a path parameter unless the test fixes it (the existing
    target), and any other but an optional header taking any string (such as Range: no value of it is invalid)."""
    if "$ref" in parameter:
        parameter = DOCUMENT["components"]["parameters"][parameter["$ref"].rsplit("/", 1)[1]]
    if parameter["in"] == "path":
        return target != "existing"
    return not (parameter["in"] == "header" and not parameter.get("required", False)
                and parameter.get("schema", {}) == {"type": "string"})


def _has_inputs(method, path, target):
    """Whether an operation takes anything an invalid request could get wrong (tus OPTIONS takes nothing; a media
    GET on an existing name only its token, and two ways to authenticate leave schemathesis none to break)."""
    item = PATH_ITEMS[path]
    parameters = [*item.get("parameters", ()), *item[method.lower()].get("parameters", ())]
    # With one way to authenticate, a request without it is invalid; with two (media: the token or the session
    # cookie), leaving out either is valid.
    one_way_in = len(item[method.lower()].get("security", DOCUMENT.get("security", ()))) == 1
    return (any(_can_be_invalid(parameter, target) for parameter in parameters)
            or bool(item[method.lower()].get("requestBody")) or one_way_in)


# A request for an event stream that the server takes is a stream that lasts until its client hangs up, which a call
# of the fuzzer never does (each took until its first keepalive, 12 s): a valid one, and an invalid one whose only
# fault is a parameter the server ignores (an unknown one). Its refusals are tested where a client reads part of a
# stream (tests/web/events: a bad Last-Event-ID, after or types is a 400 naming it) and its events against their
# description (tests/web/test_openapi.py).
ENDLESS = {("GET", "/events")}
# Valid requests for every operation; invalid ones for every operation that takes an input.
CASES = [(method, path, target, mode) for method, path, target in TARGETS if (method, path) not in ENDLESS
         for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
         if mode == GenerationMode.POSITIVE or _has_inputs(method, path, target)]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
MP4 = b"\0\0\0\x18ftypmp42" + bytes(range(256))
# Schema-valid requests may still be refused for what JSON Schema cannot say (400: the file's sniffed
# format, a checksum of its bytes, totalChunks fitting fileSize; 416: a Range past the end of the file),
# so that one check is left out; schemathesis' other checks, not_a_server_error first, all run.
EXCLUDED_CHECKS = [positive_data_acceptance]
# 25 cases per operation and mode, 15 stateful runs (40 and 25 before 2026-11-25): what the suite's 10 minutes on 2
# cores leave room for (docs/development.md). Derandomized: every run tries the same cases.
FUZZ_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                         suppress_health_check=list(HealthCheck))
# An invalid request must be refused. tus refuses with statuses of its own beside schemathesis' usual ones: 412 (no
# Tus-Resumable: 1.0.0), 413 (an Upload-Length or body over the limit), 423 (another PATCH is being received) and
# 460 (a body that does not match its Upload-Checksum).
SCHEMATHESIS_REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429", "5xx"]
CONFIG = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": [
    *SCHEMATHESIS_REFUSALS, "412", "413", "423", "460"]}}})


# Schemathesis calls the app through werkzeug's test client and never closes the answer, so the file a media answer
# streams from is closed by the garbage collector (a ResourceWarning). Only that one is let through here.
pytestmark = [pytest.mark.exhaustive, pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <_io\.FileIO name='[^']*/media/(images|videos)/:pytest.PytestUnraisableExceptionWarning")]


@pytest.fixture(scope="module")
def app(tmp_path_factory, backend):
    application = create_app({"DATA_DIR": str(tmp_path_factory.mktemp("fuzz-data")), "API_TOKENS": TOKENS,
                              "TESTING": True, **backend.settings()})
    yield application
    get_repository(application).close()


@pytest.fixture(scope="module")
def schema(app):
    return schemathesis.openapi.from_wsgi("/openapi.json", app, config=CONFIG)


def existing_target(app, path):
    """Path parameters naming something the org really has: a fresh open stream, or an uploaded file."""
    client = app.test_client()
    if "{streamId}" in path:
        response = client.post("/uploads", json={"destinationId": "stepVideo", "fileName": "clip.mp4",
                                                 "fileSize": 3 * len(MP4), "sha": "0" * 64}, headers=HEADERS)
        return {"streamId": response.get_json()["streamId"]}
    destination, data = ("stepImage", PNG) if "/images/" in path else ("stepVideo", MP4)
    response = client.post("/uploads", data={"destinationId": destination, "file": (io.BytesIO(data), "f.bin")},
                           headers=HEADERS)
    return {"name": response.get_json()["path"].rsplit("/", 1)[1]}


@pytest.mark.parametrize("method, path, target, mode", CASES, ids=[
    f"{m} {p} {t}-{'valid' if mode == GenerationMode.POSITIVE else 'invalid'}" for m, p, t, mode in CASES])
def test_no_server_error_and_answers_match_the_description(app, schema, method, path, target, mode):
    fixed = existing_target(app, path) if target == "existing" else None
    strategy = schema[path][method].as_strategy(mode, path_parameters=fixed)

    @FUZZ_SETTINGS
    @given(case=strategy)
    def fuzz(case):
        # Invalid cases may replace the token too: those must be a described 401.
        case.call_and_validate(headers=HEADERS, excluded_checks=EXCLUDED_CHECKS)

    fuzz()


def test_sequences_following_the_documented_links_conform(schema):
    """Stateful: create a stream, then send chunks to it, read it, delete it, in generated orders."""
    machine = schema.as_state_machine()

    class WithToken(machine):
        def get_call_kwargs(self, case):
            return {"headers": HEADERS}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, additional_checks=additional_checks, excluded_checks=EXCLUDED_CHECKS,
                                   headers=HEADERS, transport_kwargs=kwargs or None)

    run_state_machine_as_test(WithToken, settings=settings(FUZZ_SETTINGS, max_examples=15, stateful_step_count=6))
