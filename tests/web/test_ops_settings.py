"""The settings an operator sizes a node with (CONTRACT 13): the database pool's, the default number of workers, and
messages that name the variable actually set."""
import pytest

from service.config import MAX_DEFAULT_WORKERS, MAX_STREAM_TTL_HOURS, load_config, load_server_config
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
