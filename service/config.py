"""Configuration: defaults, then the environment, then explicit overrides (tests, embedding)."""
import os

from service.errors import ConfigurationError
from service.interface import MAX_REQUEST_BODY

DEFAULTS = {
    # Where documents, media and upload streams live.
    "DATA_DIR": "./data",
    # Raw "org:token,token2" string; parsed by service.auth.
    "API_TOKENS": "",
    "STREAM_TTL_HOURS": 24.0,
    # Largest request body accepted at all (Flask's name for it).
    "MAX_CONTENT_LENGTH": MAX_REQUEST_BODY,
    # Test mode turns on the state and fault-injection endpoints for integrators' test suites.
    "TEST_MODE": False,
    # Operators usually scrape /metrics from a private network without a token; this makes it ask for one.
    "METRICS_REQUIRE_TOKEN": False,
    # The explorer keeps headers (so the token) only in the page unless the operator allows saving them
    # in the browser's local storage: explorer PCs on a factory floor are often shared.
    "EXPLORER_PERSIST_HEADERS": False,
}

def _flag(value):
    return value.strip().lower() in {"1", "true", "yes", "on"}


ENVIRONMENT = {
    "WIS_DATA_DIR": ("DATA_DIR", str),
    "WIS_API_TOKENS": ("API_TOKENS", str),
    "WIS_STREAM_TTL_HOURS": ("STREAM_TTL_HOURS", float),
    "WIS_TEST_MODE": ("TEST_MODE", _flag),
    "WIS_METRICS_REQUIRE_TOKEN": ("METRICS_REQUIRE_TOKEN", _flag),
    "WIS_EXPLORER_PERSIST_HEADERS": ("EXPLORER_PERSIST_HEADERS", _flag),
}


def load_config(overrides=None, environ=None):
    """Return the effective configuration as a plain dict."""
    environ = os.environ if environ is None else environ
    config = dict(DEFAULTS)
    for variable, (key, parse) in ENVIRONMENT.items():
        if environ.get(variable, "") != "":
            try:
                config[key] = parse(environ[variable])
            except ValueError as exc:
                raise ConfigurationError(f"invalid value for {variable}: {environ[variable]!r} ({exc})") from None
    config.update(overrides or {})
    # Made absolute once, against the working directory at start-up: libraries resolve a relative path
    # against bases of their own (Flask's send_file against the package folder), so every store gets this.
    config["DATA_DIR"] = os.path.abspath(os.path.expanduser(str(config["DATA_DIR"])))
    return config
