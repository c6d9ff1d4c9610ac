import os
import time

from service.domain.uploads import sweep_expired_streams
from service.storage import Repository


def test_sweep_removes_stale_document_temporaries_and_keeps_fresh_ones(tmp_path):
    """A worker killed mid-write leaves a `.tmp-*.part` beside the documents; the sweep removes it once stale."""
    repo = Repository(tmp_path / "data")
    repo.documents.upsert("default", "processes", "proc_1", {"id": "proc_1", "name": "Kept"})
    directory = repo.orgs_root / "default" / "processes"
    stale, fresh = directory / ".tmp-dead.part", directory / ".tmp-busy.part"
    stale.write_bytes(b'{"id": "proc_1", "na')
    fresh.write_bytes(b'{"id": "proc_2"')
    old = time.time() - 25 * 3600
    os.utime(stale, (old, old))

    sweep_expired_streams(repo, ttl_seconds=24 * 3600)

    assert not stale.exists() and fresh.exists()
    assert repo.documents.ids("default", "processes") == ["proc_1"]
    assert repo.documents.get("default", "processes", "proc_1")["name"] == "Kept"
