"""The repository: every store of the service, behind the contract of service.storage.contract. This package only
chooses and opens the backend the configuration names, the file backend (service.storage.files, the default: one
data directory) or the shared backend (service.storage.shared: PostgreSQL and an S3 bucket), and sweeps its expired
streams after responses."""
import logging
import tempfile
import time
from pathlib import Path

from service.config import database_url_variable
from service.errors import ConfigurationError
from service.storage.files import FileRepository
from service.storage.common.schedule import SWEEP_INTERVAL_SECONDS

__all__ = ["SWEEP_INTERVAL_SECONDS", "open_repository", "init_app", "get_repository"]

log = logging.getLogger(__name__)


def open_repository(config, clock=time.time):
    """The repository the configuration names: the shared backend with a database URL, else the data directory."""
    ttl_seconds, max_open = config["STREAM_TTL_HOURS"] * 3600, config["MAX_OPEN_STREAMS"]
    kept, events_kept = config["HISTORY_REVISIONS"], config["EVENTS_RETENTION_DAYS"] * 86400
    if config.get("DATABASE_URL"):
        from service.storage.shared import SharedRepository  # psycopg and boto3 load only when used

        return SharedRepository(config["DATA_DIR"], config["DATABASE_URL"], config["S3_BUCKET"],
                                config["S3_PREFIX"], ttl_seconds, clock, max_open, config.get("TEST_SEED"), kept,
                                events_kept, database_options(config))
    return FileRepository(config["DATA_DIR"], ttl_seconds, clock, max_open, config.get("TEST_SEED"), kept, events_kept)


def check_data_dir(config):
    """At start-up: ConfigurationError naming the setting, with the system's reason, when the data directory cannot be
    made or written (a file in its path, permission denied, a read-only file system). Both backends keep files there
    (the shared one its spool of request bodies), and so does the embedded default token; found later, it was a
    traceback from the gunicorn master or a worker that failed to boot."""
    path = Path(config["DATA_DIR"])
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        # mkdir(exist_ok=True) of a path that is a file says "File exists", which hides what is wrong.
        reason = "Not a directory" if isinstance(error, FileExistsError) else error.strerror or error
        raise ConfigurationError(f"WIS_DATA_DIR (wis serve --data-dir): cannot make the data directory {path}: "
                                 f"{reason}") from None
    try:
        with tempfile.TemporaryFile(dir=path):  # an unnamed file (O_TMPFILE) where the file system has them
            pass
    except OSError as error:
        raise ConfigurationError(f"WIS_DATA_DIR (wis serve --data-dir): cannot write in the data directory {path}: "
                                 f"{error.strerror or error}") from None


def database_options(config):
    """The shared backend's database settings from the configuration (keyword arguments of shared.database.Database)."""
    return {"pool_size": config["DB_POOL_SIZE"], "pool_wait_seconds": config["DB_POOL_WAIT_SECONDS"],
            "node_name": config["NODE_NAME"], "variable": database_url_variable(config)}


def init_app(app):
    """Open the configured repository for the app, and sweep its expired streams after responses, when one is due."""
    repository = open_repository(app.config)
    app.extensions["repository"] = repository

    def sweep_when_due(response):
        """After the first response a worker sends, and then at most every SWEEP_INTERVAL_SECONDS (the repository
        keeps the time), sweep expired streams once the response has gone out: no request waits for it."""
        if repository.sweep_due():
            response.call_on_close(lambda: _sweep(repository, app.extensions["metrics"].streams_expired))
        return response

    app.after_request(sweep_when_due)


def _sweep(repository, expired_counter):
    try:
        expired_counter.inc(repository.sweep())
    except Exception:
        log.exception("sweeping expired upload streams failed")


def get_repository(app):
    return app.extensions["repository"]


def close_repository(app):
    """Close the repository of an app made by service.create_app; nothing for another WSGI app served with the shipped
    gunicorn config (ours wrapped in a middleware, or an app of its own)."""
    extensions = getattr(app, "extensions", None)
    repository = extensions.get("repository") if isinstance(extensions, dict) else None
    if repository is not None:
        repository.close()
