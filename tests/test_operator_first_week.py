"""The operator's first week (section 8): every command checks every setting,
a Redis that cannot be reached stops ``serve``, ``mapapi config check`` (and
an environment file read as systemd reads it), and ``MAPAPI_TRUSTED_PROXIES``
under ``mapapi serve`` itself, through a real waitress."""

import json
import os
import time

import pytest
import requests

from mapapi.envfile import parse_environment

from . import backends
from .helpers import run_mapapi, served_mapapi, wait_until
from .test_settings import clean_env

FORTNIGHT = "MAPAPI_RATELIMIT_SYNC='100 per fortnight' is not accepted: it takes a rate such as"
UNREACHABLE_REDIS = "redis://127.0.0.1:9/0"


@pytest.mark.parametrize(
    "arguments",
    [["accounts", "list"], ["keys", "list", "a@example.com"], ["db", "upgrade"],
     ["sync", "x.csv", "--map", "m"], ["mcp"], ["worker"]],
    ids=" ".join,
)  # fmt: skip
def test_every_command_refuses_a_value_serve_would_refuse(tmp_path, arguments):
    env = clean_env(tmp_path, MAPAPI_RATELIMIT_SYNC="100 per fortnight", MAPAPI_KEY="mk_live_x")
    result = run_mapapi(env, tmp_path, *arguments)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert FORTNIGHT in line
    assert not (tmp_path / "instance").exists()  # nothing was made


def test_a_bad_rate_limit_storage_stops_a_command_that_does_not_use_it(tmp_path):
    env = clean_env(tmp_path, MAPAPI_RATELIMIT_STORAGE_URI="memcache://x")
    result = run_mapapi(env, tmp_path, "accounts", "list")
    assert result.returncode == 2
    assert result.stderr.startswith("Error: MAPAPI_RATELIMIT_STORAGE_URI='memcache://x' is not accepted")


def test_serve_stops_at_start_when_redis_cannot_be_reached(tmp_path):
    env = clean_env(tmp_path, MAPAPI_RATELIMIT_STORAGE_URI=UNREACHABLE_REDIS)
    result = run_mapapi(env, tmp_path, "serve", "--port", "1")  # never reached: the check comes first
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"Error: MAPAPI_RATELIMIT_STORAGE_URI: the rate-limit storage {UNREACHABLE_REDIS} cannot be reached"
    ]
    assert not (tmp_path / "instance").exists()  # no database file made


# --- mapapi config check ---------------------------------------------------------------------


def test_config_check_prints_the_settings_in_effect(tmp_path):
    (tmp_path / "instance").mkdir()
    (tmp_path / "instance" / "config.py").write_text('RATELIMIT_BULK = "7 per hour"\n')
    env = clean_env(tmp_path, MAPAPI_BOOTSTRAP="0", MAPAPI_KEY="mk_live_secret")
    if backends.on_postgres():
        env["MAPAPI_RATELIMIT_STORAGE_URI"] = backends.REDIS_URL
    result = run_mapapi(env, tmp_path, "config", "check")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    effect = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert effect["MAPAPI_BOOTSTRAP"] == "0"
    assert effect["MAPAPI_RATELIMIT_BULK"] == "7 per hour"
    assert effect["MAPAPI_RATELIMIT_SYNC"] == "100 per hour"
    assert effect["MAPAPI_DATABASE_URL"] == f"sqlite:///{tmp_path}/instance/mapapi.sqlite3"
    assert effect["MAPAPI_KEY"] == "***" and "mk_live_secret" not in result.stdout
    assert not (tmp_path / "instance" / "mapapi.sqlite3").exists()  # it writes nothing


def test_config_check_prints_every_problem_on_a_line_of_its_own(tmp_path):
    misspelt = "MAPAPI_" + "DATABSE_URL"  # written apart: no doc or code names it
    env = clean_env(
        tmp_path,
        MAPAPI_RATELIMIT_SYNC="100 per fortnight",
        MAPAPI_GZIP_MIN_BYTES="lots",
        MAPAPI_BOOTSTRAP="0 # servers",
        **{misspelt: "sqlite:///x"},
    )
    result = run_mapapi(env, tmp_path, "config", "check")
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "MAPAPI_DATABSE_URL is not a setting; did you mean MAPAPI_DATABASE_URL?"
    assert any(line.startswith("MAPAPI_BOOTSTRAP='0 # servers' is not accepted: it holds an inline comment") for line in lines)
    assert any(line.startswith(FORTNIGHT) for line in lines)
    assert any(line.startswith("MAPAPI_GZIP_MIN_BYTES='lots' is not accepted") for line in lines)


def test_config_check_reaches_the_database_and_the_storage_without_their_passwords(tmp_path):
    env = clean_env(
        tmp_path,
        MAPAPI_DATABASE_URL="postgresql+psycopg://mapapi:s3cret@127.0.0.1:9/mapapi",
        MAPAPI_RATELIMIT_STORAGE_URI="redis://:hunter2@127.0.0.1:9/0",
    )
    result = run_mapapi(env, tmp_path, "config", "check")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(
        "MAPAPI_DATABASE_URL: the database postgresql+psycopg://mapapi:***@127.0.0.1:9/mapapi cannot be reached"
    )
    assert lines[1].startswith("MAPAPI_RATELIMIT_STORAGE_URI: the rate-limit storage redis://:***@127.0.0.1:9/0 cannot be reached")
    assert "s3cret" not in result.stderr and "hunter2" not in result.stderr


ENV_FILE = """\
# /etc/mapapi/env
MAPAPI_BOOTSTRAP=0
MAPAPI_RATELIMIT_GENERAL="500 per hour"
  MAPAPI_RATELIMIT_BULK = '5 per hour'
MAPAPI_TRUSTED_PROXIES=1 # exactly one proxy
"""


def test_config_check_reads_an_env_file_as_systemd_does_and_alone(tmp_path):
    path = tmp_path / "env"
    path.write_text(ENV_FILE)
    # The caller's own variables are not the unit's: not mixed in.
    env = clean_env(tmp_path, MAPAPI_BOOTSTRAP="maybe", **{"MAPAPI_" + "NOT_A_SETTING": "1"})
    result = run_mapapi(env, tmp_path, "config", "check", "--env-file", str(path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[0] == (
        "MAPAPI_TRUSTED_PROXIES='1 # exactly one proxy' is not accepted: it holds an inline comment, "
        "which would be read as part of the value (write comments on lines of their own); it takes "
        "a whole number, 0 or more."
    )
    assert "NOT_A_SETTING" not in result.stderr and "maybe" not in result.stderr
    path.write_text(ENV_FILE.replace(" # exactly one proxy", "") + f"MAPAPI_INSTANCE_PATH={tmp_path}/unit\n")
    result = run_mapapi(env, tmp_path, "config", "check", "--env-file", str(path))
    assert result.returncode == 0, result.stderr
    effect = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert effect["MAPAPI_RATELIMIT_GENERAL"] == "500 per hour"
    assert effect["MAPAPI_RATELIMIT_BULK"] == "5 per hour"
    assert (effect["MAPAPI_TRUSTED_PROXIES"], effect["MAPAPI_BOOTSTRAP"]) == ("1", "0")


def test_the_env_file_is_read_with_systemds_rules():
    text = (
        'A=1\n# comment\n; comment too\nB="x y" \nC=v # kept\n  D = \'q " r\' \n'
        'E=joined\\\nline\nNO_EQUALS\nF="a\\"b\\\\c\\n"\nG=  inner  space  \nA=2\n'
    )
    assert parse_environment(text) == {
        "A": "2", "B": "x y", "C": "v # kept", "D": 'q " r', "E": "joinedline",
        "F": 'a"b\\c\\n', "G": "inner  space",
    }  # fmt: skip


# --- MAPAPI_TRUSTED_PROXIES under mapapi serve -------------------------------------------------


def test_trusted_proxies_under_serve_give_each_client_its_own_bucket_and_log_line(tmp_path):
    with served_mapapi(tmp_path, MAPAPI_TRUSTED_PROXIES="1", MAPAPI_RATELIMIT_GENERAL="3 per minute") as (server, _):
        def anonymous(client: str):
            return requests.get(server.base + "/api/v1/maps", headers={"X-Forwarded-For": f"198.51.100.9, {client}"}, timeout=10)

        answers = [anonymous("203.0.113.1") for _ in range(4)]
        assert [a.status_code for a in answers] == [401, 401, 401, 429]
        other = anonymous("203.0.113.2")  # behind the same proxy: a bucket of its own
        assert other.status_code == 401 and other.headers["X-RateLimit-Remaining"] == "2"

        def clients():
            lines = server.stderr_path.read_text().splitlines()
            return [json.loads(l.split("mapapi.access: ", 1)[1])["client"] for l in lines if "mapapi.access: " in l]

        assert wait_until(lambda: len(clients()) >= 5, seconds=30)
        assert clients()[-5:] == ["203.0.113.1"] * 4 + ["203.0.113.2"]


def test_db_upgrade_says_up_to_date_when_nothing_was_pending(tmp_path):
    env = clean_env(tmp_path)
    first = run_mapapi(env, tmp_path, "db", "upgrade")
    assert first.returncode == 0, first.stderr
    assert "Database schema created: " in first.stderr
    again = run_mapapi(env, tmp_path, "db", "upgrade")
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip().splitlines()[-1].startswith("Database schema up to date (revision ")
