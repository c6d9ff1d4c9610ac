"""The pytest plugin (entry point pytest11), exercised the way an integrator's suite would use it."""
import re

from support.projects import WITHOUT_FOREIGN_PLUGINS

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


def test_journal(wis_client, wis_journal):
    wis_client.create_station({"id": "station_1", "name": "Press"})
    wis_journal.assert_called("stationCreate", ids=["station_1"], times=1)
    wis_journal.assert_not_called("processCreate")
    assert wis_journal.operations() == ["stationCreate"]


def test_rate_and_reset_faults(wis_fault, wis_session):
    wis_fault(path="^/healthz$", status=503, rate=1, times=2)
    assert [wis_session.get("/healthz").status_code for _ in range(3)] == [503, 503, 200]
    wis_fault(path="^/healthz$", reset=True)
    with pytest.raises(requests.ConnectionError):
        wis_session.get("/healthz")


def test_webhooks(wis_server, wis_client, wis_webhook_receiver):
    wis_client.webhook_subscribe("mes", wis_webhook_receiver.url, secret=wis_webhook_receiver.secret)
    wis_webhook_receiver.fail(status=500)
    wis_client.create_station({"id": "station_1", "name": "Press"})
    wis_webhook_receiver.wait_for(1, answered=False)
    wis_server.deliver_due()
    [delivery] = wis_webhook_receiver.wait_for(1)
    assert delivery.verified and delivery.id == "evt_default_1"
    assert delivery.json["data"]["id"] == "station_1"
    assert [entry.status for entry in wis_webhook_receiver.deliveries] == [500, 204]
'''

SEEDED_TESTS = '''
PNG = b"\\x89PNG\\r\\n\\x1a\\n" + b"\\0" * 32


def names(session):
    image = session.post("/uploads", files={"file": ("a.png", PNG)}, data={"destinationId": "stepImage"}).json()
    stream = session.post("/uploads", json={"destinationId": "stepVideo", "fileName": "c.mp4", "fileSize": 10,
                                            "sha": "0" * 64}).json()
    return image["path"], stream["streamId"]


def test_first(wis_session, wis_seed):
    print("NAMES", wis_seed, *names(wis_session))


def test_second(wis_session, wis_seed):
    print("NAMES", wis_seed, *names(wis_session))
'''

FAILING_TESTS = '''
def test_created_once(wis_client, wis_journal):
    for _ in range(2):
        wis_client.create_process({"id": "weld_1", "name": "Weld"})
    wis_journal.assert_called("processCreate", ids=["weld_1"], times=1)
'''


def test_integrator_suite_using_the_fixtures_passes(pytester):
    pytester.makepyfile(test_integration=INTEGRATOR_TESTS)
    result = pytester.runpytest_subprocess(*WITHOUT_FOREIGN_PLUGINS, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=9)


def test_fixtures_are_listed_for_discovery(pytester):
    result = pytester.runpytest_subprocess(*WITHOUT_FOREIGN_PLUGINS, "--fixtures")
    # pytest lists a plugin's fixtures sorted by their location as text (line 102 before line 41): any order here.
    listing = result.stdout.str().partition("fixtures defined from service.testing.pytest_plugin")[2]
    listed = re.findall(r"^(wis_\w+)", listing, re.M)
    assert sorted(listed) == sorted(["wis_token", "wis_server", "wis_seed", "wis_clean", "wis_session", "wis_client",
                                     "wis_journal", "wis_events", "wis_fault", "wis_snapshot",
                                     "wis_webhook_receiver"])


def seeded_names(pytester, *args):
    """{test name: the names it printed} of one run of SEEDED_TESTS."""
    result = pytester.runpytest_subprocess(*WITHOUT_FOREIGN_PLUGINS, "-p", "no:cacheprovider", "-s", *args)
    result.assert_outcomes(passed=2)
    return [list(names) for names in re.findall(r"NAMES (\S+) (\S+) (\S+)", result.stdout.str())]


def test_with_a_seed_every_run_and_every_test_gets_the_same_names(pytester):
    pytester.makepyfile(test_seeded=SEEDED_TESTS)
    first = seeded_names(pytester, "--wis-seed=5")
    assert len(first) == 2 and first[0] == first[1]  # each test starts from the reset count
    assert first[0][0] == "5"
    assert seeded_names(pytester, "--wis-seed=5") == first
    pytester.makeini("[pytest]\nwis_seed = 5\n")
    assert seeded_names(pytester) == first
    unseeded = seeded_names(pytester, "-o", "wis_seed=")
    assert unseeded[0][0] == "None" and unseeded[0] != unseeded[1]


def test_a_failed_journal_assertion_says_what_was_seen(pytester):
    pytester.makepyfile(test_failing=FAILING_TESTS)
    result = pytester.runpytest_subprocess(*WITHOUT_FOREIGN_PLUGINS, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: expected processCreate of `weld_1` once, saw it twice:",
        "*#? POST /graph/v2 -> 200 processCreate [[]weld_1[]]",
        "*#? POST /graph/v2 -> 200 processCreate [[]weld_1[]]",
    ])
    # The helper's own frame is hidden: the failure points at the test's line.
    assert "def assert_called" not in result.stdout.str()
