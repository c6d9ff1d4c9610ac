"""The settings an operator sizes a node with (CONTRACT 13): the database pool's, the default number of workers, and
messages that name the variable actually set."""
import pytest

from service.config import (MAX_BYTES_PER_SECOND, MAX_COUNT, MAX_DEFAULT_WORKERS, MAX_RETENTION_DAYS,
                            MAX_RETRY_DELAY_SECONDS, MAX_SESSION_HOURS, MAX_STREAM_TTL_HOURS, MAX_WAIT_SECONDS,
                            ENVIRONMENT, SERVER_ENVIRONMENT, load_config, load_server_config)
from service.errors import ConfigurationError
from service.storage import database_options


def test_pool_size_wait_and_node_name_come_from_the_environment():
    config = load_config(environ={"WIS_DB_POOL_SIZE": "7", "WIS_DB_POOL_WAIT_SECONDS": "2.5",
                                  "WIS_NODE_NAME": "line-3"}, serving=False)
    assert database_options(config) == {"pool_size": 7, "pool_wait_seconds": 2.5, "node_name": "line-3",
                                        "variable": "WIS_DATABASE_URL (or DATABASE_URL)"}


@pytest.mark.parametrize("variable, value", [("WIS_DB_POOL_SIZE", "0"), ("WIS_DB_POOL_SIZE", "four"),
                                             ("WIS_DB_POOL_WAIT_SECONDS", "-1"), ("WIS_DB_POOL_WAIT_SECONDS", "nan")])
def test_a_wrong_pool_setting_is_refused_naming_its_variable(variable, value):
    with pytest.raises(ConfigurationError, match=f"invalid value for {variable}: '{value}'"):
        load_config(environ={variable: value}, serving=False)


@pytest.mark.parametrize("variable", ["DATABASE_URL", "WIS_DATABASE_URL"])
def test_messages_name_the_database_variable_that_was_set(variable):
    with pytest.raises(ConfigurationError) as refused:
        load_config(environ={variable: "postgresql://wis@127.0.0.1/wis"}, serving=False)
    message = str(refused.value)
    assert f"({variable} is set)" in message and "WIS_S3_BUCKET is required" in message
    config = load_config(environ={variable: "postgresql://wis@127.0.0.1/wis", "WIS_S3_BUCKET": "b"}, serving=False)
    assert database_options(config)["variable"] == variable


def test_the_default_workers_are_capped_so_default_nodes_fit_in_max_connections():
    workers = load_server_config(environ={})["workers"]
    assert 2 <= workers <= MAX_DEFAULT_WORKERS == 8
    assert load_server_config(environ={"WIS_WORKERS": "12"})["workers"] == 12


def test_the_webhook_settings_come_from_the_environment():
    config = load_config(environ={"WIS_WEBHOOK_TIMEOUT_SECONDS": "2.5", "WIS_WEBHOOK_RETRY_SECONDS": "1, 60,3600",
                                  "WIS_WEBHOOK_ALLOW_HTTP": "1", "WIS_WEBHOOK_ALLOW_NETS": "10.20.0.0/16, fd00::/8",
                                  "WIS_WEBHOOK_CONCURRENCY": "3"}, serving=False)
    assert (config["WEBHOOK_TIMEOUT_SECONDS"], config["WEBHOOK_RETRY_SECONDS"], config["WEBHOOK_ALLOW_HTTP"],
            config["WEBHOOK_CONCURRENCY"]) == (2.5, (1.0, 60.0, 3600.0), True, 3)
    assert [str(network) for network in config["WEBHOOK_ALLOW_NETS"]] == ["10.20.0.0/16", "fd00::/8"]


@pytest.mark.parametrize("variable, value", [
    ("WIS_WEBHOOK_TIMEOUT_SECONDS", "0"), ("WIS_WEBHOOK_RETRY_SECONDS", "5,-1"), ("WIS_WEBHOOK_RETRY_SECONDS", "soon"),
    ("WIS_WEBHOOK_ALLOW_NETS", "10.0.0.0/33"), ("WIS_WEBHOOK_ALLOW_NETS", "lan"), ("WIS_WEBHOOK_CONCURRENCY", "0")])
def test_a_wrong_webhook_setting_is_refused_naming_its_variable(variable, value):
    with pytest.raises(ConfigurationError, match=f"invalid value for {variable}: '{value}'"):
        load_config(environ={variable: value}, serving=False)


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0", "-inf", str(MAX_STREAM_TTL_HOURS + 1)])
def test_a_stream_lifetime_that_is_no_positive_number_within_a_year_is_refused(value):
    # inf and nan passed start-up and then failed every tus creation (500); -1 made expiries in the past.
    with pytest.raises(ConfigurationError, match=f"invalid value for WIS_STREAM_TTL_HOURS: '{value}' .must be a number "
                                                 f"of hours more than 0, at most {MAX_STREAM_TTL_HOURS}.$"):
        load_config(environ={"WIS_STREAM_TTL_HOURS": value}, serving=False)


@pytest.mark.parametrize("value, hours", [("0.5", 0.5), ("1e-7", 1e-7),
                                          (str(MAX_STREAM_TTL_HOURS), MAX_STREAM_TTL_HOURS)])
def test_a_stream_lifetime_within_a_year_is_taken(value, hours):
    assert load_config(environ={"WIS_STREAM_TTL_HOURS": value}, serving=False)["STREAM_TTL_HOURS"] == hours


# Each passed start-up and then failed the requests that used it: a session of 100,000,000 hours made every login a
# 500 (its cookie's expiry, year 13434, is no HTTP date); a body timeout of 1e300 s made a body arriving in two pieces
# a 500 (no struct timeval holds it).
TOO_LARGE = [
    ("WIS_SESSION_HOURS", "100000000", MAX_SESSION_HOURS), ("WIS_EVENTS_RETENTION_DAYS", "1e300", MAX_RETENTION_DAYS),
    ("WIS_WEBHOOK_TIMEOUT_SECONDS", "86401", MAX_WAIT_SECONDS), ("WIS_DB_POOL_WAIT_SECONDS", "1e300", MAX_WAIT_SECONDS),
    ("WIS_WEBHOOK_RETRY_SECONDS", "5,1e300", MAX_RETRY_DELAY_SECONDS), ("WIS_MAX_OPEN_STREAMS", "1000001", MAX_COUNT),
    ("WIS_HISTORY_REVISIONS", "10" * 20, MAX_COUNT), ("WIS_DB_POOL_SIZE", "1000001", MAX_COUNT),
    ("WIS_WEBHOOK_CONCURRENCY", "1000001", MAX_COUNT), ("WIS_EVENT_STREAMS_PER_WORKER", "1000001", MAX_COUNT),
    # Read by the server's worker (service.server.worker).
    ("WIS_REQUEST_BODY_TIMEOUT", "1e300", MAX_WAIT_SECONDS), ("WIS_REQUEST_START_TIMEOUT", "86401", MAX_WAIT_SECONDS),
    ("WIS_REQUEST_BODY_MIN_RATE", str(MAX_BYTES_PER_SECOND + 1), MAX_BYTES_PER_SECOND),
]


def load_setting(variable, value):
    """The settings `variable` is one of, read from an environment holding only it."""
    if variable in SERVER_ENVIRONMENT:
        return load_server_config(environ={variable: value})
    return load_config(environ={variable: value}, serving=False)


@pytest.mark.parametrize("variable, value, maximum", TOO_LARGE)
def test_a_duration_or_size_past_its_maximum_is_refused_naming_its_variable_and_the_maximum(variable, value, maximum):
    with pytest.raises(ConfigurationError, match=f"^invalid value for {variable}: '{value}' .must be .*at most "
                                                 f"{maximum}"):
        load_setting(variable, value)


@pytest.mark.parametrize("variable, value, maximum", TOO_LARGE)
def test_a_duration_or_size_at_its_maximum_is_taken(variable, value, maximum):
    if variable == "WIS_WEBHOOK_RETRY_SECONDS":
        assert load_setting(variable, f"5,{maximum}")["WEBHOOK_RETRY_SECONDS"] == (5, maximum)
    else:
        key = (ENVIRONMENT.get(variable) or SERVER_ENVIRONMENT[variable])[0]
        assert load_setting(variable, str(maximum))[key] == maximum


# Each passed start-up before, then listened and never answered (0 workers or connections), failed each worker's boot
# (0 threads), failed with a traceback (a port past 65535, a worker class that is none), stopped with gunicorn's
# message that does not name the variable (-1 workers, a log in a missing directory), or was taken as info.
@pytest.mark.parametrize("variable, value, accepted", [
    ("WIS_WORKERS", "0", "a whole number from 1, at most 256"), ("WIS_WORKERS", "-1", "from 1"),
    ("WIS_WORKERS", "257", "at most 256"), ("WIS_THREADS", "0", "a whole number from 1, at most 1024"),
    ("WIS_WORKER_CONNECTIONS", "0", "a whole number from 1, at most 100000"),
    ("WIS_TIMEOUT", "-1", "a whole number of seconds from 0, at most 86400"),
    ("WIS_GRACEFUL_TIMEOUT", "86401", "at most 86400"), ("WIS_KEEPALIVE", "3601", "at most 3600"),
    ("WIS_BIND", "127.0.0.1:99999", "host:port with a port from 0 to 65535"),
    ("WIS_BIND", "http://127.0.0.1:80", "unix:PATH or fd://N"),
    ("WIS_BIND", "::1:8000", "[::1]:port for IPv6"),
    ("WIS_WORKER_CLASS", "nonsense", "a gunicorn worker"), ("WIS_WORKER_CLASS", "os.path", "a gunicorn worker"),
    ("WIS_WORKER_CLASS", "service.config.load_config", "a gunicorn worker"),
    ("WIS_LOG_LEVEL", "verbose", "one of debug, info, warning, error, critical"),
    ("WIS_ERROR_LOG", "/nonexistent/x", "'-' or a file this user may write"), ("WIS_ERROR_LOG", "/", "a file"),
    ("WIS_ACCESS_LOG", "/nonexistent/x", "'-' or a file this user may write"),
])
def test_a_wrong_server_setting_is_refused_naming_its_variable_and_what_it_accepts(variable, value, accepted):
    with pytest.raises(ConfigurationError) as refused:
        load_server_config(environ={variable: value})
    message = str(refused.value)
    assert message.startswith(f"invalid value for {variable}: {value!r} (must be ") and accepted in message
    assert "\n" not in message


@pytest.mark.parametrize("variable, value, taken", [
    ("WIS_WORKERS", "256", 256), ("WIS_THREADS", "1", 1), ("WIS_WORKER_CONNECTIONS", "100000", 100_000),
    ("WIS_TIMEOUT", "0", 0), ("WIS_KEEPALIVE", "0", 0),
    ("WIS_BIND", "127.0.0.1:65535", "127.0.0.1:65535"), ("WIS_BIND", "[::1]:0", "[::1]:0"),
    ("WIS_BIND", "localhost", "localhost"), ("WIS_BIND", "unix:/run/wis.sock", "unix:/run/wis.sock"),
    ("WIS_BIND", "fd://3", "fd://3"),
    ("WIS_WORKER_CLASS", "gthread", "gthread"), ("WIS_WORKER_CLASS", "sync", "sync"),
    ("WIS_WORKER_CLASS", "service.server.worker.ReadAheadWorker", "service.server.worker.ReadAheadWorker"),
    ("WIS_LOG_LEVEL", "WARNING", "warning"), ("WIS_ERROR_LOG", "-", "-"), ("WIS_ACCESS_LOG", "off", None),
])
def test_a_server_setting_in_its_range_is_taken(variable, value, taken):
    assert load_server_config(environ={variable: value})[SERVER_ENVIRONMENT[variable][0]] == taken


def test_a_log_file_may_be_new_or_existing_in_a_writable_directory(tmp_path):
    (tmp_path / "old.log").write_text("")
    settings = load_server_config(environ={"WIS_ERROR_LOG": str(tmp_path / "new.log"),
                                           "WIS_ACCESS_LOG": str(tmp_path / "old.log")})
    assert (settings["errorlog"], settings["accesslog"]) == (str(tmp_path / "new.log"), str(tmp_path / "old.log"))
