"""Liveness and readiness, no token needed (CONTRACT 8 and 13): `GET /healthz` answers while the process serves
requests; `GET /readyz` answers 200 while this node can serve documents, so a load balancer sends requests to it.

Readiness is the node's own: the database's state comes from this process's connection pool and circuit (no connection
is opened per probe), so a full max_connections or a busy database does not take every node out of rotation. The
object store being down leaves the node ready (documents still work; uploads and media answer 503 on their own) with
the cause in `checks`; the database being down makes it 503."""
from flask import Blueprint, current_app, jsonify

from service.storage import get_repository
from service.web.auth import PUBLIC, requires

bp = Blueprint("health", __name__)

# Engines whose loss stops only some requests (uploads and media): reported, but the node stays in rotation.
DEGRADING_ENGINES = frozenset({"objects"})


@bp.get("/healthz")
@requires(PUBLIC)
def healthz():
    return jsonify(status="ok")


@bp.get("/readyz")
@requires(PUBLIC)
def readyz():
    states = get_repository(current_app).check_ready()
    checks = {engine: f"down: {problem}" if problem else "ok" for engine, problem in states.items()}
    stopping = [f"{engine} ({problem})" for engine, problem in states.items()
                if problem and engine not in DEGRADING_ENGINES]
    if stopping:
        return jsonify(error="not ready: " + "; ".join(stopping), checks=checks), 503
    return jsonify(status="ready", checks=checks)


def init_app(app):
    app.register_blueprint(bp)
