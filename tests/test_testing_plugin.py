"""The pytest plugin (entry point pytest11), exercised the way an integrator's suite would use it."""
pytest_plugins = ["pytester"]

INTEGRATOR_TESTS = '''
import pytest
import requests

PNG = b"\\x89PNG\\r\\n\\x1a\\n" + b"\\0" * 32


def test_server_answers(wis_server, wis_token):
    assert wis_server.token == wis_token
    assert requests.get(wis_server.url + "/healthz", timeout=5).json() == {"status": "ok"}


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_starts_clean(wis_session, run):
    assert wis_session.get("/_test/objects").json() == {"orgs": {}}
    response = wis_session.post("/uploads", files={"file": ("a.png", PNG)}, data={"destinationId": "stepImage"})
    assert response.status_code == 201
    assert len(wis_session.get("/_test/objects").json()["orgs"]["default"]["media"]) == 1


def test_client_is_ready(wis_client, wis_session):
    assert wis_client.create_station({"id": "station_1", "name": "Press"}) == "CREATED"
    assert wis_session.get("/_test/objects").json()["orgs"]["default"]["documents"] == {"stations": ["station_1"]}


def test_faults(wis_fault, wis_session):
    wis_fault(path="^/healthz$", status=503)
    assert wis_session.get("/healthz").status_code == 503
    assert wis_session.get("/healthz").status_code == 200


def test_one_server_per_session(wis_server, request):
    assert request.getfixturevalue("wis_server") is wis_server
'''


def test_integrator_suite_using_the_fixtures_passes(pytester):
    pytester.makepyfile(test_integration=INTEGRATOR_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)


def test_fixtures_are_listed_for_discovery(pytester):
    result = pytester.runpytest_subprocess("--fixtures")
    result.stdout.fnmatch_lines(["*fixtures defined from service.pytest_plugin*", "wis_token*", "wis_server*",
                                 "wis_clean*", "wis_session*", "wis_client*", "wis_fault*"])
