"""The machine-readable contract of the upload and media endpoints: `GET /openapi.json`, no token needed."""
from pathlib import Path

import orjson
from flask import Blueprint, Response, current_app

from service.errors import ConfigurationError
from service.web.auth import PUBLIC, requires

DOCUMENT = Path(__file__).parents[1] / "openapi.json"  # package data of `service` (setup.cfg)

bp = Blueprint("openapi", __name__)


def load_document(path=DOCUMENT):
    """The OpenAPI document as text, checked to be JSON; a broken file stops start-up, naming it."""
    try:
        text = path.read_text(encoding="utf-8")
        orjson.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot load the OpenAPI document {path}: {exc}") from None
    return text


@bp.get("/openapi.json")
@requires(PUBLIC)
def openapi_document():
    return Response(current_app.extensions["openapi"], content_type="application/json")


def init_app(app):
    app.extensions["openapi"] = load_document()
    app.register_blueprint(bp)
