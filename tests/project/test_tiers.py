"""The test tiers (support/tiers.py): a test is marked by what it starts, from the fixtures it uses and the backend it
runs on, and a fast-tier test that starts a server, a browser, Node or an engine fails naming what it started."""
import re
import sys
from pathlib import Path

from support.projects import WITHOUT_FOREIGN_PLUGINS
from support.tiers import tier_of_command
from support.paths import TESTS


CONFTEST = f"""
import sys

import pytest

sys.path.insert(0, {str(TESTS)!r})
pytest_plugins = ["support.tiers"]


@pytest.fixture
def start_gunicorn():
    return "a stand-in: the tier comes from the fixture's name"


@pytest.fixture(params=["file", "shared"])
def backend(request):
    return request.param


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    for item in items:
        print("tiers of", item.name, sorted(mark.name for mark in item.iter_markers()))
"""

TESTS_OF_EACH_TIER = f"""
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def module_server():
    # What a module fixture starts counts for the test that first asks for it.
    subprocess.run([sys.executable, "-m", "gunicorn", "--version"], capture_output=True)


def test_fast_and_starting_nothing():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_fast_but_starting_gunicorn():
    subprocess.run([sys.executable, "-m", "gunicorn", "--version"], capture_output=True)


def test_fast_but_its_module_fixture_starts_gunicorn(module_server):
    pass


def test_fast_but_running_wis_serve():
    subprocess.run([{str(Path(sys.executable).with_name("wis"))!r}, "serve", "--workers", "many"],
                   capture_output=True)


def test_server_tier(start_gunicorn):
    subprocess.run([sys.executable, "-m", "gunicorn", "--version"], capture_output=True)


def test_on_each_backend(backend):
    pass
"""


EXHAUSTIVE = """
import pytest

pytestmark = pytest.mark.exhaustive


def test_many_cases():
    pass
"""


def run_tiers(pytester, *args):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_tiers_example=TESTS_OF_EACH_TIER, test_exhaustive_example=EXHAUSTIVE)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.runpytest_subprocess(*WITHOUT_FOREIGN_PLUGINS, *args)


def test_markers_come_from_the_fixtures_and_a_fast_test_that_starts_a_server_fails_naming_it(pytester):
    result = run_tiers(pytester, "-q", "-s")
    tiers = dict(re.findall(r"^tiers of (\S+) (\[.*\])$", "\n".join(result.outlines), re.M))
    assert tiers == {
        "test_fast_and_starting_nothing": "['fast']", "test_fast_but_starting_gunicorn": "['fast']",
        "test_fast_but_its_module_fixture_starts_gunicorn": "['fast']", "test_fast_but_running_wis_serve": "['fast']",
        "test_server_tier": "['server']", "test_on_each_backend[file]": "['fast']",
        "test_on_each_backend[shared]": "['engines']", "test_many_cases": "['exhaustive']"}
    # Eight tests pass their call (one runs on each backend); three fail at teardown, for what they started.
    result.assert_outcomes(passed=8, errors=3)
    errors = "\n".join(result.outlines)
    for name in ("test_fast_but_starting_gunicorn", "test_fast_but_its_module_fixture_starts_gunicorn",
                 "test_fast_but_running_wis_serve"):
        assert f"ERROR test_tiers_example.py::{name}" in errors
    assert "is a fast-tier test but started server:" in errors


def test_commands_are_told_apart_by_the_program_they_run():
    assert tier_of_command([sys.executable, "-m", "gunicorn", "service:create_app()"]) == "server"
    assert tier_of_command(["/venv/bin/wis", "serve", "--bind", "127.0.0.1:1"]) == "server"
    assert tier_of_command(["runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/postgres", "-D", "x"]) \
        == "engines"
    assert tier_of_command(["/venv/bin/weed", "mini"]) == "engines"
    assert tier_of_command(["/usr/bin/chromium", "--headless"]) == "browser"
    assert tier_of_command(["/usr/bin/node", "tus_upload.mjs"]) == "node"
    assert tier_of_command([sys.executable, "-m", "pytest", "-q"]) == "projects"
    assert tier_of_command([sys.executable, "-mpytest", "-p", "no:cacheprovider"]) == "projects"  # pytester's way
    # A Python script that merely mentions gunicorn, and the other `wis` commands, are for any tier.
    assert tier_of_command([sys.executable, "-c", "import service.gunicorn_config"]) is None
    assert tier_of_command(["/venv/bin/wis", "gc", "--data-dir", "data"]) is None
