"""`wis token create`, `list` and `revoke` on the service's storage (CONTRACT 16), both backends, against an app on the
same stores: a made token is printed once, works at its scope, is listed by name (never the token), and is refused
once revoked; bad input is one line naming what is wrong; without a data directory or a database it refuses, saying
where to run it."""
import time

import pytest

from service.cli import main
from service.domain.token_directory import REFRESH_SECONDS
from service.interface import TOKEN_HEADER

QUERY = {"query": "{ latestEventSeq }"}
CREATE = {"query": 'mutation { stationCreate(input: {station: {id: "st_1", name: "A"}}) }'}


@pytest.fixture
def storage(app, monkeypatch):
    """`wis token` pointed at the app's stores, as an operator would: the data directory, or the database."""
    for variable, key in (("WIS_DATABASE_URL", "DATABASE_URL"), ("WIS_S3_BUCKET", "S3_BUCKET"),
                          ("WIS_S3_PREFIX", "S3_PREFIX")):
        monkeypatch.setenv(variable, app.config[key] or "")
    return ["--data-dir", app.config["DATA_DIR"]]


def wis(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_a_made_token_is_printed_once_works_at_its_scope_and_is_refused_once_revoked(client, capsys, storage):
    code, out, err = wis(capsys, "token", "create", "--org", "default", "--scope", "read", "--name", "tablet", *storage)
    assert code == 0 and len(out) == 1 and out[0].startswith("wis-") and "printed this once" in err
    headers = {TOKEN_HEADER: out[0]}
    assert client.post("/graph/v2", headers=headers, json=QUERY).get_json() == {"data": {"latestEventSeq": 0}}
    assert client.post("/graph/v2", headers=headers, json=CREATE).get_json()["errors"][0]["extensions"]["code"] == \
        "FORBIDDEN"

    code, listed, _ = wis(capsys, "token", "list", *storage)
    assert code == 0 and listed[0].split() == ["ORG", "NAME", "SCOPE", "CREATED", "LAST", "USED", "REVOKED"]
    assert listed[1].split()[:3] == ["default", "tablet", "read"] and listed[1].split()[4:] == ["never", "-"]
    assert out[0] not in "\n".join(listed)

    code, said, _ = wis(capsys, "token", "revoke", "--org", "default", "tablet", *storage)
    assert code == 0 and said[0].startswith("token 'tablet' of org 'default' revoked at ")
    time.sleep(REFRESH_SECONDS)  # the app looks at the stored tokens again a second after it last did
    assert client.post("/graph/v2", headers=headers, json=QUERY).status_code == 401
    code, listed, err = wis(capsys, "token", "list", "--org", "other", *storage)
    assert len(listed) == 1 and err == "no stored tokens of org 'other' (those of WIS_API_TOKENS are not stored)\n"


@pytest.mark.parametrize("args, said", [
    (("create", "--org", "default", "--scope", "read", "--name", "Tablet"), "error: name: must be 1 to 64 lower-case"),
    (("create", "--org", "default", "--scope", "read", "--name", "env-1"), "error: name: 'env-1' is the name of a "
                                                                           "token that is not stored"),
    (("revoke", "--org", "default", "nobody"), "error: org 'default' has no token named 'nobody' to revoke"),
])
def test_bad_input_is_one_line_naming_what_is_wrong(capsys, storage, args, said):
    code, out, err = wis(capsys, "token", *args, *storage)
    assert (code, out) == (1, []) and err.startswith(said) and err.count("\n") == 1


def test_a_name_is_refused_the_second_time(capsys, storage):
    arguments = ("token", "create", "--org", "default", "--scope", "write", "--name", "pipeline", *storage)
    assert wis(capsys, *arguments)[0] == 0
    code, out, err = wis(capsys, *arguments)
    assert (code, out) == (1, []) and err.startswith("error: name: org 'default' has (or had: a revoked token keeps "
                                                     "its name) a token named 'pipeline'")


def test_without_a_data_directory_or_a_database_it_refuses_saying_where_to_run_it(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("WIS_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("WIS_S3_BUCKET", raising=False)
    for command in (("list",), ("create", "--org", "default", "--scope", "read", "--name", "tablet")):
        code, out, err = wis(capsys, "token", *command, "--data-dir", str(tmp_path / "nothing"))
        assert (code, out) == (1, []) and err.startswith(f"error: no service storage here: {tmp_path / 'nothing'} is "
                                                         "not a data directory of the service, and no database is "
                                                         "configured")
    assert not (tmp_path / "nothing").exists()
