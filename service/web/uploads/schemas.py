"""Request validation at the edge: marshmallow schemas whose messages name the offending field."""
import json

from marshmallow import Schema, ValidationError, fields, validate

from service.errors import InvalidRequest
from service.interface import LONE_SURROGATE, is_unicode

SHA256 = validate.Regexp(r"^[0-9a-fA-F]{64}$", error="must be 64 hexadecimal digits (a SHA-256)")
REQUIRED = {"required": "is required", "null": "is required"}


def characters(text):
    """A marshmallow validator: `text` holds no lone surrogate (a JSON body may, and nothing could store it)."""
    if not is_unicode(text):
        raise ValidationError(LONE_SURROGATE)


def _string(validate=(), **kwargs):
    validators = [characters, *([validate] if callable(validate) else validate)]
    return fields.String(error_messages={**REQUIRED, "invalid": "must be a string"}, validate=validators, **kwargs)


def _integer(strict, kind=fields.Integer, **kwargs):
    return kind(strict=strict, error_messages={**REQUIRED, "invalid": "must be an integer"}, **kwargs)


class UnreadableNumber:
    """A JSON integer of more digits than Python reads as a number (sys.get_int_max_str_digits(), 4300 by default),
    which made the whole body unreadable: read_json puts this in its place, and the field it is in judges it."""

    def __init__(self, negative):
        self.negative = negative


def read_json(body):
    """The JSON value of a request body (bytes), or None when it is not JSON; its unreadable integers are
    UnreadableNumbers, so that the answer can name their field."""
    def parse_int(digits):
        try:
            return int(digits)
        except ValueError:
            return UnreadableNumber(digits.startswith("-"))

    try:
        return json.loads(body, parse_int=parse_int)
    except ValueError:
        return None


class _Size(fields.Integer):
    """A size in bytes (a strict integer). An UnreadableNumber is None when positive, a size that breaks every limit
    (domain.uploads.check_size answers it with the 413 of any size over the limit), and -1 when negative, which
    is refused as every size under 1."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, UnreadableNumber):
            return -1 if value.negative else None
        return super()._deserialize(value, attr, data, **kwargs)


class _Strict(Schema):
    error_messages = {"unknown": "unknown field", "type": "must be a JSON object"}


class StreamCreateSchema(_Strict):
    destinationId = _string(required=True)
    fileName = _string(required=True, validate=validate.Length(min=1, max=1000, error="must be 1 to 1000 characters"))
    fileSize = _integer(True, _Size, required=True)
    sha = _string(required=True, validate=SHA256)


class SingleUploadSchema(_Strict):
    destinationId = _string(required=True)
    sha = _string(load_default=None, validate=SHA256)


class ChunkSchema(_Strict):
    chunkIndex = _integer(False, required=True, validate=validate.Range(min=0, error="must be 0 or more"))
    totalChunks = _integer(False, required=True, validate=validate.Range(min=1, error="must be 1 or more"))
    sha = _string(load_default=None, validate=SHA256)


def load(schema, data):
    """Validated fields, or 400 whose message names every offending field."""
    try:
        return schema.load(data)
    except ValidationError as error:
        raise InvalidRequest("; ".join(_describe(error.messages))) from None


def _describe(messages, prefix=""):
    if isinstance(messages, dict):
        for field, inner in messages.items():
            name = "request body" if field == "_schema" else f"{prefix}{field}"
            yield from _describe(inner, name)
    else:
        yield f"{prefix}: {', '.join(map(str, messages))}"
