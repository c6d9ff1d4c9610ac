"""Collecting every input problem of a request before refusing it as a whole."""
from service.domain.ids import ID_RULE, is_valid_id
from service.errors import ServiceError


class InvalidInput(ServiceError):
    """The input breaks one or more rules; `errors` is a list of (field_path, message) pairs."""
    code = "invalid_input"

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__("; ".join(f"{field}: {message}" for field, message in self.errors))


class Problems:
    """An error collector: add (field_path, message) pairs, then `raise_if_any()`."""

    def __init__(self):
        self.errors = []

    def add(self, field, message):
        self.errors.append((field, message))

    def check_id(self, field, value):
        """Record a problem unless `value` is a valid id; return whether it is valid."""
        if is_valid_id(value):
            return True
        self.add(field, f"{ID_RULE}; got {value!r}")
        return False

    def check_name(self, field, value):
        """Record a problem when a required display name is missing or blank."""
        if not isinstance(value, str) or not value.strip():
            self.add(field, "is required and must not be blank")

    def raise_if_any(self):
        if self.errors:
            raise InvalidInput(self.errors)

