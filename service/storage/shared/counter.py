"""A number every worker of every node shares: one row of `test_counters` (test mode's count of the names made,
service.storage.testmode.fresh_names)."""


class DatabaseCounter:
    def __init__(self, database, name):
        self.database = database
        self.name = name

    def next(self):
        """Add one and return the new value (1 after a reset); the row lock orders concurrent callers."""
        with self.database.transaction() as connection:
            return connection.execute(
                "INSERT INTO test_counters (name, value) VALUES (%s, 1) "
                "ON CONFLICT (name) DO UPDATE SET value = test_counters.value + 1 RETURNING value",
                (self.name,)).fetchone()[0]

    def reset(self):
        with self.database.transaction() as connection:
            connection.execute("DELETE FROM test_counters WHERE name = %s", (self.name,))
