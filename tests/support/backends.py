"""The storage backends the behaviour tests run against (the `backend` fixture in conftest.py). Each app or server a
test starts gets stores of its own: a data directory, and on the shared backend also a fresh PostgreSQL schema and a
key prefix of its own in the session's bucket."""
import itertools
import os


class FileBackend:
    name = "file"

    def settings(self):
        """Config overrides for create_app (beside DATA_DIR, which every app gets)."""
        return {}

    def environment(self, settings):
        """The same settings as environment variables of a server process."""
        return {}


class SharedBackend:
    name = "shared"
    _prefixes = itertools.count(1)

    def __init__(self, postgres, bucket):
        self.postgres = postgres
        self.bucket = bucket

    def settings(self, own_database=False):
        """Config overrides for create_app: stores of its own, in a schema of its own of the session's database (a
        schema costs PostgreSQL about 0.06 CPU seconds, a CREATE DATABASE about 0.3, and the suite makes hundreds),
        or with `own_database` in a database of its own (for what works on a whole database: pg_dump)."""
        from service.storage.shared.database import Database

        url = self.postgres.new_database() if own_database else self.postgres.new_schema()
        Database(url).upgrade()
        return {"DATABASE_URL": url, "S3_BUCKET": self.bucket, "S3_PREFIX": f"t{os.getpid()}-{next(self._prefixes)}/"}

    def environment(self, settings):
        return {"WIS_DATABASE_URL": settings["DATABASE_URL"], "WIS_S3_BUCKET": settings["S3_BUCKET"],
                "WIS_S3_PREFIX": settings["S3_PREFIX"]}
