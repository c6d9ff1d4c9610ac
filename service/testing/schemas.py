"""The marshmallow schemas of the test-mode endpoints (service.testing.api), apart so that marshmallow is imported by
the first request that needs them when the app loads on first request (LOAD_ON_FIRST_REQUEST, the test double)."""
import re

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from service.storage.testmode.fault_paths import CostlyPattern, check_pattern
from service.web.uploads.schemas import characters

FAULT_KINDS = ("status", "delay", "drop", "reset")


class JsonNumber(fields.Float):
    """A JSON number; a string holding one ("0.5") is refused, where marshmallow's Float would convert it."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, (int, float)):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class FaultSchema(Schema):
    error_messages = {"unknown": "unknown field", "type": "must be a JSON object"}
    method = fields.String(load_default=None,
                           validate=validate.Regexp(r"^[A-Za-z]{1,20}$", error="must be an HTTP method"))
    # A regular expression searched in the request path: anchor it (^/uploads$) to match one route only.
    path = fields.String(load_default=".*", validate=characters)
    times = fields.Integer(strict=True, load_default=1, validate=validate.Range(min=1, max=10_000))
    status = fields.Integer(strict=True, validate=validate.Range(min=400, max=599))
    error = fields.String(validate=[characters, validate.Length(max=1000)])
    delay = fields.Float(validate=validate.Range(min=0, max=60, min_inclusive=False))
    drop = fields.Boolean(validate=validate.Equal(True, error="must be true when given"))
    # The connection is closed before any work is done: the client gets no answer at all.
    reset = fields.Boolean(validate=validate.Equal(True, error="must be true when given"))
    # Each matching request fails with this probability (seeded by WIS_TEST_SEED when set); `times` counts failures.
    rate = JsonNumber(error_messages={"invalid": "must be a number from 0 to 1"},
                      validate=validate.Range(min=0, max=1, error="must be a number from 0 to 1"))

    @validates_schema
    def one_kind(self, data, **kwargs):
        try:
            check_pattern(data["path"])
        except re.error as exc:
            raise ValidationError(f"not a regular expression: {exc}", "path") from None
        except CostlyPattern as exc:
            raise ValidationError(f"not accepted: {exc}", "path") from None
        given = [kind for kind in FAULT_KINDS if kind in data]
        if len(given) != 1:
            raise ValidationError(f"give exactly one of {', '.join(FAULT_KINDS)}; got {len(given)}")
        if "error" in data and "status" not in data:
            raise ValidationError("only a status fault has an error message", "error")


class JournalQuerySchema(Schema):
    error_messages = {"unknown": "unknown parameter"}
    since = fields.Integer(load_default=0, error_messages={"invalid": "must be a whole number: the seq of the last "
                                                                      "entry you have (0 for all)"},
                           validate=validate.Range(min=0, error="must be 0 or more"))
