"""Secrets every worker of every node shares: rows of `secrets`, each made by whichever process asks first."""
import secrets


def shared_secret(database, name):
    """The secret called `name`, made now if no process has made it: the first INSERT wins, every caller reads it."""
    with database.transaction() as connection:
        connection.execute("INSERT INTO secrets (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                           (name, secrets.token_urlsafe(32)))
        return connection.execute("SELECT value FROM secrets WHERE name = %s", (name,)).fetchone()[0]
