"""The Python client's methods for CONTRACT 10 against real gunicorn on both backends: conditional and dry-run
creates, reads of past revisions and of the input, history, delete and restore; and `wis push` of unchanged files
storing nothing."""
import json

import pytest
import yaml

from service.cli import main
from service.client import ClientError
from support.tokens import TOKEN


def process(identifier, name="Line"):
    return {"id": identifier, "name": name,
            "steps": [{"id": "mount", "actions": [{"id": "tighten", "description": {"text": "Tighten the bolts"},
                                                   "inputParts": [{"part": {"id": "bolt", "serial": {"id": "bolt_sn"}}}]}]}]}


def changes(history):
    return [(entry["revision"], entry["change"]) for entry in history]


def test_create_read_back_the_input_and_push_it_again_unchanged(api):
    assert api.create_process(process("cl_round")) == "CREATED"
    stored = api.get_process("cl_round")
    assert any(action["kind"] == "SCAN" for action in stored["steps"][0]["actions"])
    assert api.create_process(stored["input"]) == "UPDATED"
    again = api.get_process("cl_round")
    assert (again["revision"], again["updatedAt"]) == (1, stored["updatedAt"])
    assert changes(api.process_history("cl_round")) == [(1, "CREATED")]


def test_history_past_revisions_delete_and_restore(api):
    api.create_process(process("cl_life", "one"))
    api.create_process(process("cl_life", "two"))
    assert changes(api.process_history("cl_life")) == [(2, "UPDATED"), (1, "CREATED")]
    assert changes(api.process_history("cl_life", first=1, after=2)) == [(1, "CREATED")]
    assert api.get_process("cl_life", revision=1)["name"] == "one"
    assert api.get_process("cl_life", revision=9) is None
    assert api.delete_process("cl_life") == "DELETED"
    assert api.get_process("cl_life") is None
    with pytest.raises(ClientError) as missing:
        api.delete_process("cl_life")
    assert missing.value.code == "NOT_FOUND"
    assert api.restore_process("cl_life", 1) == "CREATED"
    assert api.get_process("cl_life")["name"] == "one"
    assert changes(api.process_history("cl_life"))[:2] == [(4, "RESTORED"), (3, "DELETED")]
    with pytest.raises(ClientError) as unknown:
        api.restore_process("cl_life", 3)
    assert unknown.value.code == "NOT_FOUND"


def test_if_revision_and_dry_run(api):
    assert api.create_process(process("cl_cond"), if_revision=0) == "CREATED"
    with pytest.raises(ClientError) as conflict:
        api.create_process(process("cl_cond", "other"), if_revision=0)
    assert (conflict.value.code, conflict.value.extensions["revision"]) == ("CONFLICT", 1)
    assert api.create_process(process("cl_cond", "other"), dry_run=True) == "UPDATED"
    assert api.delete_process("cl_cond", dry_run=True) == "DELETED"
    assert api.restore_process("cl_cond", 1, if_revision=1, dry_run=True) == "UPDATED"
    assert api.get_process("cl_cond")["revision"] == 1
    with pytest.raises(ClientError) as stale:
        api.delete_process("cl_cond", if_revision=2)
    assert stale.value.extensions["revision"] == 1
    assert api.delete_process("cl_cond", if_revision=1) == "DELETED"


def test_products_and_stations(api):
    api.create_process(process("cl_final"))
    product = {"id": "cl_prod", "name": "P", "finalProcessId": "cl_final", "dependencies": []}
    assert api.create_product(product, if_revision=0, dry_run=True) == "CREATED"
    assert api.get_product("cl_prod") is None
    assert api.create_product(product) == "CREATED"
    with pytest.raises(ClientError) as in_use:
        api.delete_process("cl_final")
    assert (in_use.value.code, in_use.value.extensions["products"]) == ("CONFLICT", ["cl_prod"])
    assert api.create_product(api.get_product("cl_prod")["input"]) == "UPDATED"
    assert api.delete_product("cl_prod") == "DELETED"
    assert changes(api.product_history("cl_prod")) == [(2, "DELETED"), (1, "CREATED")]
    assert api.restore_product("cl_prod", 1) == "CREATED"
    assert api.get_product("cl_prod", revision=3)["revision"] == 3
    assert api.create_station({"id": "cl_st", "name": "Bench"}) == "CREATED"
    assert api.create_station({"id": "cl_st", "name": "Bench 2"}, if_revision=1) == "UPDATED"
    assert api.get_station("cl_st", revision=1)["name"] == "Bench"
    assert api.delete_station("cl_st", if_revision=2) == "DELETED"
    assert api.restore_station("cl_st", 2) == "CREATED"
    assert changes(api.station_history("cl_st"))[0] == (4, "RESTORED")


def test_pushing_unchanged_files_again_bumps_no_revision(server, api, tmp_path, capsys):
    (tmp_path / "line.yml").write_text(yaml.safe_dump([{"station": {"id": "push_st", "name": "Bench"}},
                                                       {"process": process("push_line")}]))
    (tmp_path / "product.json").write_text(json.dumps({"product": {
        "id": "push_prod", "name": "P", "finalProcessId": "push_line", "dependencies": []}}))
    arguments = ["push", str(tmp_path), "--url", server.url, "--token", TOKEN]
    assert main(arguments) == 0
    before = [api.get_station("push_st"), api.get_process("push_line"), api.get_product("push_prod")]
    assert main(arguments) == 0
    capsys.readouterr()
    assert [api.get_station("push_st"), api.get_process("push_line"), api.get_product("push_prod")] == before
    assert [entry["revision"] for entry in before] == [1, 1, 1]


def test_changes_between_revisions_from_the_client_and_wis_diff(server, api, capsys):
    api.create_process(process("cl_diff", "one"))
    changed = process("cl_diff", "two")
    changed["steps"][0]["actions"][0]["inputParts"][0]["quantity"] = 4
    api.create_process(changed)
    words = ["name \u201cone\u201d -> \u201ctwo\u201d", "step 1 `mount`: action `tighten`: input part `bolt`: quantity 1 -> 4"]
    assert api.process_changes("cl_diff", 1, 2) == words
    assert api.changes("process", "cl_diff", 2, 2) == []
    with pytest.raises(ClientError) as missing:
        api.process_changes("cl_diff", 1, 3)
    assert missing.value.code == "NOT_FOUND"

    arguments = ["--url", server.url, "--token", TOKEN]
    assert main(["diff", "process", "cl_diff", "1", "2", *arguments]) == 0
    assert capsys.readouterr().out.splitlines() == words
    assert main(["diff", "process", "cl_diff", "2", "2", *arguments]) == 0
    printed = capsys.readouterr()
    assert (printed.out, printed.err) == ("", "nothing changed from revision 2 to revision 2\n")
    assert main(["diff", "process", "cl_diff", "1", "3", *arguments]) == 1
    assert "has no revision 3 to compare" in capsys.readouterr().err
    api.create_station({"id": "cl_diff_st", "name": "Bench"})
    api.create_station({"id": "cl_diff_st", "name": "Bench 2"})
    assert api.station_changes("cl_diff_st", 2, 1) == ["name \u201cBench 2\u201d -> \u201cBench\u201d"]
