"""The ``mapapi`` command: accounts, keys, and the first-run bootstrap of ``serve``."""

import os
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import requests

from .factories import ApiClient, create_key, error_code
from .helpers import ServeProcess

BIN = Path(sys.executable).parent
FUTURE = "2999-01-01T00:00:00Z"
PAST = "2000-01-01T00:00:00Z"


def assert_fails(result, *words):
    """Exit status 1, nothing on stdout, one line on stderr (mentioning ``words``)."""
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word.lower() in lines[0].lower(), lines[0]


def assert_ok(result):
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr, result.exception)


def create_account(runner, email, *options):
    result = runner.invoke(args=["accounts", "create", email, *options])
    assert_ok(result)
    return result.stdout.strip()


def create_cli_key(runner, email, name="cli", *options):
    result = runner.invoke(args=["keys", "create", email, "--name", name, *options])
    assert_ok(result)
    return result.stdout.strip()


def key_lines(runner, email):
    result = runner.invoke(args=["keys", "list", email])
    assert_ok(result)
    assert result.stderr == ""
    return [line.split("\t") for line in result.stdout.splitlines()]


def key_id_of(client, secret):
    """The id of ``secret``'s key, read through the API with the key itself."""
    listed = ApiClient(client, secret).get("/keys?pageSize=100")
    assert listed.status_code == 200, listed.get_json()
    (record,) = [k for k in listed.get_json()["data"]["keys"] if k["prefix"] == secret[:12]]
    return record["id"]


# --- accounts create ---------------------------------------------------------


def test_accounts_create_prints_only_the_new_account_id(runner, client):
    result = runner.invoke(args=["accounts", "create", "ada@example.com"])
    assert_ok(result)
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].strip()
    account_id = lines[0]
    # The printed id is the one the API reports as the owner of a map.
    secret = create_cli_key(runner, "ada@example.com")
    created = ApiClient(client, secret).post("/maps", json={"title": "Ada's"})
    assert created.status_code == 201, created.get_json()
    assert created.get_json()["data"]["userId"] == account_id


def test_accounts_create_defaults_to_the_pro_plan(runner, client):
    create_account(runner, "ada@example.com")
    secret = create_cli_key(runner, "ada@example.com")
    response = ApiClient(client, secret).get("/maps")
    assert response.status_code == 200, response.get_json()
    (line,) = runner.invoke(args=["accounts", "list"]).stdout.splitlines()
    assert line.split("\t")[1:] == ["ada@example.com", "pro", "-"]


def test_accounts_create_with_free_plan_cannot_use_the_api(runner, client):
    create_account(runner, "ada@example.com", "--plan", "free")
    secret = create_cli_key(runner, "ada@example.com")
    response = ApiClient(client, secret).get("/maps")
    assert response.status_code == 403
    assert error_code(response) == "PRO_SUBSCRIPTION_REQUIRED"


def test_accounts_create_with_future_until_keeps_pro_until_then(runner, client):
    create_account(runner, "ada@example.com", "--plan", "pro", "--until", "2999-01-01T02:00:00+02:00")
    secret = create_cli_key(runner, "ada@example.com")
    assert ApiClient(client, secret).get("/maps").status_code == 200
    (line,) = runner.invoke(args=["accounts", "list"]).stdout.splitlines()
    assert line.split("\t")[1:] == ["ada@example.com", "pro", "2999-01-01T00:00:00.000Z"]


def test_accounts_create_refuses_a_duplicate_email(runner, account):
    assert_fails(runner.invoke(args=["accounts", "create", "owner@example.com"]))
    lines = runner.invoke(args=["accounts", "list"]).stdout.splitlines()
    assert len(lines) == 1


@pytest.mark.parametrize("email", ["not-an-email", "two words@example.com", ""])
def test_accounts_create_refuses_a_malformed_email(runner, email):
    assert_fails(runner.invoke(args=["accounts", "create", email]))
    assert runner.invoke(args=["accounts", "list"]).stdout == ""


def test_accounts_create_refuses_an_unknown_plan(runner):
    assert_fails(runner.invoke(args=["accounts", "create", "ada@example.com", "--plan", "gold"]))
    assert runner.invoke(args=["accounts", "list"]).stdout == ""


@pytest.mark.parametrize("until", ["tomorrow", "2027-13-01T00:00:00Z", "2027-01-01", PAST])
def test_accounts_create_refuses_a_malformed_or_past_until(runner, until):
    result = runner.invoke(args=["accounts", "create", "ada@example.com", "--until", until])
    assert_fails(result, "--until")
    assert runner.invoke(args=["accounts", "list"]).stdout == ""


# --- accounts set-plan -------------------------------------------------------


def test_set_plan_switches_an_account_between_free_and_pro(runner, client):
    create_account(runner, "ada@example.com", "--plan", "free")
    ada = ApiClient(client, create_cli_key(runner, "ada@example.com"))
    refused = ada.get("/maps")
    assert refused.status_code == 403 and error_code(refused) == "PRO_SUBSCRIPTION_REQUIRED"

    assert_ok(runner.invoke(args=["accounts", "set-plan", "ada@example.com", "pro"]))
    allowed = ada.get("/maps")
    assert allowed.status_code == 200, allowed.get_json()

    assert_ok(runner.invoke(args=["accounts", "set-plan", "ada@example.com", "free"]))
    refused = ada.get("/maps")
    assert refused.status_code == 403 and error_code(refused) == "PRO_SUBSCRIPTION_REQUIRED"


def test_set_plan_with_until_records_the_end_of_the_plan(runner, client, account, key):
    result = runner.invoke(args=["accounts", "set-plan", "owner@example.com", "pro", "--until", FUTURE])
    assert_ok(result)
    (line,) = runner.invoke(args=["accounts", "list"]).stdout.splitlines()
    assert line.split("\t") == [account, "owner@example.com", "pro", "2999-01-01T00:00:00.000Z"]
    assert ApiClient(client, key).get("/maps").status_code == 200


def test_set_plan_refuses_an_unknown_email(runner, account):
    assert_fails(runner.invoke(args=["accounts", "set-plan", "nobody@example.com", "pro"]))


def test_set_plan_refuses_an_unknown_plan_and_changes_nothing(runner, client, key):
    assert_fails(runner.invoke(args=["accounts", "set-plan", "owner@example.com", "enterprise"]))
    assert ApiClient(client, key).get("/maps").status_code == 200


@pytest.mark.parametrize("until", ["soon", PAST])
def test_set_plan_refuses_a_malformed_or_past_until(runner, client, key, until):
    result = runner.invoke(args=["accounts", "set-plan", "owner@example.com", "pro", "--until", until])
    assert_fails(result, "--until")
    (line,) = runner.invoke(args=["accounts", "list"]).stdout.splitlines()
    assert line.split("\t")[2:] == ["pro", "-"]


# --- accounts list -----------------------------------------------------------


def test_accounts_list_prints_one_line_per_account(runner, account):
    ada = create_account(runner, "ada@example.com", "--plan", "free")
    bob = create_account(runner, "bob@example.com")
    result = runner.invoke(args=["accounts", "list"])
    assert_ok(result)
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    assert lines == [
        [account, "owner@example.com", "pro", "-"],
        [ada, "ada@example.com", "free", "-"],
        [bob, "bob@example.com", "pro", "-"],
    ]


def test_accounts_list_on_an_empty_database_prints_nothing(runner):
    result = runner.invoke(args=["accounts", "list"])
    assert_ok(result)
    assert result.stdout == ""


# --- keys create -------------------------------------------------------------


def test_keys_create_prints_only_a_working_read_write_secret(runner, client, account):
    result = runner.invoke(args=["keys", "create", "owner@example.com", "--name", "ci"])
    assert_ok(result)
    assert result.stdout.count("\n") == 1 and result.stdout.endswith("\n")
    secret = result.stdout[:-1]
    assert secret.startswith("mk_live_") and len(secret) >= len("mk_live_") + 32
    assert all(c.isascii() and (c.isalnum() or c in "-_") for c in secret)

    caller = ApiClient(client, secret)
    created = caller.post("/maps", json={"title": "From the CLI"})
    assert created.status_code == 201, created.get_json()
    listed = caller.get("/keys").get_json()["data"]["keys"]
    (record,) = listed
    assert record["name"] == "ci" and record["scope"] == "READ_WRITE"
    assert record["status"] == "active" and record["expiresAt"] is None
    assert record["prefix"] == secret[:12]


def test_keys_create_read_only_key_cannot_write(runner, client, account):
    secret = create_cli_key(runner, "owner@example.com", "reader", "--scope", "READ_ONLY")
    reader = ApiClient(client, secret)
    assert reader.get("/maps").status_code == 200
    refused = reader.post("/maps", json={"title": "Nope"})
    assert refused.status_code == 403 and error_code(refused) == "INSUFFICIENT_SCOPE"
    (record,) = reader.get("/keys").get_json()["data"]["keys"]
    assert record["scope"] == "READ_ONLY"


def test_keys_create_with_future_expiry_records_it(runner, client, account):
    secret = create_cli_key(runner, "owner@example.com", "temp", "--expires-at", "2999-06-30T12:00:00Z")
    response = ApiClient(client, secret).get("/keys")
    assert response.status_code == 200
    (record,) = response.get_json()["data"]["keys"]
    assert record["expiresAt"] == "2999-06-30T12:00:00.000Z" and record["status"] == "active"


@pytest.mark.parametrize("scope", ["ADMIN", "read_only", ""])
def test_keys_create_refuses_a_bad_scope(runner, account, scope):
    result = runner.invoke(args=["keys", "create", "owner@example.com", "--name", "x", "--scope", scope])
    assert_fails(result)
    assert key_lines(runner, "owner@example.com") == []


def test_keys_create_refuses_an_unknown_email(runner, account):
    assert_fails(runner.invoke(args=["keys", "create", "nobody@example.com", "--name", "x"]))


@pytest.mark.parametrize("expires_at", ["next week", "2027-02-30T00:00:00Z", PAST])
def test_keys_create_refuses_a_malformed_or_past_expiry(runner, account, expires_at):
    result = runner.invoke(
        args=["keys", "create", "owner@example.com", "--name", "x", "--expires-at", expires_at]
    )
    assert_fails(result, "--expires-at")
    assert key_lines(runner, "owner@example.com") == []


def test_keys_create_refuses_an_eleventh_active_key(runner, app, client, account, key):
    # An expired key does not count against the ten.
    create_key(app, "owner@example.com", expires_at=datetime(2001, 1, 1), name="old")
    for number in range(9):
        create_cli_key(runner, "owner@example.com", f"k{number}")
    assert_fails(runner.invoke(args=["keys", "create", "owner@example.com", "--name", "eleventh"]))
    lines = key_lines(runner, "owner@example.com")
    assert [line[3] for line in lines].count("active") == 10
    assert len(lines) == 11

    # A revoked key frees a place.
    assert_ok(runner.invoke(args=["keys", "revoke", key_id_of(client, key)]))
    create_cli_key(runner, "owner@example.com", "replacement")


def test_keys_create_counts_keys_made_through_the_api(runner, api):
    for number in range(9):
        made = api.post("/keys", json={"name": f"api{number}", "scope": "READ_ONLY"})
        assert made.status_code == 201, made.get_json()
    assert_fails(runner.invoke(args=["keys", "create", "owner@example.com", "--name", "eleventh"]))
    refused = api.post("/keys", json={"name": "again", "scope": "READ_ONLY"})
    assert refused.status_code == 409 and error_code(refused) == "CONFLICT"


# --- keys list ---------------------------------------------------------------


def test_keys_list_shows_active_and_expired_keys_but_not_revoked_ones(runner, app, client, account):
    plain = create_cli_key(runner, "owner@example.com", "plain")
    reader = create_cli_key(
        runner, "owner@example.com", "reader", "--scope", "READ_ONLY", "--expires-at", FUTURE
    )
    expired = create_key(app, "owner@example.com", "READ_ONLY", datetime(2001, 2, 3, 4, 5, 6), "old")
    gone = create_cli_key(runner, "owner@example.com", "gone")
    ids = {secret: key_id_of(client, secret) for secret in (plain, reader, gone)}
    assert_ok(runner.invoke(args=["keys", "revoke", ids[gone]]))

    lines = key_lines(runner, "owner@example.com")
    assert len(lines) == 3
    by_name = {line[1]: line for line in lines}
    assert set(by_name) == {"plain", "reader", "old"}
    assert by_name["plain"] == [ids[plain], "plain", "READ_WRITE", "active", plain[:12], "-"]
    assert by_name["reader"] == [
        ids[reader], "reader", "READ_ONLY", "active", reader[:12], "2999-01-01T00:00:00.000Z"
    ]
    old = by_name["old"]
    assert old[1:4] == ["old", "READ_ONLY", "expired"]
    assert old[4] == expired[:12] and old[5] == "2001-02-03T04:05:06.000Z"
    assert all(gone[:12] not in line for line in lines)


def test_keys_list_keeps_one_line_and_six_fields_whatever_the_name(runner, api, account):
    """A name made through the API may hold any character, line breaks included."""
    name = "two\nlines\tand\u2028more\x85end\\n"
    made = api.created("/keys", {"name": name, "scope": "READ_ONLY"})
    lines = key_lines(runner, "owner@example.com")
    assert len(lines) == 2 and all(len(line) == 6 for line in lines), lines
    (line,) = [line for line in lines if line[0] == made["id"]]
    # The escapes are unambiguous: the name's own backslash is doubled.
    assert line[1] == "two\\nlines\\tand\\u2028more\\x85end\\\\n"
    assert line[1].encode("ascii").decode("unicode_escape") == name


def test_keys_list_of_an_account_without_keys_prints_nothing(runner, account):
    assert key_lines(runner, "owner@example.com") == []


def test_keys_list_refuses_an_unknown_email(runner, account):
    assert_fails(runner.invoke(args=["keys", "list", "nobody@example.com"]))


# --- keys revoke -------------------------------------------------------------


def test_keys_revoke_makes_the_key_invalid_at_once(runner, client, account, key):
    other = create_cli_key(runner, "owner@example.com", "other")
    key_id = key_id_of(client, other)
    assert_ok(runner.invoke(args=["keys", "revoke", key_id]))

    refused = ApiClient(client, other).get("/maps")
    assert refused.status_code == 401 and error_code(refused) == "INVALID_API_KEY"
    listed = ApiClient(client, key).get("/keys").get_json()["data"]["keys"]
    assert [k["id"] for k in listed] == [key_id_of(client, key)]
    assert [line[0] for line in key_lines(runner, "owner@example.com")] == [listed[0]["id"]]


def test_keys_revoke_refuses_an_unknown_key_id(runner, account, key):
    assert_fails(runner.invoke(args=["keys", "revoke", "no-such-key-id"]))
    assert len(key_lines(runner, "owner@example.com")) == 1


def test_keys_revoke_refuses_an_already_revoked_key(runner, client, account, key):
    key_id = key_id_of(client, key)
    assert_ok(runner.invoke(args=["keys", "revoke", key_id]))
    assert_fails(runner.invoke(args=["keys", "revoke", key_id]))


# --- the installed console script --------------------------------------------


def command_env(tmp_path, **extra) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MAPAPI_")}
    env["MAPAPI_DATABASE_URL"] = f"sqlite:///{tmp_path / 'x.sqlite3'}"
    env["MAPAPI_INSTANCE_PATH"] = str(tmp_path / "instance")
    env.update(extra)
    return env


def run_command(tmp_path, env, *args, program="mapapi"):
    return subprocess.run(
        [str(BIN / program), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def serve_once(tmp_path, env, run_name, check=None) -> str:
    """Start the server, wait for it, run ``check(server)``, stop it; its stdout."""
    server = ServeProcess(env, tmp_path, run_name)
    try:
        server.wait_until_up()
        if check is not None:
            check(server)
    finally:
        server.stop()
    return server.stdout()


def account_count(tmp_path) -> int:
    with sqlite3.connect(tmp_path / "x.sqlite3") as connection:
        return connection.execute("SELECT count(*) FROM accounts").fetchone()[0]


def test_serve_on_an_empty_database_prints_one_working_key_once(tmp_path):
    env = command_env(tmp_path)
    secrets_seen = []

    def use_the_key(server):
        printed = server.stdout()
        lines = printed.splitlines()
        assert len(lines) == 1 and printed.endswith("\n"), printed
        secret = lines[0]
        assert secret.startswith("mk_live_") and len(secret) >= len("mk_live_") + 32
        headers = {"Authorization": f"Bearer {secret}"}
        created = requests.post(
            server.base + "/api/v1/maps", json={"title": "Bootstrap"}, headers=headers, timeout=5
        )
        assert created.status_code == 201, created.text
        keys = requests.get(server.base + "/api/v1/keys", headers=headers, timeout=5)
        assert keys.status_code == 200
        (record,) = keys.json()["data"]["keys"]
        assert record["scope"] == "READ_WRITE" and record["prefix"] == secret[:12]
        secrets_seen.append(secret)

    first = serve_once(tmp_path, env, "first", use_the_key)
    assert first.splitlines() == secrets_seen

    listed = run_command(tmp_path, env, "accounts", "list")
    assert listed.returncode == 0, listed.stderr
    (line,) = listed.stdout.splitlines()
    assert line.split("\t")[1:3] == ["local@localhost", "pro"]

    second = serve_once(tmp_path, env, "second")
    assert second == ""
    assert account_count(tmp_path) == 1


def test_serve_with_bootstrap_off_creates_no_account(tmp_path):
    env = command_env(tmp_path, MAPAPI_BOOTSTRAP="0")

    def nobody_can_enter(server):
        response = requests.get(server.base + "/api/v1/maps", timeout=5)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "MISSING_API_KEY"

    assert serve_once(tmp_path, env, "quiet", nobody_can_enter) == ""
    assert account_count(tmp_path) == 0


def test_keys_create_from_the_console_script_prints_only_the_secret(tmp_path):
    env = command_env(tmp_path, MAPAPI_BOOTSTRAP="0")
    serve_once(tmp_path, env, "schema")  # creates the schema
    made = run_command(tmp_path, env, "accounts", "create", "ada@example.com")
    assert made.returncode == 0, made.stderr
    assert len(made.stdout.splitlines()) == 1
    secret = run_command(tmp_path, env, "keys", "create", "ada@example.com", "--name", "ci")
    assert secret.returncode == 0, secret.stderr
    assert secret.stdout.count("\n") == 1 and secret.stdout.startswith("mk_live_")
    refused = run_command(tmp_path, env, "keys", "create", "nobody@example.com", "--name", "ci")
    assert refused.returncode == 1 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1


def test_flask_app_option_reaches_the_same_commands(tmp_path):
    env = command_env(tmp_path, MAPAPI_BOOTSTRAP="0")
    serve_once(tmp_path, env, "schema")
    made = run_command(tmp_path, env, "--app", "mapapi", "accounts", "create", "ada@example.com",
                       program="flask")
    assert made.returncode == 0, made.stderr
    listed = run_command(tmp_path, env, "accounts", "list")
    assert listed.stdout.split("\t")[0] == made.stdout.strip()


@pytest.mark.parametrize("command", [["accounts", "list"], ["accounts", "create", "a@example.com"]])
def test_commands_before_any_schema_say_so_in_one_line(tmp_path, command):
    env = command_env(tmp_path, MAPAPI_BOOTSTRAP="0")
    result = run_command(tmp_path, env, *command)
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "mapapi db upgrade" in lines[0], result.stderr


def test_db_upgrade_creates_the_schema_and_keeps_existing_data(tmp_path):
    env = command_env(tmp_path, MAPAPI_BOOTSTRAP="0")
    upgraded = run_command(tmp_path, env, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    made = run_command(tmp_path, env, "accounts", "create", "ada@example.com")
    assert made.returncode == 0, made.stderr

    again = run_command(tmp_path, env, "db", "upgrade")
    assert again.returncode == 0, again.stderr
    listed = run_command(tmp_path, env, "accounts", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split("\t")[:2] == [made.stdout.strip(), "ada@example.com"]
