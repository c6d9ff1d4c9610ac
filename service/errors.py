"""The one exception family of the service.

Each error carries the HTTP status and a message a person can act on; one handler
(service.error_handlers) turns them into JSON `{"error": message}`. Nothing here imports Flask, so the
domain and storage layers raise these freely.
"""
from service.interface import TOKEN_HEADER


class ConfigurationError(Exception):
    """A setting, the schema or a packaged file is unusable: the service cannot start. Only entry points (`wis`, the
    gunicorn config) turn it into a message and an exit code; an embedding test harness gets the exception."""


class ServiceError(Exception):
    status = 500
    message = "internal server error"

    def __init__(self, message=None):
        super().__init__(message or self.message)
        if message is not None:
            self.message = message


class BadRequest(ServiceError):
    status = 400
    message = "bad request"


class Unauthorized(ServiceError):
    status = 401
    message = f"missing or unknown API token: send it in the {TOKEN_HEADER} header"


class NotFound(ServiceError):
    status = 404
    message = "not found"


class PayloadTooLarge(ServiceError):
    status = 413
    message = "request body is too large"


class StorageFull(ServiceError):
    status = 507
    message = "the server has no space left to store this request; nothing was stored"


class StorageFailed(ServiceError):
    status = 503
    message = ("the server's storage failed (I/O error) while handling this request; "
               "it did not take effect, try again later")
