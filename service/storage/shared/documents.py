"""PLACEHOLDER on branch sharedmedia only, so that SharedRepository can be built for the media tests; the shareddocs
branch's module replaces it whole."""


class SharedDocumentStore:
    def __init__(self, database):
        self._database = database

    def remove_all(self):
        with self._database.transaction() as connection:
            connection.execute("DELETE FROM documents")
