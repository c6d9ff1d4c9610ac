"""The real engines of the shared-backend tests (tests/support/engines.py) do what those tests rely on: databases of their own,
an S3 store that checks credentials and part sizes, and data that outlives a stop and a start."""
import uuid

import botocore.exceptions
import psycopg
import pytest

MiB = 1024 * 1024


def bucket_name():
    return f"wis-test-{uuid.uuid4().hex[:12]}"


# -- PostgreSQL -------------------------------------------------------------------------------------------------------

def test_each_new_database_is_a_database_of_its_own(postgres):
    first, second = postgres.new_database(), postgres.new_database()
    assert first != second
    with psycopg.connect(first, autocommit=True) as connection:
        connection.execute("CREATE TABLE marker (id text COLLATE \"C\" PRIMARY KEY)")
        connection.execute("INSERT INTO marker VALUES ('here')")
        assert connection.execute("SELECT id FROM marker").fetchall() == [("here",)]
    with psycopg.connect(second, autocommit=True) as connection:
        assert connection.execute("SELECT to_regclass('marker')").fetchone() == (None,)
        assert connection.execute("SHOW fsync").fetchone() == ("on",)
        assert int(connection.execute("SHOW max_connections").fetchone()[0]) >= 300


def test_each_new_schema_is_the_default_of_its_url(postgres):
    first, second = postgres.new_schema(), postgres.new_schema()
    with psycopg.connect(first, autocommit=True) as connection:
        connection.execute("CREATE TABLE marker (id text PRIMARY KEY)")
    with psycopg.connect(second, autocommit=True) as connection:
        assert connection.execute("SELECT to_regclass('marker')").fetchone() == (None,)


def test_committed_rows_survive_a_stop_and_a_kill(postgres):
    url = postgres.new_database()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE durable (n int)")
        connection.execute("INSERT INTO durable VALUES (1)")
    idle = psycopg.connect(url)  # a connection open across the stop: the server cuts it
    postgres.stop()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)
    postgres.start()
    with pytest.raises(psycopg.OperationalError):
        idle.execute("SELECT 1")
    idle.close()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("INSERT INTO durable VALUES (2)")
    postgres.kill()  # a crash after COMMIT: recovery replays the WAL
    postgres.start()
    with psycopg.connect(url) as connection:
        assert connection.execute("SELECT n FROM durable ORDER BY n").fetchall() == [(1,), (2,)]


# -- SeaweedFS's S3 ---------------------------------------------------------------------------------------------------

def test_s3_refuses_a_wrong_secret(seaweed):
    bucket = seaweed.create_bucket(bucket_name())
    wrong = seaweed.client(secret="not-the-secret", retries=0)
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        wrong.put_object(Bucket=bucket, Key="intruder", Body=b"x")
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    with pytest.raises(botocore.exceptions.ClientError):
        seaweed.client().head_object(Bucket=bucket, Key="intruder")


def test_s3_round_trips_an_object(seaweed):
    bucket = seaweed.create_bucket(bucket_name())
    client = seaweed.client()
    body = bytes(range(256)) * 1000
    client.put_object(Bucket=bucket, Key="dir/object.bin", Body=body)
    assert client.get_object(Bucket=bucket, Key="dir/object.bin")["Body"].read() == body
    ranged = client.get_object(Bucket=bucket, Key="dir/object.bin", Range="bytes=10-19")
    assert ranged["Body"].read() == body[10:20]


def _multipart(client, bucket, key, part_sizes):
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = []
    for number, size in enumerate(part_sizes, start=1):
        answer = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number,
                                    Body=bytes([number]) * size)
        parts.append({"PartNumber": number, "ETag": answer["ETag"]})
    try:
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts})
    except botocore.exceptions.ClientError:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        raise


def test_s3_refuses_a_small_part_that_is_not_the_last(seaweed):
    bucket = seaweed.create_bucket(bucket_name())
    client = seaweed.client()
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        _multipart(client, bucket, "small", [MiB, MiB])
    assert refused.value.response["Error"]["Code"] == "EntityTooSmall"
    _multipart(client, bucket, "fine", [5 * MiB, 5 * MiB, MiB])
    body = client.get_object(Bucket=bucket, Key="fine")["Body"].read()
    assert body == b"\x01" * (5 * MiB) + b"\x02" * (5 * MiB) + b"\x03" * MiB


def test_s3_objects_survive_a_stop_and_a_kill(seaweed):
    bucket = seaweed.create_bucket(bucket_name())
    seaweed.client().put_object(Bucket=bucket, Key="before-stop", Body=b"kept")
    seaweed.stop()
    with pytest.raises(botocore.exceptions.BotoCoreError):
        seaweed.client(retries=0, connect_timeout=1).list_buckets()
    seaweed.start()
    client = seaweed.client()
    assert client.get_object(Bucket=bucket, Key="before-stop")["Body"].read() == b"kept"
    client.put_object(Bucket=bucket, Key="before-kill", Body=b"kept too")
    seaweed.kill()
    seaweed.start()
    client = seaweed.client()
    assert client.get_object(Bucket=bucket, Key="before-stop")["Body"].read() == b"kept"
    assert client.get_object(Bucket=bucket, Key="before-kill")["Body"].read() == b"kept too"
