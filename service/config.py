"""Configuration: defaults, then the environment, then explicit overrides (tests, embedding)."""
import importlib
import ipaddress
import os
import re

from service.errors import ConfigurationError

DEFAULTS = {
    # Where documents, media and upload streams live.
    "DATA_DIR": "./data",
    # Raw "org:token,token2" string; parsed by service.web.auth.
    "API_TOKENS": "",
    "STREAM_TTL_HOURS": 24.0,
    # Upload streams an org may have open at once (created, neither complete nor expired): each holds disk or rows
    # for up to STREAM_TTL_HOURS, and a client that creates streams and never sends them must not fill the disk.
    "MAX_OPEN_STREAMS": 1000,
    # Revisions kept in each object's history (CONTRACT 10); the oldest are pruned by the write past it; 0 keeps all.
    "HISTORY_REVISIONS": 100,
    # Days change events are kept (CONTRACT 14), pruned by the sweep; 0 keeps them all.
    "EVENTS_RETENTION_DAYS": 30.0,
    # Event streams (GET /events and GraphQL subscriptions) a worker process serves at once, each holding one of its
    # threads for as long as its client follows; None: half the worker's threads, at least 1, so that the rest keep
    # answering requests.
    "EVENT_STREAMS_PER_WORKER": None,
    # Webhooks (CONTRACT 15): how long an attempt may take before it is a failure; the delays between the attempts
    # of a delivery (10 attempts over about 3 days); whether http URLs are allowed (https only by default); the
    # networks a webhook may be sent to beside the globally routable addresses (a factory's receivers on its LAN); how
    # many attempts a worker process makes at once (each subscription has one at a time).
    "WEBHOOK_TIMEOUT_SECONDS": 10.0,
    "WEBHOOK_RETRY_SECONDS": (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 50400.0, 72000.0, 86400.0),
    "WEBHOOK_ALLOW_HTTP": False,
    "WEBHOOK_ALLOW_NETS": (),
    "WEBHOOK_CONCURRENCY": 8,
    # Test mode turns on the state and fault-injection endpoints for integrators' test suites.
    "TEST_MODE": False,
    # Test mode only: an integer that makes the names the server makes up (stream ids, media name prefixes) and the
    # draws of faults with a rate the same on every run (CONTRACT 12); None: random.
    "TEST_SEED": None,
    # Operators usually scrape /metrics from a private network without a token; this makes it ask for one.
    "METRICS_REQUIRE_TOKEN": False,
    # The explorer keeps headers (so the token) only in the page unless the operator allows saving them
    # in the browser's local storage: explorer PCs on a factory floor are often shared.
    "EXPLORER_PERSIST_HEADERS": False,
    # Origins whose pages may call the service from a browser (CORS); none by default: no CORS headers at all.
    "CORS_ORIGINS": (),
    # The shared backend (CONTRACT 8): PostgreSQL for documents, stream state and the media index, an S3 bucket for
    # the bytes. Both or neither; with neither, everything stays under DATA_DIR.
    "DATABASE_URL": None,
    # The variable DATABASE_URL came from (messages name the one the operator set), None when set otherwise.
    "DATABASE_URL_VARIABLE": None,
    # Database connections per worker process, and how long a request waits for a free one (CONTRACT 13): a node
    # holds up to workers x DB_POOL_SIZE connections.
    "DB_POOL_SIZE": 4,
    "DB_POOL_WAIT_SECONDS": 5.0,
    # How this node names itself to the database (application_name) and in logs; None: the host name.
    "NODE_NAME": None,
    "S3_BUCKET": None,
    "S3_PREFIX": "",
    # The preview pages' sessions (CONTRACT 11): the key that signs their cookies (None: one is made once and kept by
    # the storage backend, so every worker and node shares it), how long a session lasts from its login (a shift),
    # and whether the cookie is marked Secure on every answer rather than only on answers to HTTPS requests.
    "SECRET_KEY": None,
    "SESSION_HOURS": 12.0,
    "SECURE_COOKIES": False,
}

# What a browser sends in the Origin header: scheme, host (a name, IPv4 or [IPv6]) and a port, nothing more.
_ORIGIN = re.compile(r"(https?)://(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)"
                     r"(?::([0-9]{1,5}))?")
_DEFAULT_PORTS = {"http": "80", "https": "443"}

def _flag(value):
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _ranged(convert, low, high, what, above=False):
    """A parser of `what` (a number of hours, a whole number) from `low` (or, `above`, more than it) to `high`.
    The bound keeps out inf, nan and a value too large for the dates, timers and system calls it reaches, which would
    pass start-up and then fail every request that uses it."""
    def parse(value):
        number = convert(value)
        # Written so that nan fails both comparisons; inf and -inf fail one.
        if not ((number > low if above else number >= low) and number <= high):
            raise ValueError(f"must be {what} {'more than' if above else 'from'} {low}, at most {high}")
        return number
    return parse


# An upload stream holds its parts on disk (or in the bucket) until it has been idle this long: a year is longer than
# any upload worth resuming, and its expiry stays a date HTTP can carry (Upload-Expires).
MAX_STREAM_TTL_HOURS = 24 * 366
# A session cookie's expiry must be a date HTTP can carry (year 9999 at most); a year outlasts any shift.
MAX_SESSION_HOURS = 24 * 366
# Ten years of change events; 0 keeps them all for longer (a retention is an interval in the database).
MAX_RETENTION_DAYS = 3660
# A wait (a webhook attempt, a pooled connection, a request's arrival): a day is longer than any worth having, and short
# enough for every timer it reaches (SO_RCVTIMEO, poll, the database's intervals).
MAX_WAIT_SECONDS = 86400
# A delay between webhook attempts: a week, beyond the 5 days after which a failing subscription is disabled.
MAX_RETRY_DELAY_SECONDS = 7 * 86400
# Counts (open streams, revisions kept, pooled connections, concurrent attempts or event streams): a million is far
# past any use and stays a 32-bit integer wherever the database compares it.
MAX_COUNT = 1_000_000
_positive_int = _ranged(int, 1, MAX_COUNT, "a whole number")
_count = _ranged(int, 0, MAX_COUNT, "a whole number")
_days = _ranged(float, 0, MAX_RETENTION_DAYS, "a number of days")
_session_hours = _ranged(float, 0, MAX_SESSION_HOURS, "a number of hours", above=True)
_seconds = _ranged(float, 0, MAX_WAIT_SECONDS, "a number of seconds", above=True)
_stream_ttl_hours = _ranged(float, 0, MAX_STREAM_TTL_HOURS, "a number of hours", above=True)


# A key shorter than this is guessable enough to forge sessions offline.
MIN_SECRET_KEY_LENGTH = 32


def _secret_key(value):
    if len(value) < MIN_SECRET_KEY_LENGTH:
        raise ValueError(f"must be at least {MIN_SECRET_KEY_LENGTH} characters (python3 -c 'import secrets; "
                         "print(secrets.token_urlsafe(32))' makes one)")
    return value


def parse_delays(value):
    """Comma-separated seconds (or a list of them) -> a tuple of delays, each 0 or more, at least one."""
    entries = [part.strip() for part in value.split(",")] if isinstance(value, str) else list(value)
    delays = tuple(float(entry) for entry in entries if entry != "")
    if not delays or not all(0 <= delay <= MAX_RETRY_DELAY_SECONDS for delay in delays):
        raise ValueError(f"must be comma-separated seconds, each from 0, at most {MAX_RETRY_DELAY_SECONDS}, at least "
                         "one (5,300,1800)")
    return delays


def parse_networks(value):
    """Comma-separated CIDRs (or a list of them) -> a tuple of ipaddress networks."""
    entries = [part.strip() for part in value.split(",")] if isinstance(value, str) else list(value)
    try:
        return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries if entry)
    except ValueError as error:
        raise ValueError(f"must be comma-separated networks (10.0.0.0/8,fd00::/8): {error}") from None


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
    "WIS_STREAM_TTL_HOURS": ("STREAM_TTL_HOURS", _stream_ttl_hours),
    "WIS_MAX_OPEN_STREAMS": ("MAX_OPEN_STREAMS", _positive_int),
    "WIS_HISTORY_REVISIONS": ("HISTORY_REVISIONS", _count),
    "WIS_EVENTS_RETENTION_DAYS": ("EVENTS_RETENTION_DAYS", _days),
    "WIS_EVENT_STREAMS_PER_WORKER": ("EVENT_STREAMS_PER_WORKER", _positive_int),
    "WIS_WEBHOOK_TIMEOUT_SECONDS": ("WEBHOOK_TIMEOUT_SECONDS", _seconds),
    "WIS_WEBHOOK_RETRY_SECONDS": ("WEBHOOK_RETRY_SECONDS", parse_delays),
    "WIS_WEBHOOK_ALLOW_HTTP": ("WEBHOOK_ALLOW_HTTP", _flag),
    "WIS_WEBHOOK_ALLOW_NETS": ("WEBHOOK_ALLOW_NETS", parse_networks),
    "WIS_WEBHOOK_CONCURRENCY": ("WEBHOOK_CONCURRENCY", _positive_int),
    "WIS_TEST_MODE": ("TEST_MODE", _flag),
    "WIS_TEST_SEED": ("TEST_SEED", int),
    "WIS_METRICS_REQUIRE_TOKEN": ("METRICS_REQUIRE_TOKEN", _flag),
    "WIS_EXPLORER_PERSIST_HEADERS": ("EXPLORER_PERSIST_HEADERS", _flag),
    "WIS_CORS_ORIGINS": ("CORS_ORIGINS", parse_origins),
    # Procfile platforms set DATABASE_URL when a database is attached; WIS_DATABASE_URL wins (read after it).
    "DATABASE_URL": ("DATABASE_URL", str),
    "WIS_DATABASE_URL": ("DATABASE_URL", str),
    "WIS_S3_BUCKET": ("S3_BUCKET", str),
    "WIS_S3_PREFIX": ("S3_PREFIX", str),
    "WIS_DB_POOL_SIZE": ("DB_POOL_SIZE", _positive_int),
    "WIS_DB_POOL_WAIT_SECONDS": ("DB_POOL_WAIT_SECONDS", _seconds),
    "WIS_NODE_NAME": ("NODE_NAME", str),
    "WIS_SECRET_KEY": ("SECRET_KEY", _secret_key),
    "WIS_SESSION_HOURS": ("SESSION_HOURS", _session_hours),
    "WIS_SECURE_COOKIES": ("SECURE_COOKIES", _flag),
}
SECRET_VARIABLES = {"WIS_SECRET_KEY"}
# Settings whose overrides are parsed as their variable is (an embedding caller may give a string or a list).
PARSED_OVERRIDES = {"CORS_ORIGINS": "WIS_CORS_ORIGINS", "WEBHOOK_RETRY_SECONDS": "WIS_WEBHOOK_RETRY_SECONDS",
                    "WEBHOOK_ALLOW_NETS": "WIS_WEBHOOK_ALLOW_NETS"}


# A rate beyond any link's only turns the allowance for a body's size off.
MAX_BYTES_PER_SECOND = 10 ** 9
_bytes_per_second = _ranged(int, 1, MAX_BYTES_PER_SECOND, "a whole number of bytes per second")
# Gunicorn's forms of an address; a port past 65535 would pass gunicorn's parser and fail the bind with a traceback.
_BIND = re.compile(r"unix:.+|fd://[0-9]+|(\[[0-9A-Fa-f:.]+\]|[^\s\[\]:/]*)(?::([0-9]{1,5}))?")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")  # gunicorn's; it takes any other word for info


def _bind(value):
    match = _BIND.fullmatch(value)
    if match is None or int(match.group(2) or 0) > 65535:
        raise ValueError("must be host:port with a port from 0 to 65535 ([::1]:port for IPv6), unix:PATH or fd://N")
    return value


def _worker_class(value):
    # Loaded as gunicorn loads it: else a traceback in the master, or one in each worker's boot.
    from gunicorn.util import load_class
    from gunicorn.workers.base import Worker
    try:
        loaded = load_class(value, default="gthread", section="gunicorn.workers")
    except Exception:  # gunicorn wraps the import's failure, whatever it was, in a RuntimeError with its traceback
        loaded = None
    if not (isinstance(loaded, type) and issubclass(loaded, Worker)):
        raise ValueError("must be a gunicorn worker: sync, gthread, gevent (installed), or module.Class of one")
    return value


def _log_level(value):
    if value.lower() not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return value.lower()


def _log_file(value):
    # Checked here because gunicorn's own refusal is a multi-line message that does not name the variable.
    path = os.path.abspath(value)
    usable = os.access(path, os.W_OK) if os.path.exists(path) else os.access(os.path.dirname(path), os.W_OK | os.X_OK)
    if value != "-" and (os.path.isdir(path) or not usable):
        raise ValueError("must be '-' or a file this user may write, in a directory that exists")
    return value


SERVER_ENVIRONMENT = {
    "WIS_BIND": ("bind", _bind),
    "WIS_WORKER_CLASS": ("worker_class", _worker_class),
    # A worker is about 100 MB, a thread holds a stack, a connection a file descriptor; 0 listens and never answers.
    "WIS_WORKERS": ("workers", _ranged(int, 1, 256, "a whole number")),
    "WIS_THREADS": ("threads", _ranged(int, 1, 1024, "a whole number")),
    "WIS_WORKER_CONNECTIONS": ("worker_connections", _ranged(int, 1, 100_000, "a whole number")),
    "WIS_REQUEST_START_TIMEOUT": ("request_start_timeout", _seconds),
    "WIS_REQUEST_BODY_TIMEOUT": ("request_body_timeout", _seconds),
    "WIS_REQUEST_BODY_MIN_RATE": ("request_body_min_rate", _bytes_per_second),
    # Gunicorn's: 0 turns the worker timeout off, makes a graceful stop immediate, turns keep-alive off.
    "WIS_TIMEOUT": ("timeout", _ranged(int, 0, MAX_WAIT_SECONDS, "a whole number of seconds")),
    "WIS_GRACEFUL_TIMEOUT": ("graceful_timeout", _ranged(int, 0, MAX_WAIT_SECONDS, "a whole number of seconds")),
    "WIS_KEEPALIVE": ("keepalive", _ranged(int, 0, 3600, "a whole number of seconds")),
    "WIS_LOG_LEVEL": ("loglevel", _log_level),
    "WIS_ACCESS_LOG": ("accesslog", lambda value: None if value.lower() == "off" else _log_file(value)),
    "WIS_ERROR_LOG": ("errorlog", _log_file),
    "WIS_CONTROL_SOCKET": ("control_socket", str),
}


def read_environment(table, defaults, environ):
    """`defaults` with every variable of `table` that is set (and not empty) parsed in; a value that does not
    parse is a ConfigurationError naming the variable."""
    config = dict(defaults)
    for variable, (key, parse) in table.items():
        raw = environ.get(variable, "").strip()
        if raw:
            config[key] = _parse(variable, parse, raw)
            if key == "DATABASE_URL":
                config["DATABASE_URL_VARIABLE"] = variable
    return config


def _parse(variable, parse, raw):
    """The value of a setting, or a ConfigurationError naming its variable."""
    try:
        return parse(raw)
    except ValueError as exc:
        # A secret is not repeated: the message goes to logs that more people read than the secret is meant for.
        shown = "(not shown)" if variable in SECRET_VARIABLES else repr(raw)
        raise ConfigurationError(f"invalid value for {variable}: {shown} ({exc})") from None


def load_config(overrides=None, environ=None, serving=True):
    """Return the effective configuration as a plain dict. `serving=False` for the commands that work on the storage
    alone (`wis db upgrade`, `wis migrate`, `wis gc`): they answer no request, so they need no API tokens."""
    overrides = overrides or {}
    config = read_environment(ENVIRONMENT, DEFAULTS, os.environ if environ is None else environ)
    config.update(overrides)
    if "DATABASE_URL" in overrides and "DATABASE_URL_VARIABLE" not in overrides:
        config["DATABASE_URL_VARIABLE"] = None
    for key, variable in PARSED_OVERRIDES.items():
        if key in overrides:
            config[key] = _parse(variable, ENVIRONMENT[variable][1], overrides[key])
    # Made absolute once, against the working directory at start-up: libraries resolve a relative path
    # against bases of their own (Flask's send_file against the package folder), so every store gets this.
    config["DATA_DIR"] = os.path.abspath(os.path.expanduser(str(config["DATA_DIR"])))
    check_backend(config, serving)
    return config


def uses_shared_backend(config):
    return bool(config["DATABASE_URL"])


def database_url_variable(config):
    """The name to put in a message about the database URL: the variable the operator set, or both when it came from
    elsewhere (an embedding caller) or nowhere yet."""
    return config.get("DATABASE_URL_VARIABLE") or "WIS_DATABASE_URL (or DATABASE_URL)"


# What the shared backend imports, installed by the `shared` extra.
SHARED_BACKEND_MODULES = ("psycopg", "psycopg_pool", "boto3")
SHARED_BACKEND_INSTALL = "pip install 'work-instruction-service[shared]' (from a checkout: pip install '.[shared]')"


def check_backend(config, serving=True):
    """A ConfigurationError for half a shared-backend configuration, one whose packages are not installed, or one
    without tokens for a service that serves requests (an ephemeral disk keeps no default token, and every node must
    accept the same ones), or a test seed outside test mode."""
    if config["DATABASE_URL"] and not config["S3_BUCKET"]:
        raise ConfigurationError(f"WIS_S3_BUCKET is required with a database URL ({database_url_variable(config)} is "
                                 "set): media and upload bytes go to that S3 bucket")
    if config["S3_BUCKET"] and not config["DATABASE_URL"]:
        raise ConfigurationError("WIS_DATABASE_URL (or DATABASE_URL) is required with WIS_S3_BUCKET: documents, "
                                 "stream state and the media index go to that PostgreSQL database")
    if config["DATABASE_URL"] and (missing := _missing_modules(SHARED_BACKEND_MODULES)):
        raise ConfigurationError(f"the shared backend ({database_url_variable(config)} is set) needs {', '.join(missing)}, "
                                 f"not installed: {SHARED_BACKEND_INSTALL}")
    if serving and config["TEST_SEED"] is not None and not config["TEST_MODE"]:
        raise ConfigurationError("WIS_TEST_SEED is for test mode only (WIS_TEST_MODE=1): a service in production must "
                                 "not make up names anyone can predict")
    if serving and config["DATABASE_URL"] and not str(config["API_TOKENS"]).strip():
        raise ConfigurationError(f"WIS_API_TOKENS is required with the shared backend ({database_url_variable(config)} "
                                 "and WIS_S3_BUCKET are set): there is no default token on a shared or ephemeral disk")


def _missing_modules(names):
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


MAX_DEFAULT_WORKERS = 8


def load_server_config(environ=None):
    """Gunicorn's settings (by gunicorn's names) and the deadlines of the service's worker (service.server.worker) from
    the WIS_* variables; command-line flags still win."""
    environ = os.environ if environ is None else environ
    defaults = {
        # Gunicorn's own rule for PORT (Procfile hosting), else loopback: never exposed by accident.
        "bind": f"0.0.0.0:{environ['PORT']}" if environ.get("PORT") else "127.0.0.1:8000",
        # gthread, with each request received in the event loop until a thread can serve it without waiting: a
        # client that sends its request slowly, or stops, holds a file descriptor and a small buffer, not a thread.
        "worker_class": "service.server.worker.ReadAheadWorker",
        # CPUs + 1, at most MAX_DEFAULT_WORKERS: each worker holds its own database pool on the shared backend, and
        # two default nodes on 16-core hosts would otherwise need 2 x 17 x 4 = 136 connections (PostgreSQL's default
        # max_connections is 100). 8 threaded workers keep a host busy; WIS_WORKERS sets more.
        "workers": min(_cpu_count() + 1, MAX_DEFAULT_WORKERS),
        # Requests served at once per worker (uploads streaming their bodies, GraphQL queries).
        "threads": 32,
        # Connections a worker holds, arriving, served or kept alive (gunicorn's default): each costs a file
        # descriptor and, while its request arrives, at most 64 KB; with CPUs + 1 workers that is 2,000 or more.
        "worker_connections": 1000,
        # A request's head and the start of its body (64 KB, or all of a smaller body) must arrive within this long:
        # about 2 KB/s at least, then the thread's body timeout applies.
        "request_start_timeout": 30.0,
        # Once a thread serves a request, the longest wait for more of its body; and all its waits together may last
        # this long plus a second per request_body_min_rate bytes received. A slow link still uploads; a client
        # that stopped, or trickles, frees the thread (an upload keeps what arrived).
        "request_body_timeout": 60.0,
        "request_body_min_rate": 1000,
        # A 10 MB chunk at 1 Mbit/s takes about 80 s; with sync workers this is also the longest request.
        "timeout": 120,
        # On restart or SIGTERM, workers finish the uploads in flight for this long before they are killed.
        "graceful_timeout": 60,
        "keepalive": 5,
        "loglevel": "info",
        "accesslog": "-",
        "errorlog": "-",
        # Gunicorn's control socket has one default path per user: off unless a path is given, so several
        # instances (and test runs) on one host do not fight over it.
        "control_socket": None,
    }
    return read_environment(SERVER_ENVIRONMENT, defaults, environ)


def _cpu_count():
    # The CPUs this process may run on (container CPU sets), not every CPU of the host.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
