"""The backup and restore the operators' docs describe (docs/shared-backend.md, "Backup"), done as written:
`pg_dump` of the database, then a copy of the bucket's objects; restored into a new database and a new bucket, a node
on them reads back every document, media file and open upload stream."""
import subprocess
import uuid

import pytest

from service import create_app
from service.storage import get_repository
from support.documents import line_process, read_process, upsert_process
from support.media import MP4, PNG, blob, sha256
from support.tokens import HEADERS, TOKENS
from support.uploads import create_stream, send_chunk, stream_status, uploaded_path


@pytest.fixture
def node_on(tmp_path):
    apps = []

    def start(settings, name):
        app = create_app({"DATA_DIR": str(tmp_path / name), "API_TOKENS": TOKENS, "TESTING": True, **settings})
        apps.append(app)
        return app.test_client()

    yield start
    for app in apps:
        get_repository(app).close()


def test_a_pg_dump_and_a_bucket_copy_restore_everything(tmp_path, postgres, seaweed, shared_backend, node_on):
    settings = shared_backend.settings(own_database=True)  # pg_dump takes a whole database
    client = node_on(settings, "node")
    image = blob(PNG, 50_000)
    process = line_process("Assembly")
    process["steps"][0]["primaryImage"] = {"path": uploaded_path(client, HEADERS, image)}
    assert upsert_process(client, HEADERS, process) == {"data": {"processCreate": "CREATED"}}
    assert upsert_process(client, HEADERS, {**process, "name": "Assembly v2"})["data"] == {"processCreate": "UPDATED"}
    video = blob(MP4, 3000)
    stream_id = create_stream(client, HEADERS, video)
    assert send_chunk(client, HEADERS, stream_id, 0, 2, video[:1000]).status_code == 200
    before = read_process(client, HEADERS), stream_status(client, HEADERS, stream_id)

    # 1. pg_dump (custom format), 2. then the bucket's objects under the prefix.
    dump = tmp_path / "wis.dump"
    subprocess.run([str(postgres.bin / "pg_dump"), "--format=custom", f"--file={dump}", settings["DATABASE_URL"]],
                   check=True, timeout=120)
    store = seaweed.client()
    restored_bucket = seaweed.create_bucket(f"wis-restore-{uuid.uuid4().hex[:12]}")
    pages = store.get_paginator("list_objects_v2").paginate(Bucket=settings["S3_BUCKET"], Prefix=settings["S3_PREFIX"])
    copied = 0
    for page in pages:
        for entry in page.get("Contents", ()):
            store.copy_object(Bucket=restored_bucket, Key=entry["Key"],
                              CopySource={"Bucket": settings["S3_BUCKET"], "Key": entry["Key"]})
            copied += 1
    assert copied >= 1

    # 3. Restore into a new database and the new bucket; a node there finds everything.
    restored_url = postgres.new_database()
    subprocess.run([str(postgres.bin / "pg_restore"), "--no-owner", f"--dbname={restored_url}", str(dump)],
                   check=True, timeout=120)
    restored = node_on({**settings, "DATABASE_URL": restored_url, "S3_BUCKET": restored_bucket}, "restored-node")
    assert (read_process(restored, HEADERS), stream_status(restored, HEADERS, stream_id)) == before
    assert before[0]["revision"] == 2
    served = restored.get(process["steps"][0]["primaryImage"]["path"], headers=HEADERS)
    assert served.status_code == 200 and sha256(served.data) == sha256(image)
    # The open upload goes on where it was.
    finished = send_chunk(restored, HEADERS, stream_id, 1, 2, video[1000:])
    assert finished.status_code == 201, finished.get_json()
    assert sha256(restored.get(finished.get_json()["path"], headers=HEADERS).data) == sha256(video)
