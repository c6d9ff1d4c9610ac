"""Liveness and readiness, no token needed: `GET /healthz` answers while the process serves requests; `GET /readyz`
answers 200 only while the engines the service stores into answer too (the shared backend's database and object store;
nothing to check on the file backend), so a load balancer sends requests to this node only then."""
from flask import Blueprint, current_app, jsonify

from service.storage import get_repository

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz():
    states = get_repository(current_app).check_ready()
    checks = {engine: problem or "ok" for engine, problem in states.items()}
    problems = [f"{engine} ({problem})" for engine, problem in states.items() if problem]
    if problems:
        return jsonify(error="not ready: " + "; ".join(problems), checks=checks), 503
    return jsonify(status="ready", checks=checks)


def init_app(app):
    app.register_blueprint(bp)
