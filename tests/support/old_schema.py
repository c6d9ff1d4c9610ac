"""Databases of the shared backend as an earlier version of the service left them, for the tests of `upgrade`."""
from unittest import mock

from service.storage.shared import database as database_module
from service.storage.shared.database import Database


def database_with_an_old_station(url, version):
    """Upgrade the empty database at `url` to schema `version` only, and store station st_1 of org default at revision
    3 in it, as a service of that version did (a document row, nothing else)."""
    with mock.patch.object(database_module, "MIGRATIONS", database_module.MIGRATIONS[:version]):
        Database(url).upgrade()
    older = Database(url)
    try:
        with older.transaction() as connection:
            connection.execute("INSERT INTO documents VALUES ('default', 'stations', 'st_1', %s, "
                               "'2024-01-01T00:00:00.000Z', '2024-01-02T00:00:00.000Z', 3)",
                               ('{"id":"st_1","name":"A"}',))
    finally:
        older.close()
