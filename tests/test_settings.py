"""Settings and the command line, checked before anything starts, with real processes.

A bad setting, option, address or database: one line on stderr naming it
and what it accepts, exit 2, no traceback, nothing created. ``mapapi`` is
the operator's command; Flask's development commands are behind
``flask --app mapapi``.
"""

import os
import socket
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest
import requests

from mapapi import config, create_app

from . import backends
from .helpers import ServeProcess, free_port, mapapi_program


def clean_env(tmp_path: Path, **settings) -> dict:
    """The test's environment without any MAPAPI_ setting, plus ``settings``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MAPAPI_")}
    env["MAPAPI_INSTANCE_PATH"] = str(tmp_path / "instance")
    env.update(settings)
    return env


def run(tmp_path: Path, env: dict, *args, program=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [program or mapapi_program(), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def refused_line(result: subprocess.CompletedProcess, status: int = 2) -> str:
    """The one line of a refusal, after checking its status, stdout and shape."""
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


BAD_SETTINGS = [
    # (variable, value, words the line must hold)
    ("MAPAPI_BOOTSTRAP", "0 # comment", ["MAPAPI_BOOTSTRAP", "'0 # comment'", "1 0 true false yes no on off"]),
    ("MAPAPI_BOOTSTRAP", "2", ["MAPAPI_BOOTSTRAP", "1 0 true false"]),
    ("MAPAPI_BOOTSTRAP", "enabled", ["MAPAPI_BOOTSTRAP", "1 0 true false"]),
    ("MAPAPI_WEBHOOKS_ALLOW_PRIVATE", "maybe", ["MAPAPI_WEBHOOKS_ALLOW_PRIVATE", "1 0 true false"]),
    ("MAPAPI_WEBHOOKS_DELIVER", "1 # on", ["MAPAPI_WEBHOOKS_DELIVER", "1 0 true false"]),
    ("MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS", "0", ["MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS", "above 0"]),
    ("MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS", "5 days", ["MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS", "hours"]),
    ("MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS", "1e3", ["MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS", "decimal"]),
    ("MAPAPI_DATABASE_POOL_SIZE", "eight", ["MAPAPI_DATABASE_POOL_SIZE", "whole number"]),
    ("MAPAPI_DATABASE_POOL_SIZE", "0", ["MAPAPI_DATABASE_POOL_SIZE", "1 or more"]),
    ("MAPAPI_TRUSTED_PROXIES", "-1", ["MAPAPI_TRUSTED_PROXIES", "0 or more"]),
    ("MAPAPI_TRUSTED_PROXIES", "1.5", ["MAPAPI_TRUSTED_PROXIES", "whole number"]),
    ("MAPAPI_EVENTS_RETENTION_DAYS", "30d", ["MAPAPI_EVENTS_RETENTION_DAYS", "days"]),
    ("MAPAPI_IDEMPOTENCY_TTL_HOURS", "0", ["MAPAPI_IDEMPOTENCY_TTL_HOURS", "hours"]),
    ("MAPAPI_IDEMPOTENCY_LEASE_SECONDS", "1.5", ["MAPAPI_IDEMPOTENCY_LEASE_SECONDS", "seconds"]),
    ("MAPAPI_GZIP_MIN_BYTES", "1k", ["MAPAPI_GZIP_MIN_BYTES", "bytes"]),
    ("MAPAPI_RATELIMIT_GENERAL", "lots per hour", ["MAPAPI_RATELIMIT_GENERAL", "1000 per hour"]),
    ("MAPAPI_RATELIMIT_MAP_CREATE", "50 per fortnight", ["MAPAPI_RATELIMIT_MAP_CREATE", "per hour"]),
    ("MAPAPI_RATELIMIT_BULK", "0 per hour", ["MAPAPI_RATELIMIT_BULK", "at least 1"]),
    ("MAPAPI_RATELIMIT_SYNC", "100 an hour", ["MAPAPI_RATELIMIT_SYNC", "per hour"]),
    ("MAPAPI_RATELIMIT_STORAGE_URI", "memcached://127.0.0.1:11211", ["MAPAPI_RATELIMIT_STORAGE_URI", "redis://"]),
    ("MAPAPI_RATELIMIT_STORAGE_URI", "localhost:6379", ["MAPAPI_RATELIMIT_STORAGE_URI", "memory://"]),
    ("MAPAPI_CORS_ORIGINS", "https://app.example.com/", ["MAPAPI_CORS_ORIGINS", "origins"]),
    ("MAPAPI_CORS_ORIGINS", "app.example.com", ["MAPAPI_CORS_ORIGINS", "origins"]),
    ("MAPAPI_VIEW_TILES", "ftp://tiles.example.com/{z}/{x}/{y}.png", ["MAPAPI_VIEW_TILES", "none, or an http(s) tile URL template"]),
    ("MAPAPI_VIEW_TILES", "https://tiles.example.com/{z}/{x}.png # no y", ["MAPAPI_VIEW_TILES", "{z}, {x} and {y}"]),
    ("MAPAPI_DATABASE_URL", "nosuchdb://x/y", ["MAPAPI_DATABASE_URL", "postgresql+psycopg://"]),
    ("MAPAPI_DATABASE_URL", "not a url", ["MAPAPI_DATABASE_URL", "sqlite:///"]),
    ("MAPAPI_DATABASE_URL", "mysql+pymysql://u:hunter2@127.0.0.1/x", ["MAPAPI_DATABASE_URL", "not installed"]),
    ("MAPAPI_DATABASE_URL", "postgresql+psycopg2://u:hunter2@127.0.0.1/x", ["MAPAPI_DATABASE_URL", "not installed"]),
    ("MAPAPI_PUBLIC_URL", "https://maps.example.com/", ["MAPAPI_PUBLIC_URL", "no path"]),
    ("MAPAPI_PUBLIC_URL", "maps.example.com", ["MAPAPI_PUBLIC_URL", "scheme://host[:port]"]),
    ("MAPAPI_OAUTH_TOKEN_SECONDS", "1h", ["MAPAPI_OAUTH_TOKEN_SECONDS", "seconds"]),
    ("MAPAPI_OAUTH_TOKEN_SECONDS", "59", ["MAPAPI_OAUTH_TOKEN_SECONDS", "60 or more"]),
    ("MAPAPI_METRICS_ADDRESS", "9108", ["MAPAPI_METRICS_ADDRESS", "HOST:PORT"]),
    ("MAPAPI_METRICS_ADDRESS", "127.0.0.1:70000", ["MAPAPI_METRICS_ADDRESS", "HOST:PORT"]),
]  # fmt: skip


@pytest.mark.parametrize("variable, value, words", BAD_SETTINGS)
def test_a_bad_setting_is_one_line_naming_it_and_exit_2(tmp_path, variable, value, words):
    result = run(tmp_path, clean_env(tmp_path, **{variable: value}), "serve")
    line = refused_line(result)
    for word in words:
        assert word in line, line
    assert "hunter2" not in result.stderr
    assert not (tmp_path / "instance").exists()  # nothing started, nothing created


@pytest.mark.parametrize("command", [["accounts", "list"], ["db", "upgrade"]])
def test_other_commands_check_the_settings_too(tmp_path, command):
    env = clean_env(tmp_path, MAPAPI_BOOTSTRAP="0 # comment", MAPAPI_DATABASE_POOL_SIZE="8")
    assert "MAPAPI_BOOTSTRAP='0 # comment'" in refused_line(run(tmp_path, env, *command))
    assert not (tmp_path / "instance").exists()


def test_every_declared_setting_has_a_bad_value_tested():
    tested = {variable for variable, _value, _words in BAD_SETTINGS}
    assert {setting.env for setting in config.SETTINGS} <= tested


@pytest.mark.parametrize(
    "text, value",
    [(text, True) for text in ["1", "true", "TRUE", "Yes", "on", "On"]]
    + [(text, False) for text in ["0", "false", "False", "NO", "off", "OFF"]],
)
def test_booleans_take_the_eight_words_in_any_case(tmp_path, monkeypatch, text, value):
    monkeypatch.setenv("MAPAPI_BOOTSTRAP", text)
    monkeypatch.setenv("MAPAPI_WEBHOOKS_DELIVER", text)
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'x.sqlite3'}"})
    assert app.config["BOOTSTRAP"] is value
    assert app.config["WEBHOOKS_DELIVER"] is value


def test_settings_are_read_into_the_values_the_code_uses(tmp_path, monkeypatch):
    monkeypatch.setenv("MAPAPI_GZIP_MIN_BYTES", "0")
    monkeypatch.setenv("MAPAPI_CORS_ORIGINS", "https://App.example.com, http://localhost:3000")
    monkeypatch.setenv("MAPAPI_EVENTS_RETENTION_DAYS", "7")
    monkeypatch.setenv("MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS", " 0.01 ")
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'x.sqlite3'}"})
    assert app.config["GZIP_MIN_BYTES"] == 0
    assert app.config["CORS_ORIGINS"] == ("https://app.example.com", "http://localhost:3000")
    assert app.config["EVENTS_RETENTION_DAYS"] == 7
    assert app.config["IDEMPOTENCY_TTL_HOURS"] == 24
    assert app.config["WEBHOOKS_ALLOW_PRIVATE"] is False
    assert app.config["WEBHOOKS_DISABLE_AFTER_HOURS"] == 0.01


@pytest.mark.parametrize(
    "command, setting, words",
    [
        (["accounts", "list"], 'DATABASE_POOL_SIZE = "many"', ["DATABASE_POOL_SIZE='many'", "1 or more"]),
        # The rate limiter's settings are checked by the command that limits requests.
        (["serve"], 'RATELIMIT_GENERAL = "many"', ["RATELIMIT_GENERAL='many'", "per hour"]),
    ],
)  # fmt: skip
def test_a_bad_value_in_instance_config_names_its_key(tmp_path, command, setting, words):
    (tmp_path / "instance").mkdir()
    (tmp_path / "instance" / "config.py").write_text(setting + "\n")
    line = refused_line(run(tmp_path, clean_env(tmp_path), *command))
    for word in words:
        assert word in line, line
    assert not (tmp_path / "instance" / "mapapi.sqlite3").exists()


def test_a_bad_option_of_serve_is_one_line_and_exit_2(tmp_path):
    for option, value in [("--port", "http"), ("--port", "70000"), ("--threads", "0")]:
        line = refused_line(run(tmp_path, clean_env(tmp_path), "serve", option, value))
        assert option in line, line
    assert not (tmp_path / "instance").exists()


def test_a_port_in_use_is_one_line_naming_the_address(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(tmp_path, clean_env(tmp_path), "serve", "--port", str(port))
    line = refused_line(result)
    assert f"127.0.0.1:{port}" in line and "in use" in line, line
    assert not (tmp_path / "instance").exists()


def test_a_host_that_is_no_address_is_one_line(tmp_path):
    line = refused_line(run(tmp_path, clean_env(tmp_path), "serve", "--host", "no-such-host.invalid"))
    assert "--host" in line and "no-such-host.invalid" in line, line


@pytest.mark.parametrize(
    "command", [["serve", "--port", str(free_port())], ["accounts", "list"], ["db", "upgrade"]]
)
def test_a_database_that_does_not_answer_is_named_without_its_password(tmp_path, command):
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql+psycopg://mapapi:hunter2@127.0.0.1:{port}/mapapi"
    result = run(tmp_path, clean_env(tmp_path, MAPAPI_DATABASE_URL=url), *command)
    line = refused_line(result)
    assert f"postgresql+psycopg://mapapi:***@127.0.0.1:{port}/mapapi" in line, line
    assert "MAPAPI_DATABASE_URL" in line and "hunter2" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["accounts", "list"],
        ["accounts", "create", "ada@example.com"],
        ["keys", "list", "ada@example.com"],
        ["keys", "create", "ada@example.com", "--name", "ci"],
        ["keys", "revoke", "x"],
        ["db", "backup", "copy.sqlite3"],
    ],
)
def test_commands_other_than_serve_and_upgrade_never_create_a_database(tmp_path, command):
    result = run(tmp_path, clean_env(tmp_path), *command)
    line = refused_line(result, status=1)
    assert str(tmp_path / "instance" / "mapapi.sqlite3") in line, line
    assert not (tmp_path / "instance").exists()
    assert not (tmp_path / "copy.sqlite3").exists()


def test_db_upgrade_creates_the_database_where_the_settings_say(tmp_path):
    result = run(tmp_path, clean_env(tmp_path), "db", "upgrade")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "instance" / "mapapi.sqlite3").is_file()
    listed = run(tmp_path, clean_env(tmp_path), "accounts", "list")
    assert listed.returncode == 0 and listed.stdout == "", listed.stderr


def test_serve_logs_its_database_storage_and_address_once(tmp_path, redis_url):
    storage = redis_url.replace("redis://", "redis://:s3cret@", 1)
    env = clean_env(tmp_path, MAPAPI_BOOTSTRAP="0", MAPAPI_RATELIMIT_STORAGE_URI=storage)
    server = ServeProcess(env, tmp_path, "logged")
    try:
        server.wait_until_up()
        assert requests.get(server.base + "/healthz", timeout=5).status_code == 200
    finally:
        server.stop()
    log = server.stderr()
    database = f"sqlite:///{tmp_path / 'instance' / 'mapapi.sqlite3'}"
    (started,) = [line for line in log.splitlines() if "rate-limit storage" in line]
    assert f"database {database}" in started, started
    assert "rate-limit storage redis://:***@" in started and "s3cret" not in log
    assert log.count(f"http://127.0.0.1:{server.port}") == 1, log


def test_serve_hides_the_database_password_in_its_log(tmp_path, postgres_server):
    from sqlalchemy.engine import make_url

    database = backends.create_postgres_database()  # serve creates the schema in it
    url = make_url(database).set(password="hunter2")  # noqa: S106 - must never be logged
    env = clean_env(
        tmp_path, MAPAPI_BOOTSTRAP="0", MAPAPI_DATABASE_URL=url.render_as_string(hide_password=False)
    )
    # Trust authentication ignores the password: the server starts, and logs.
    port = free_port()
    process = subprocess.Popen(
        [mapapi_program(), "serve", "--port", str(port)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _out, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.terminate()
        _out, err = process.communicate(timeout=10)
    finally:
        backends.drop_postgres_database(database)
    assert "hunter2" not in err
    assert url.render_as_string(hide_password=True) in err, err


def test_version_is_mapapi_s_own(tmp_path):
    result = run(tmp_path, clean_env(tmp_path), "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"mapapi {version('mapapi')}\n"


def test_help_lists_the_operator_commands_only(tmp_path):
    result = run(tmp_path, clean_env(tmp_path, MAPAPI_BOOTSTRAP="not a boolean"), "--help")
    assert result.returncode == 0, result.stderr  # help needs no app, nor good settings
    commands = result.stdout.split("Commands:")[1].split()
    for command in ["serve", "accounts", "keys", "db"]:
        assert command in commands
    for development in ["run", "shell", "routes"]:
        assert development not in commands
    assert "--app" not in result.stdout and "--debug" not in result.stdout
    db_help = run(tmp_path, clean_env(tmp_path), "db", "--help").stdout.split("Commands:")[1]
    assert {"upgrade", "backup"} <= set(db_help.split())
    assert not {"migrate", "revision", "downgrade"} & set(db_help.split())


@pytest.mark.parametrize("command", [["routes"], ["shell"], ["run"], ["db", "migrate"]])
def test_flask_development_commands_are_only_behind_flask(tmp_path, command):
    line = refused_line(run(tmp_path, clean_env(tmp_path), *command))
    assert "No such command" in line, line


def test_flask_app_mapapi_keeps_the_development_commands(tmp_path):
    flask = str(Path(mapapi_program()).with_name("flask"))
    env = clean_env(tmp_path, MAPAPI_DATABASE_URL=f"sqlite:///{tmp_path / 'dev.sqlite3'}")
    routes = run(tmp_path, env, "--app", "mapapi", "routes", program=flask)
    assert routes.returncode == 0, routes.stderr
    assert "/api/v1/maps" in routes.stdout
    db_help = run(tmp_path, env, "--app", "mapapi", "db", "--help", program=flask)
    assert {"migrate", "revision", "upgrade", "backup"} <= set(db_help.stdout.split())
