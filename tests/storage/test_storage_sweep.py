import os
import time

from service.storage.files import FileRepository


def test_sweep_removes_stale_document_temporaries_and_keeps_fresh_ones(tmp_path):
    """A worker killed mid-write leaves a `.tmp-*.part` beside the documents; the sweep removes it once stale."""
    repo = FileRepository(tmp_path / "data", stream_ttl_seconds=24 * 3600)
    repo.documents.save("default", "processes", "proc_1", {"id": "proc_1", "name": "Kept"})
    directory = repo.orgs_root / "default" / "processes"
    stale, fresh = directory / ".tmp-dead.part", directory / ".tmp-busy.part"
    stale.write_bytes(b'{"id": "proc_1", "na')
    fresh.write_bytes(b'{"id": "proc_2"')
    old = time.time() - 25 * 3600
    os.utime(stale, (old, old))

    repo.sweep()

    assert not stale.exists() and fresh.exists()
    assert repo.documents.ids("default", "processes") == ["proc_1"]
    assert repo.documents.get("default", "processes", "proc_1")["name"] == "Kept"


def test_the_sweep_is_due_once_at_start_then_once_per_interval_for_all_threads(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from service.storage import SWEEP_INTERVAL_SECONDS

    now = [1000.0]
    repo = FileRepository(tmp_path / "data", clock=lambda: now[0])
    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(lambda _: repo.sweep_due(), range(64))) == 1
    now[0] += SWEEP_INTERVAL_SECONDS - 1
    assert not repo.sweep_due()
    now[0] += 1
    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(lambda _: repo.sweep_due(), range(64))) == 1
