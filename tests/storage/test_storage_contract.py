"""The storage contract as code: both backends offer every method of the Protocols in service/storage/contract.py
with the same parameters, and the layers above call nothing else. What each room of the storage layer may import
(never the other backend, no web framework) is tests/project/test_architecture.py's."""
import ast
import inspect
from pathlib import Path

import pytest

import service
from service.storage import contract
from service.storage.contract import StreamRecord, StreamState
from service.storage.files import FileRepository
from service.storage.shared import SharedRepository

SERVICE = Path(service.__file__).parent


# -- the stream record ---------------------------------------------------------------------------------------------

# Metas as earlier versions stored them (meta.json, and the `meta` column of the shared backend): a chunk stream's had
# no protocol and no uploadMetadata.
CHUNK_META = {"destinationId": "stepVideo", "fileName": "clip.mp4", "fileSize": 3000, "sha": "ab" * 32,
              "totalChunks": 3, "format": "mp4", "mediaPrefix": "0123456789abcdef", "state": "open", "path": None}
TUS_META = {"protocol": "tus", "destinationId": "stepImage", "fileName": "upload", "fileSize": 10, "sha": None,
            "uploadMetadata": "destinationId c3RlcEltYWdl", "totalChunks": None, "format": None,
            "mediaPrefix": "fedcba9876543210", "state": "complete", "path": "/api/v1/images/fedcba9876543210-upload.png"}


def test_a_stored_meta_of_earlier_versions_reads_as_a_typed_record():
    chunks, tus = StreamRecord.from_json(CHUNK_META), StreamRecord.from_json(TUS_META)
    assert (chunks.protocol, chunks.is_tus, chunks.state, chunks.total_chunks) == ("chunks", False, StreamState.OPEN, 3)
    assert (tus.is_tus, tus.is_complete, tus.upload_metadata, tus.sha) == (True, True, "destinationId c3RlcEltYWdl", None)


def test_a_record_is_stored_with_the_field_names_earlier_versions_read():
    for meta in (CHUNK_META, TUS_META):
        stored = StreamRecord.from_json(meta).to_json()
        assert {key: stored[key] for key in meta} == meta
        assert StreamRecord.from_json(stored) == StreamRecord.from_json(meta)


# -- both backends against the Protocols -----------------------------------------------------------------------------

STORES = {"documents": contract.DocumentStore, "media": contract.MediaStore, "streams": contract.StreamStore,
          "events": contract.EventStore, "webhooks": contract.WebhookStore, "tokens": contract.TokenStore}


@pytest.fixture(params=["files", "shared"])
def repository(request, tmp_path):
    """A repository of each backend; the shared one connects to nothing until used, so none is needed here."""
    if request.param == "files":
        return FileRepository(tmp_path / "data")
    return SharedRepository(tmp_path / "node", "postgresql://127.0.0.1:1/unused", "unused-bucket")


def protocol_methods(protocol):
    """The methods a Protocol names, its own and those of the Protocols it extends (DocumentStore: DocumentView's)."""
    return {name: member for base in reversed(protocol.__mro__) if of_the_contract(base)
            for name, member in vars(base).items() if callable(member) and not name.startswith("_")}


def of_the_contract(base):
    return base.__module__.startswith(contract.__name__ + ".")


def protocol_attributes(protocol):
    """The attributes a Protocol names (the stores of a Repository, its counters), its own and its bases'."""
    return {name for base in protocol.__mro__ if of_the_contract(base) for name in vars(base).get("__annotations__", {})}


def test_each_backend_is_a_repository_of_the_contract(repository):
    assert isinstance(repository, contract.Repository)
    for name, protocol in STORES.items():
        assert isinstance(getattr(repository, name), protocol), name


@pytest.mark.parametrize("protocol", [contract.Repository, *STORES.values()], ids=lambda protocol: protocol.__name__)
def test_each_method_of_the_contract_takes_the_same_parameters_on_both_backends(repository, protocol):
    implementation = repository
    for name, store_protocol in STORES.items():
        if protocol is store_protocol:
            implementation = getattr(repository, name)
    for name, member in protocol_methods(protocol).items():
        expected = list(inspect.signature(member).parameters)[1:]  # without self
        assert list(inspect.signature(getattr(implementation, name)).parameters) == expected, name


def calls_on_the_repository(path):
    """(store or None, name) of every `repo.<name>` and `repo.<store>.<name>` in a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "repo":
            found.add((None, node.attr))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and \
                isinstance(node.value.value, ast.Name) and node.value.value.id == "repo":
            found.add((node.value.attr, node.attr))
    return found


def test_the_layers_above_storage_call_only_what_the_contract_names():
    """The domain, the views and the resolvers (every module above service.storage but the command line, which
    opens a backend of its own for `wis migrate` and `wis db upgrade`)."""
    modules = [path for path in SERVICE.rglob("*.py")
               if not {"storage", "cli"} & set(path.relative_to(SERVICE).parts)]
    offending = set()
    for path in modules:
        for store, name in calls_on_the_repository(path):
            protocol = contract.Repository if store is None else STORES[store]
            attributes = protocol_attributes(contract.Repository) if store is None else set()
            if name in attributes or name in protocol_methods(protocol):
                continue
            offending.add(f"{path.relative_to(SERVICE)}: repo.{store + '.' if store else ''}{name}")
    assert offending == set()
    assert ("streams", "add_chunk") in calls_on_the_repository(SERVICE / "domain" / "uploads.py")


def audience_members(protocol):
    return set(protocol_methods(protocol)) | protocol_attributes(protocol)


def repository_uses(path):
    """Names used on a repository in a module: `repo.<name>` and `get_repository(...).<name>`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Attribute):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id == "repo" or \
                isinstance(value, ast.Call) and getattr(value.func, "id", None) == "get_repository":
            found.add(node.attr)
    return found


def test_the_repository_is_split_by_audience_and_each_part_has_its_callers():
    """The stores for the domain, views and resolvers; the operations for the server's upkeep (the sweep, readiness,
    metrics, the session key, the command line); the test-mode state for the test double only."""
    stores, operations, test_mode = (audience_members(protocol) for protocol in
                                     (contract.Stores, contract.Operations, contract.TestModeState))
    assert not stores & operations and not stores & test_mode and not operations & test_mode
    assert stores | operations | test_mode == audience_members(contract.Repository)
    callers = {}
    for path in SERVICE.rglob("*.py"):
        if "storage" in path.relative_to(SERVICE).parts:
            continue
        for name in repository_uses(path):
            audience = "stores" if name in stores else "operations" if name in operations else \
                "test mode" if name in test_mode else "elsewhere"
            callers.setdefault(audience, set()).add(str(path.relative_to(SERVICE)))
    assert all(path.startswith("testing/") for path in callers["test mode"]), callers["test mode"]
    assert callers["operations"] <= {"cli/operations.py", "web/health.py", "web/observability.py",
                                     "web/sessions.py"}, callers["operations"]
    assert "domain/uploads.py" in callers["stores"]
