"""examples/importer: an integrator's project whose tests use only the fixtures of the installed package (its
pytest11 plugin) passes as written, run the way its owner would run it."""
import os
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1] / "examples" / "importer"


def test_the_example_importer_project_passes_with_only_the_installed_plugin():
    # Nothing of this repository's test setup leaks in: its own directory, its own pyproject.toml, no conftest.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "WIS_"))}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=PROJECT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout
    assert not list(PROJECT.rglob("conftest.py"))
