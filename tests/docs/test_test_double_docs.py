"""The pytest example of docs/test-double.md passes as written, in a project of its own that has only the
installed package (its pytest11 plugin)."""
import re

from support.projects import WITHOUT_FOREIGN_PLUGINS
from support.paths import REPOSITORY

pytest_plugins = ["pytester"]

DOCUMENT = REPOSITORY / "docs" / "test-double.md"


def test_the_documented_pytest_example_passes_as_written(pytester):
    example = re.search(r"<!-- example: pytest fixtures -->\n```python\n(.*?)\n```", DOCUMENT.read_text(), re.S)
    assert example, f"{DOCUMENT} has no marked pytest example"
    tests = re.findall(r"^def (test_\w+)", example.group(1), re.M)
    assert len(tests) >= 5
    pytester.makepyfile(test_example=example.group(1))
    result = pytester.runpytest_subprocess(*WITHOUT_FOREIGN_PLUGINS, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(tests))
