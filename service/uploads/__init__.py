"""Upload endpoints, one blueprint whose views live in modules by job: chunks (single uploads, chunked streams and
their chunks), tus (tus 1.0 on the same URLs) and media (serving what was uploaded)."""
import logging

from flask import current_app

from service.observability import get_metrics
from service.storage import get_repository
from service.uploads import chunks, media, tus  # noqa: F401 (importing them puts their routes on the blueprint)
from service.uploads.blueprint import bp

log = logging.getLogger(__name__)


@bp.after_app_request
def sweep_when_due(response):
    """After the first response a worker sends, and then at most every few minutes (the repository keeps the time),
    sweep expired streams once the response has gone out: no request waits for it."""
    repo = get_repository(current_app)
    if repo.sweep_due():
        response.call_on_close(_sweeper(repo))
    return response


def _sweeper(repo):
    expired = get_metrics(current_app).streams_expired

    def sweep():
        try:
            expired.inc(repo.sweep())
        except Exception:
            log.exception("sweeping expired upload streams failed")
    return sweep


def init_app(app):
    app.register_blueprint(bp)
