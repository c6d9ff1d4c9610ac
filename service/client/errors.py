"""What the client raises when the service says no, or does not answer."""


class ClientError(Exception):
    """An error answered by the service (or no answer at all: `status` is None then).

    `status` is the HTTP status; GraphQL errors come with HTTP 200 and carry `code`
    (e.g. BAD_USER_INPUT) and `field`, the path of the offending input field, when the server names one, and the
    first error's whole `extensions` (a CONFLICT's `revision` or `products`).
    Mistakes of the caller (an unknown destination, a chunk size over the limit, a file of no accepted
    format) are ValueError, and local files that cannot be read are OSError: neither reached the service.
    """

    def __init__(self, status, message, field=None, code=None, extensions=None, errors=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.code = code
        self.extensions = extensions or {}
        self.errors = errors or []  # every GraphQL error as answered (`message`, `extensions`)

    @classmethod
    def of_graphql(cls, status, errors):
        """The error of a GraphQL answer's `errors` (a non-empty list): every message, the first one's field and
        code."""
        first = errors[0] if isinstance(errors[0], dict) else {}
        extensions = first.get("extensions") or {}
        message = "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors)
        return cls(status, message, field=extensions.get("field"), code=extensions.get("code"), extensions=extensions,
                   errors=errors)


class ServerUnreachable(ClientError):
    """No answer from the service after every retry allowed: connection refused or reset, or timed out."""

    def __init__(self, message):
        super().__init__(None, message)


def describe(error):
    """One line for a ClientError: the message, the field when not already named, the HTTP status."""
    message = error.message
    if error.field and error.field not in message:
        message = f"{error.field}: {message}"
    if error.status is not None and error.status >= 400:
        message += f" (HTTP {error.status})"
    return message
