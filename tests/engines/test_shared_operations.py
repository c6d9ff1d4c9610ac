"""Operating the shared backend against real PostgreSQL and SeaweedFS: `wis db upgrade`, `wis migrate`, `wis gc`,
`GET /readyz`, and the start-up refusals of `wis serve`."""
import os
import shlex
import subprocess
import time
import uuid

import psycopg
import pytest
import requests

from service import create_app
from service.domain.tokens import create_token, revoke_token
from service.interface import TOKEN_HEADER
from service.storage import get_repository
from service.storage.shared.database import MIGRATIONS, Database
from support.documents import upsert_process
from support.media import PNG, blob, mp4
from support.ports import free_port
from support.servers import WIS, run_wis
from support.tokens import HEADERS, TOKENS
from support.uploads import create_stream, send_chunk, stream_status, upload
from support.paths import REPOSITORY

REPOSITORY = REPOSITORY
# Settings of the outer environment that would leak into a `wis` run: each test gives its own.
OUTER = ("WIS_", "DATABASE_URL", "AWS_")


def clean_environment(**settings):
    environment = {name: value for name, value in os.environ.items() if not name.startswith(OUTER)}
    return {**environment, **settings}


@pytest.fixture
def bucket(seaweed):
    return seaweed.create_bucket(f"wis-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def fresh_database(postgres):
    """A database with no schema yet."""
    return postgres.new_database()


@pytest.fixture
def shared_settings(fresh_database, bucket, seaweed, tmp_path):
    """The environment of a node of the shared backend, its database not upgraded yet."""
    return {**seaweed.env(), "WIS_DATABASE_URL": fresh_database, "WIS_S3_BUCKET": bucket, "WIS_API_TOKENS": TOKENS,
            "WIS_DATA_DIR": str(tmp_path / "node-data")}


@pytest.fixture
def upgraded(shared_settings):
    Database(shared_settings["WIS_DATABASE_URL"]).upgrade()
    return shared_settings


@pytest.fixture
def shared_app(upgraded, monkeypatch):
    """The app on the shared backend, in this process (boto3 reads the store's endpoint from the environment)."""
    for name, value in upgraded.items():
        monkeypatch.setenv(name, value)
    app = create_app({"TESTING": True})
    yield app
    get_repository(app).database.close()


def wis(*args, settings):
    return run_wis(*args, env=clean_environment(**settings), replace_env=True)


def one_line(done):
    """The single line a refusing `wis` printed on stderr."""
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    return line


# -- wis db upgrade ---------------------------------------------------------------------------------------------

def test_db_upgrade_applies_the_schema_once(shared_settings):
    first = wis("db", "upgrade", settings=shared_settings)
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"database schema at version {len(MIGRATIONS)} (was 0)\n"
    again = wis("db", "upgrade", settings=shared_settings)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"database schema at version {len(MIGRATIONS)} (already up to date)\n"
    assert Database(shared_settings["WIS_DATABASE_URL"]).schema_version() == len(MIGRATIONS)


def test_db_upgrade_from_four_nodes_at_once_applies_it_once(shared_settings):
    runs = [subprocess.Popen([str(WIS), "db", "upgrade"], env=clean_environment(**shared_settings),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0] * 4, outputs
    said = sorted(stdout for stdout, _stderr in outputs)
    assert said == [f"database schema at version {len(MIGRATIONS)} (already up to date)\n"] * 3 + [
        f"database schema at version {len(MIGRATIONS)} (was 0)\n"]
    with psycopg.connect(shared_settings["WIS_DATABASE_URL"]) as connection:
        assert connection.execute("SELECT version FROM wis_schema").fetchall() == [(len(MIGRATIONS),)]
        tables = connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1").fetchall()
    assert [name for (name,) in tables] == ["api_tokens", "api_tokens_version", "collected_media", "documents",
                                            "event_counters", "events", "media",
                                            "open_streams_count", "revisions", "secrets", "stream_chunks", "streams",
                                            "test_counters", "webhook_deliveries", "webhook_subscriptions",
                                            "wis_schema"]


def test_db_upgrade_without_a_database_url_names_the_setting():
    assert "WIS_DATABASE_URL" in one_line(wis("db", "upgrade", settings={}))


def test_db_upgrade_of_an_unreachable_database_is_one_line_naming_the_setting(shared_settings):
    settings = {**shared_settings, "WIS_DATABASE_URL": f"postgresql://wis@127.0.0.1:{free_port()}/postgres"}
    started = time.monotonic()
    line = one_line(wis("db", "upgrade", settings=settings))
    assert "WIS_DATABASE_URL" in line and "Connection refused" in line
    assert time.monotonic() - started < 10


# -- wis migrate ------------------------------------------------------------------------------------------------

def fill_data_directory(data_dir):
    """A file data directory with two processes (one updated twice), a station, an image of each org, and an open
    chunked stream; return the app on it."""
    # The file backend, whatever the environment of the test says.
    app = create_app({"DATA_DIR": str(data_dir), "API_TOKENS": TOKENS, "TESTING": True, "DATABASE_URL": None,
                      "S3_BUCKET": None})
    client = app.test_client()
    for name in ("first", "second", "third"):
        assert "errors" not in upsert_process(client, HEADERS, {"id": "line_1", "name": name, "steps": []})
    assert "errors" not in upsert_process(client, HEADERS, {"id": "Line_2", "name": "other", "steps": []})
    answer = client.post("/graph/v2", headers=HEADERS, json={
        "query": "mutation($input: StationCreateInput!) { stationCreate(input: $input) }",
        "variables": {"input": {"station": {"id": "st_1", "name": "Station"}}}}).get_json()
    assert "errors" not in answer, answer
    assert upload(app.test_client(), HEADERS, blob(PNG, 5000)).status_code == 201
    data = mp4(3000, seed=1)
    stream_id = create_stream(client, HEADERS, data)
    assert send_chunk(client, HEADERS, stream_id, 0, 2, data[:2000]).status_code in (200, 202)
    return app, stream_id


def test_migrate_copies_a_data_directory_and_a_second_run_changes_nothing(tmp_path, upgraded, shared_app):
    source_app, stream_id = fill_data_directory(tmp_path / "old-data")
    source = get_repository(source_app)
    # The data directory's org `default` was reached with the embedded default token (no WIS_API_TOKENS).
    token_file = tmp_path / "old-data" / "default-token"
    token_file.write_text("the-secret-default-token\n")

    token, _ = create_token(source, "default", "tablet", "read")
    revoked, _ = create_token(source, "default", "old-tablet", "read")

    done = wis("migrate", "--from-data-dir", str(tmp_path / "old-data"), settings=upgraded)
    assert done.returncode == 0, done.stderr
    # What to add to WIS_API_TOKENS, and where the token is: never the token itself.
    assert f"the default token kept in {token_file}" in done.stderr and "`default:<the token in that file>`" in \
        done.stderr and "the-secret-default-token" not in done.stderr + done.stdout
    assert done.stdout.splitlines() == ["media: 1 copied, 0 unchanged", "processes: 2 copied, 0 unchanged",
                                        "stations: 1 copied, 0 unchanged", "streams: 1 copied, 0 unchanged",
                                        "tokens: 2 copied, 0 unchanged", "7 item(s) copied"]
    # The stored tokens work on the shared backend (a revocation since is copied by the next run).
    for made in (token, revoked):
        assert shared_app.test_client().post("/graph/v2", headers={TOKEN_HEADER: made}, json={
            "query": "{ latestEventSeq }"}).status_code == 200
    revoke_token(source, "default", "old-tablet")

    target = get_repository(shared_app)
    for kind, identifier in (("processes", "line_1"), ("processes", "Line_2"), ("stations", "st_1")):
        assert target.documents.get("default", kind, identifier) == source.documents.get("default", kind, identifier)
    assert target.documents.get("default", "processes", "line_1")["revision"] == 3
    [(path, _modified)] = source.media.list_media("default")
    client = shared_app.test_client()
    served = client.get(path, headers=HEADERS)
    assert served.status_code == 200 and served.data == source.media.file_for("default", path).read_bytes()
    # Everything but the expiry, which the copy starts afresh.
    copied, original = (stream_status(app.test_client(), HEADERS, stream_id) for app in (shared_app, source_app))
    assert copied.pop("expiresAt") >= original.pop("expiresAt") and copied == original
    # Events are not copied: the target's seqs start at 1 with its first change (docs/events.md).
    assert source.events.bounds("default") == (1, 5) and target.events.bounds("default") == (1, 0)
    assert "errors" not in upsert_process(client, HEADERS, {"id": "line_1", "name": "fourth", "steps": []})
    assert [(event.seq, event.revision) for event in target.events.read("default", 0, 10)] == [(1, 4)]

    again = wis("migrate", "--from-data-dir", str(tmp_path / "old-data"), settings=upgraded)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["media: 0 copied, 1 unchanged", "processes: 0 copied, 2 unchanged",
                                         "stations: 0 copied, 1 unchanged", "streams: 0 copied, 1 unchanged",
                                         "tokens: 1 copied, 1 unchanged", "1 item(s) copied"]
    assert [token.revoked_at is None for token in target.tokens.all()] == [False, True]  # old-tablet, tablet


def test_migrate_keeps_the_etag_a_client_cached_for_a_media_path(tmp_path, upgraded, shared_app):
    """A client that cached a media file from the file backend revalidates it on the shared backend with 304: the
    copy keeps the ETag the file backend served (CONTRACT 13)."""
    source_app, _stream_id = fill_data_directory(tmp_path / "old-data")
    [(path, _modified)] = get_repository(source_app).media.list_media("default")
    with source_app.test_client().get(path, headers=HEADERS) as before:
        assert before.status_code == 200
        etag = before.headers["ETag"]

    assert wis("migrate", "--from-data-dir", str(tmp_path / "old-data"), settings=upgraded).returncode == 0

    client = shared_app.test_client()
    with client.get(path, headers=HEADERS) as after:
        assert (after.status_code, after.headers["ETag"]) == (200, etag)
    with client.get(path, headers={**HEADERS, "If-None-Match": etag}) as revalidated:
        assert (revalidated.status_code, revalidated.data) == (304, b"")


def test_migrate_refuses_a_target_that_is_not_shared(tmp_path):
    (tmp_path / "old-data" / "orgs").mkdir(parents=True)
    line = one_line(wis("migrate", "--from-data-dir", str(tmp_path / "old-data"), settings={}))
    assert "WIS_DATABASE_URL" in line and "WIS_S3_BUCKET" in line


def test_migrate_refuses_what_is_not_a_data_directory(tmp_path, upgraded):
    line = one_line(wis("migrate", "--from-data-dir", str(tmp_path), settings=upgraded))
    assert str(tmp_path) in line and "not a data directory" in line


def test_migrate_into_a_database_not_upgraded_says_to_upgrade(tmp_path, shared_settings):
    (tmp_path / "old-data" / "orgs").mkdir(parents=True)
    line = one_line(wis("migrate", "--from-data-dir", str(tmp_path / "old-data"), settings=shared_settings))
    assert "wis db upgrade" in line


# -- wis gc -----------------------------------------------------------------------------------------------------

def test_gc_works_on_the_shared_backend_without_a_data_directory(tmp_path, upgraded, shared_app):
    path = upload(shared_app.test_client(), HEADERS, blob(PNG, 3000)).get_json()["path"]
    settings = {**upgraded, "WIS_DATA_DIR": str(tmp_path / "never-made")}

    listed = wis("gc", "--min-age-hours", "0", settings=settings)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == f"default\t{path}\n"
    assert listed.stderr.splitlines() == ["removed 0 expired upload stream(s)",
                                          "1 unreferenced media file(s) found (use --delete to delete them)"]
    deleted = wis("gc", "--min-age-hours", "0", "--delete", settings=settings)
    assert deleted.returncode == 0, deleted.stderr
    assert shared_app.test_client().get(path, headers=HEADERS).status_code == 404


# -- GET /readyz ------------------------------------------------------------------------------------------------

@pytest.mark.file_backend_only("the shared backend's readiness is the next test's")
def test_readyz_on_the_file_backend_is_always_ready(client):
    response = client.get("/readyz")
    assert response.status_code == 200 and response.get_json() == {"status": "ready", "checks": {}}


def test_readyz_on_the_shared_backend_checks_both_engines(shared_app):
    response = shared_app.test_client().get("/readyz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ready", "checks": {"database": "ok", "objects": "ok"}}


def test_readyz_names_a_missing_bucket_and_stays_ready_for_documents(upgraded, monkeypatch):
    for name, value in {**upgraded, "WIS_S3_BUCKET": "no-such-bucket"}.items():
        monkeypatch.setenv(name, value)
    app = create_app({"TESTING": True})
    response = app.test_client().get("/readyz")
    get_repository(app).close()
    assert response.status_code == 200
    answer = response.get_json()
    assert answer["checks"]["database"] == "ok"
    assert answer["checks"]["objects"].startswith("down: ") and "no-such-bucket" in answer["checks"]["objects"]


def test_readyz_names_an_unreachable_database(upgraded, monkeypatch):
    settings = {**upgraded, "WIS_DATABASE_URL": f"postgresql://wis@127.0.0.1:{free_port()}/postgres"}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    app = create_app({"TESTING": True})
    response = app.test_client().get("/readyz")
    get_repository(app).database.close()
    assert response.status_code == 503
    answer = response.get_json()
    assert answer["checks"]["objects"] == "ok" and answer["checks"]["database"].startswith("down: ")
    assert "Connection refused" in answer["checks"]["database"]
    assert answer["error"].startswith("not ready: database (")


# -- wis serve: start-up refusals -------------------------------------------------------------------------------

def serve(server_process, settings, tmp_path):
    return server_process.run([str(WIS), "serve", "--bind", f"127.0.0.1:{free_port()}", "--workers", "1"],
                              cwd=tmp_path, env=clean_environment(**settings), capture_output=True, text=True,
                              timeout=90)


@pytest.mark.parametrize("change, named", [
    ({"WIS_S3_BUCKET": ""}, "WIS_S3_BUCKET"),
    ({"WIS_DATABASE_URL": ""}, "WIS_DATABASE_URL"),
    ({"WIS_API_TOKENS": ""}, "WIS_API_TOKENS"),
    ({"WIS_DATABASE_URL": "port"}, "WIS_DATABASE_URL"),
    ({"WIS_S3_BUCKET": "no-such-bucket"}, "WIS_S3_BUCKET"),
], ids=["database-without-bucket", "bucket-without-database", "no-tokens", "wrong-database-port", "missing-bucket"])
def test_serve_refuses_a_wrong_shared_configuration_with_one_line(tmp_path, upgraded, change, named, server_process):
    settings = {**upgraded, **change}
    if change.get("WIS_DATABASE_URL") == "port":
        settings["WIS_DATABASE_URL"] = f"postgresql://wis@127.0.0.1:{free_port()}/postgres"
    line = one_line(serve(server_process, settings, tmp_path))
    assert line.startswith("work-instruction service: ") and named in line


def test_serve_refuses_a_database_not_upgraded(tmp_path, shared_settings, server_process):
    line = one_line(serve(server_process, shared_settings, tmp_path))
    assert line.startswith("work-instruction service: ") and "wis db upgrade" in line
    assert "WIS_DATABASE_URL has schema version 0" in line


def procfile(kind, port):
    """The Procfile's command of `kind` (release, web) as argv, listening on loopback (0.0.0.0 is for hosting)."""
    line = next(line for line in (REPOSITORY / "Procfile").read_text().splitlines() if line.startswith(f"{kind}:"))
    return [arg.replace("0.0.0.0:", "127.0.0.1:") for arg in shlex.split(line.removeprefix(f"{kind}:").replace(
        "$PORT", str(port)))]


def test_the_procfile_deploys_on_a_fresh_database_set_as_platforms_do(tmp_path, shared_settings, server_process):
    """A platform sets DATABASE_URL, runs `release:` on each deploy, then starts `web:` (CONTRACT 13)."""
    settings = {name: value for name, value in shared_settings.items() if name != "WIS_DATABASE_URL"}
    settings.update(DATABASE_URL=shared_settings["WIS_DATABASE_URL"], PATH=f"{WIS.parent}{os.pathsep}{os.environ['PATH']}",
                    WIS_WORKERS="1")
    port = free_port()
    refused = server_process.run(procfile("web", port), cwd=tmp_path, env=clean_environment(**settings),
                                 capture_output=True, text=True, timeout=90)
    line = one_line(refused)
    # The message names the variable that was set, and the Procfile line that fixes it.
    assert "the database at DATABASE_URL has schema version 0" in line and "WIS_DATABASE_URL" not in line, line
    release = subprocess.run(procfile("release", port), cwd=tmp_path, env=clean_environment(**settings),
                             capture_output=True, text=True, timeout=120)
    assert release.returncode == 0 and f"database schema at version {len(MIGRATIONS)}" in release.stdout, release
    process = server_process(procfile("web", port), cwd=tmp_path, env=clean_environment(**settings),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_readyz(process, port).json()["checks"] == {"database": "ok", "objects": "ok"}
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0


def wait_for_readyz(process, port):
    deadline = time.monotonic() + 30
    while True:
        try:
            answer = requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
            assert answer.status_code == 200, answer.text
            return answer
        except requests.ConnectionError:
            assert process.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)


def test_serve_starts_on_a_ready_shared_backend(tmp_path, upgraded, server_process):
    port = free_port()
    process = server_process([str(WIS), "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"], cwd=tmp_path,
                             env=clean_environment(**upgraded), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_readyz(process, port).json()["checks"] == {"database": "ok", "objects": "ok"}
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
