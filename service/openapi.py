"""The machine-readable contract of the upload and media endpoints: `GET /openapi.json`, no token needed."""
import json
from pathlib import Path

from flask import Response

from service.errors import ConfigurationError

DOCUMENT = Path(__file__).with_name("openapi.json")


def load_document(path=DOCUMENT):
    """The OpenAPI document as text, checked to be JSON; a broken file stops start-up, naming it."""
    try:
        text = path.read_text(encoding="utf-8")
        json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot load the OpenAPI document {path}: {exc}") from None
    return text


def init_app(app):
    document = load_document()

    @app.get("/openapi.json")
    def openapi_document():
        return Response(document, content_type="application/json")
