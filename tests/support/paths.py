"""Where things are, for tests in any folder: the checkout, the tests, and their fixtures' data."""
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPOSITORY = TESTS.parent
DATA = TESTS / "data"
JS = TESTS / "js"
