"""Configuration: defaults, then the environment, then explicit overrides (tests, embedding)."""
import os
import re

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
    # Origins whose pages may call the service from a browser (CORS); none by default: no CORS headers at all.
    "CORS_ORIGINS": (),
}

# What a browser sends in the Origin header: scheme, host (a name, IPv4 or [IPv6]) and a port, nothing more.
_ORIGIN = re.compile(r"(https?)://(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)"
                     r"(?::([0-9]{1,5}))?")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _flag(value):
    return value.strip().lower() in {"1", "true", "yes", "on"}


def parse_origins(value):
    """Comma-separated origins (or a list of them) -> a tuple of origins written as browsers send them."""
    origins = []
    for entry in (part.strip() for part in (value.split(",") if isinstance(value, str) else value)):
        if not entry:
            continue
        # Browsers send the scheme and host in lower case and leave a default port out.
        match = _ORIGIN.fullmatch(entry.lower())
        if match is None:
            raise ValueError(f"{entry!r} is not an origin: write scheme://host[:port] with http or https, "
                             "no path (no trailing '/'), no '*'")
        scheme, host, port = match.group(1), match.group(2), match.group(6)
        if port is not None and not 1 <= int(port) <= 65535:
            raise ValueError(f"{entry!r}: port {port} is out of range")
        origin = f"{scheme}://{host}" + ("" if port in (None, _DEFAULT_PORTS[scheme]) else f":{int(port)}")
        if origin not in origins:
            origins.append(origin)
    return tuple(origins)


ENVIRONMENT = {
    "WIS_DATA_DIR": ("DATA_DIR", str),
    "WIS_API_TOKENS": ("API_TOKENS", str),
    "WIS_STREAM_TTL_HOURS": ("STREAM_TTL_HOURS", float),
    "WIS_TEST_MODE": ("TEST_MODE", _flag),
    "WIS_METRICS_REQUIRE_TOKEN": ("METRICS_REQUIRE_TOKEN", _flag),
    "WIS_EXPLORER_PERSIST_HEADERS": ("EXPLORER_PERSIST_HEADERS", _flag),
    "WIS_CORS_ORIGINS": ("CORS_ORIGINS", parse_origins),
}
# Settings whose overrides are parsed as their variable is (an embedding caller may give a string or a list).
PARSED_OVERRIDES = {"CORS_ORIGINS": "WIS_CORS_ORIGINS"}


def _parse(variable, raw):
    """The value of a setting, or a ConfigurationError naming its variable."""
    try:
        return ENVIRONMENT[variable][1](raw)
    except ValueError as exc:
        raise ConfigurationError(f"invalid value for {variable}: {raw!r} ({exc})") from None


def load_config(overrides=None, environ=None):
    """Return the effective configuration as a plain dict."""
    environ = os.environ if environ is None else environ
    overrides = overrides or {}
    config = dict(DEFAULTS)
    for variable, (key, _) in ENVIRONMENT.items():
        if environ.get(variable, "") != "":
            config[key] = _parse(variable, environ[variable])
    config.update(overrides)
    for key, variable in PARSED_OVERRIDES.items():
        if key in overrides:
            config[key] = _parse(variable, overrides[key])
    # Made absolute once, against the working directory at start-up: libraries resolve a relative path
    # against bases of their own (Flask's send_file against the package folder), so every store gets this.
    config["DATA_DIR"] = os.path.abspath(os.path.expanduser(str(config["DATA_DIR"])))
    return config
