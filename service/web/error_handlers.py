"""The one place that turns every error into a JSON body; no HTML page or traceback leaves the server."""
import logging

from flask import jsonify
from werkzeug.exceptions import HTTPException

from service.errors import ServiceError, http_status
from service.web.observability import count_engine_error

log = logging.getLogger(__name__)


def _json_error(status, message):
    response = jsonify(error=message)
    response.status_code = status
    return response


def service_error_response(error):
    """The answer to a ServiceError: its status and its message."""
    count_engine_error(error)
    return with_retry_after(_json_error(http_status(error), error.message), error)


def with_retry_after(response, error):
    """The response with the Retry-After a ServiceError says (when it says one)."""
    if error.retry_after is not None:
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def http_error_response(error):
    """The answer to werkzeug's HTTP errors (404 for an unknown path, 405...): its status and its description."""
    response = _json_error(error.code or 500, error.description or error.name)
    # Keep Allow on 405 so clients can see what the route does accept.
    if error.code == 405 and getattr(error, "valid_methods", None):
        response.headers["Allow"] = ", ".join(error.valid_methods)
    return response


def init_app(app):
    app.register_error_handler(ServiceError, service_error_response)
    app.register_error_handler(HTTPException, http_error_response)

    @app.errorhandler(Exception)
    def unexpected(error):
        # Logged in full on the server, never sent to the client.
        log.exception("unhandled error")
        return _json_error(500, "internal server error")
