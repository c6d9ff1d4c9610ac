"""The file backend's history keeps the newest HISTORY_REVISIONS entries of each object: each write removes the entry
that leaves them, and the entries an earlier setting or an interrupted write left behind go with the next write."""
from service.domain.stations import upsert_station
from service.interface.kinds import STATIONS
from service.storage.files import FileRepository

ORG = "default"


def save_names(repo, names):
    for name in names:
        upsert_station(repo, ORG, {"id": "st_1", "name": name})


def entry_numbers(repo):
    folder = repo.documents._history(ORG, STATIONS, "st_1")
    return sorted(int(path.name.split(".")[0]) for path in folder.glob("*.json"))


def kept_revisions(repo):
    return [revision.revision for revision in repo.documents.history(ORG, STATIONS, "st_1", 100)]


def test_each_write_keeps_the_newest_revisions_only(tmp_path):
    repo = FileRepository(tmp_path / "data", history_revisions=3)
    save_names(repo, [f"Station {n}" for n in range(1, 8)])
    assert entry_numbers(repo) == [5, 6, 7]
    assert kept_revisions(repo) == [7, 6, 5]


def test_a_lowered_setting_removes_every_entry_beyond_it_at_the_next_write(tmp_path):
    save_names(FileRepository(tmp_path / "data", history_revisions=10), [f"Station {n}" for n in range(1, 9)])
    lowered = FileRepository(tmp_path / "data", history_revisions=2)
    save_names(lowered, ["Station 9"])
    assert entry_numbers(lowered) == [8, 9]
    assert kept_revisions(lowered) == [9, 8]


def test_an_entry_an_interrupted_write_left_goes_with_the_next_write(tmp_path):
    repo = FileRepository(tmp_path / "data", history_revisions=3)
    save_names(repo, [f"Station {n}" for n in range(1, 6)])
    assert entry_numbers(repo) == [3, 4, 5]
    # As a process killed between two writes' commits and their prunes leaves the history folder.
    folder = repo.documents._history(ORG, STATIONS, "st_1")
    for number in (1, 2):
        (folder / f"{number}.json").write_bytes((folder / "3.json").read_bytes())
    save_names(repo, ["Station 6"])
    assert entry_numbers(repo) == [4, 5, 6]
