"""examples/importer: an integrator's project whose tests use only the fixtures of the installed package (its
pytest11 plugin) passes as written, run the way its owner would run it."""

from support.paths import REPOSITORY

PROJECT = REPOSITORY / "examples" / "importer"


def test_the_example_importer_project_passes_with_only_the_installed_plugin(run_project):
    # Nothing of this repository's test setup leaks in: its own directory, its own pyproject.toml, no conftest.
    result = run_project(PROJECT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout
    assert not list(PROJECT.rglob("conftest.py"))
