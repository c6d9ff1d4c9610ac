"""The snapshot examples of docs/test-double.md work as written, in a project of its own that has only the
installed package (its pytest11 plugin): the script makes the snapshot, the tests start from it."""
import re
import subprocess
import sys

from support.projects import WITHOUT_FOREIGN_PLUGINS
from support.paths import REPOSITORY

pytest_plugins = ["pytester"]

DOCUMENT = REPOSITORY / "docs" / "test-double.md"


def example(name):
    found = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)\n```", DOCUMENT.read_text(), re.S)
    assert found, f"{DOCUMENT} has no example marked {name!r}"
    return found.group(1)


def test_the_documented_snapshot_examples_pass_as_written(pytester):
    script = pytester.path / "make_line.py"
    script.write_text(example("making a snapshot"))
    subprocess.run([sys.executable, str(script)], cwd=pytester.path, check=True, timeout=300)
    assert (pytester.path / "line.tar.gz").stat().st_size > 0

    tests = example("snapshot fixtures")
    pytester.makepyfile(test_example=tests)
    result = pytester.runpytest_subprocess(*WITHOUT_FOREIGN_PLUGINS, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(re.findall(r"^def (test_\w+)", tests, re.M)))


def test_a_test_that_asks_for_wis_snapshot_without_the_marker_is_told_what_it_lacks(pytester):
    pytester.makepyfile(test_example="def test_it(wis_snapshot):\n    pass\n")
    result = pytester.runpytest_subprocess(*WITHOUT_FOREIGN_PLUGINS, "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(['*the wis_snapshot fixture needs a snapshot to start from: '
                                 '@pytest.mark.wis_snapshot("<archive>.tar.gz")*'])
