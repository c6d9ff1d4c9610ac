"""The importer against the real service, embedded by the installed package's pytest fixtures (no conftest needed).

wis_client is a service.client.Client on a server emptied before each test; wis_journal tells which calls reached
it; wis_fault makes it misbehave; with `wis_seed` set (pyproject.toml), media paths are the same on every run.
"""
from pathlib import Path

import pytest

from service.client import ClientError
from sheet_importer import import_sheets

SHEETS = Path(__file__).resolve().parent.parent / "sheets"


def test_each_process_is_created_once_and_each_picture_uploaded_once(wis_client, wis_journal):
    result = import_sheets(SHEETS, wis_client)

    assert wis_journal.ids("processCreate") == ["paint_frame", "weld_frame"]  # in file-name order
    wis_journal.assert_called("stationCreate", ids=["cell_3", "cell_4"], times=1)
    # clamp.png is shown by two steps of two sheets, and uploaded once.
    assert wis_journal.uploads() == [result["pictures"]["pictures/clamp.png"], result["pictures"]["pictures/weld.png"]]
    step = wis_client.get_process("weld_frame")["steps"][1]
    assert step["primaryImage"]["path"] == result["pictures"]["pictures/weld.png"]


def test_the_media_paths_are_the_same_on_every_run(wis_client, wis_seed):
    assert wis_seed == 1234
    result = import_sheets(SHEETS, wis_client)
    assert result["pictures"] == {
        "pictures/clamp.png": "/api/v1/images/7271c516b27b24ba-clamp.png",
        "pictures/weld.png": "/api/v1/images/0d74e677b7e73cb9-weld.png",
    }


def test_an_upload_cut_off_by_the_network_is_sent_again(wis_client, wis_fault, wis_journal):
    wis_fault(method="POST", path="^/uploads$", reset=True)  # the first upload gets no answer at all
    import_sheets(SHEETS, wis_client)

    uploads = wis_journal.entries(method="POST", path="^/uploads$")
    assert [entry["status"] for entry in uploads] == [None, 201, 201]
    assert len(wis_journal.uploads()) == 2


def test_a_failing_service_stops_the_import_before_the_next_process(wis_client, wis_fault, wis_journal):
    wis_fault(method="POST", path="^/graph/v2$", status=503, times=100)
    with pytest.raises(ClientError) as refused:
        import_sheets(SHEETS, wis_client)
    assert refused.value.status == 503
    # Mutations are not sent twice (a second copy could apply twice): one stationCreate, then the import stopped.
    assert wis_journal.operations() == ["stationCreate"]
    wis_journal.assert_not_called("processCreate")
