"""The repository: every store of the service, behind the contract of service.storage.contract. This package only
chooses and opens the backend the configuration names: the file backend (service.storage.files, the default: one
data directory) or the shared backend (service.storage.shared: PostgreSQL and an S3 bucket)."""
import time

from service.storage.files import FileRepository
from service.storage.schedule import SWEEP_INTERVAL_SECONDS

__all__ = ["SWEEP_INTERVAL_SECONDS", "open_repository", "init_app", "get_repository"]


def open_repository(config, clock=time.time):
    """The repository the configuration names: the shared backend with a database URL, else the data directory."""
    ttl_seconds, max_open = config["STREAM_TTL_HOURS"] * 3600, config["MAX_OPEN_STREAMS"]
    if config.get("DATABASE_URL"):
        from service.storage.shared import SharedRepository  # psycopg and boto3 load only when used

        return SharedRepository(config["DATA_DIR"], config["DATABASE_URL"], config["S3_BUCKET"],
                                config["S3_PREFIX"], ttl_seconds, clock, max_open)
    return FileRepository(config["DATA_DIR"], ttl_seconds, clock, max_open)


def init_app(app):
    app.extensions["repository"] = open_repository(app.config)


def get_repository(app):
    return app.extensions["repository"]
