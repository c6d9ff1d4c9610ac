"""Liveness: `GET /healthz` answers while the process serves requests; no token needed."""
from flask import Blueprint, jsonify

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify(status="ok")


def init_app(app):
    app.register_blueprint(bp)
