"""The tree says the architecture (docs/architecture.md), and this holds it to that: which room each module is in, what
a room may import, that only the HTTP rooms speak a web framework, and the size of modules and functions.

Every import counts, wherever its statement stands (top level or inside a function), read from the source with ast.
"""
import ast
from pathlib import Path

import pytest

import service

SERVICE = Path(service.__file__).parent
WEB_FRAMEWORKS = ("flask", "werkzeug", "ariadne", "marshmallow")

# The top of the package: the entry points and the foundations, nothing else.
TOP_LEVEL = {"__init__.py", "cli", "config.py", "errors", "gunicorn_config.py"}
PACKAGES = {"client", "delivery", "domain", "interface", "server", "storage", "testing", "web"}

# room -> the rooms its modules may import (a room always imports itself). The longest room a module's name starts
# with is its room. "*" is any module of the service.
ANY = "*"
MAY_IMPORT = {
    "service": {ANY},  # the app factory: it assembles every room (and the test double's API in test mode)
    "service.cli": {ANY},  # an entry point
    "service.gunicorn_config": {ANY},  # an entry point
    "service.config": {"service.interface", "service.errors"},
    "service.errors": {"service.interface"},
    "service.interface": set(),
    "service.client": {"service.interface"},
    "service.domain": {"service.interface", "service.errors", "service.storage.contract"},
    # The contract names the test-mode stores' classes, which both backends share.
    "service.storage.contract": {"service.interface", "service.errors", "service.storage.testmode"},
    "service.storage.common": {"service.interface", "service.errors"},
    "service.storage.testmode": {"service.interface", "service.errors", "service.storage.common"},
    "service.storage.files": {"service.interface", "service.errors", "service.storage.contract",
                              "service.storage.common", "service.storage.testmode"},
    "service.storage.shared": {"service.interface", "service.errors", "service.config", "service.storage.contract",
                               "service.storage.common", "service.storage.testmode"},
    # The registry (service.storage itself) opens a backend; `wis migrate` is handed one of each.
    "service.storage": {"service.config", "service.errors", "service.interface", "service.storage.contract",
                        "service.storage.common", "service.storage.files", "service.storage.shared"},
    "service.server": {"service.config", "service.errors", "service.interface"},
    # Work a worker process does for others in the background: webhook deliveries. Handed the repository and what
    # only the web can do (a fragment's body, the metrics); it speaks HTTP as a client (urllib3), no web framework.
    "service.delivery": {"service.domain", "service.storage.contract", "service.interface", "service.errors",
                         "service.config"},
    "service.web": {"service.domain", "service.storage", "service.storage.contract", "service.interface",
                    "service.errors", "service.config", "service.delivery",
                    # The embedded default token is made in the data directory before any repository is opened
                    # (the gunicorn master announces it once): a file of the data directory, not a store.
                    "service.storage.common.data_dir_secrets"},
    "service.testing": {ANY},  # the test double drives the whole service; nothing else imports it
}
# Rooms whose names are a prefix of another room's: importing `service.storage` means the registry only.
EXACT = {"service", "service.storage"}


def module_name(path):
    parts = path.relative_to(SERVICE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_of(module):
    """The room of a module of the service (by the longest room name it starts with), else None."""
    candidates = [room for room in MAY_IMPORT if module == room or module.startswith(room + ".")]
    return max(candidates, key=len) if candidates else None


def imported_modules(path):
    """Every module a Python file imports, wherever the import statement stands (top level or inside a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import of {node.module}"
            # `from service.storage import files` imports the package service.storage.files;
            # `from service.storage import get_repository` imports a name of service.storage.
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if is_module(submodule) else node.module)
    return found


def is_module(name):
    path = SERVICE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def allowed(source_room, target):
    if source_room is None or ANY in MAY_IMPORT[source_room]:
        return True
    target_room = room_of(target)
    if target_room is None or target_room == source_room or target_room.startswith(source_room + "."):
        return True
    for permitted in MAY_IMPORT[source_room] | {source_room}:
        if target == permitted or target.startswith(permitted + ".") and permitted not in EXACT:
            return True
    return False


SOURCES = sorted(SERVICE.rglob("*.py"))


def test_the_top_of_the_package_holds_the_entry_points_and_foundations_only():
    top = {path.name for path in SERVICE.iterdir() if path.suffix == ".py" or
           (path.is_dir() and (path / "__init__.py").exists())}
    assert top == TOP_LEVEL | PACKAGES
    assert len(TOP_LEVEL) <= 8


def test_every_module_is_in_a_room():
    assert [module_name(path) for path in SOURCES if room_of(module_name(path)) is None] == []


def test_each_room_imports_only_what_it_may():
    offending = sorted(f"{module_name(path)} imports {module}" for path in SOURCES
                       for module in imported_modules(path)
                       if module.startswith("service") and not allowed(room_of(module_name(path)), module))
    assert offending == []


def test_nothing_but_the_app_factory_imports_the_test_double():
    importers = sorted(module_name(path) for path in SOURCES if not module_name(path).startswith("service.testing")
                       and any(module == "service.testing" or module.startswith("service.testing.")
                               for module in imported_modules(path)))
    assert importers == ["service"]


def test_only_the_http_rooms_speak_a_web_framework():
    speaking = sorted(module_name(path) for path in SOURCES
                      if any(module.split(".")[0] in WEB_FRAMEWORKS for module in imported_modules(path)))
    assert [module for module in speaking
            if room_of(module) not in ("service", "service.web", "service.testing")] == []
    assert "service.web.graphql" in speaking and "service.testing.api" in speaking


def test_the_walk_sees_imports_inside_functions():
    """The shared backend is imported lazily inside open_repository: the walk must see imports there too."""
    assert "service.storage.shared" in imported_modules(SERVICE / "storage" / "__init__.py")


@pytest.mark.parametrize("source, target, expected", [
    ("service.domain.processes", "service.storage.contract", True),
    ("service.domain.processes", "service.storage.files", False),
    ("service.domain.processes", "service.web.graphql", False),
    ("service.client.api", "service.interface.archive", True),
    ("service.client.api", "service.domain.media_gc", False),
    ("service.storage.files.media", "service.storage.shared", False),
    ("service.storage.files.media", "service.storage.common.disk", True),
    ("service.web.graphql", "service.storage", True),
    ("service.web.graphql", "service.storage.files", False),
    ("service.web.pages.views", "service.testing", False),
])
def test_the_rule_itself(source, target, expected):
    """The checker says no where the architecture says no (a checker that allows everything would pass the rest)."""
    assert allowed(room_of(source), target) is expected


# -- sizes ---------------------------------------------------------------------------------------------------------

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_no_module_is_over_400_lines():
    assert {module_name(path): lines for path in SOURCES
            if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES} == {}


def test_no_function_is_over_60_lines():
    long = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{module_name(path)}.{node.name}"] = lines
    assert long == {}
