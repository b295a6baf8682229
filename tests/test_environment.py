"""No setting is silently ignored: a real ``mapapi`` process per case.

A ``MAPAPI_*`` name that is no setting, a value with an inline comment and
a database password written with ``@ / # :`` each stop every command in one
line, exit 2, before anything starts (the check runs before any heavy
import, so each case costs a fraction of a second). The registry
(``config.ACCEPTS``) is checked against every name the code and the docs use.
"""

import re
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from mapapi import cli, config

from . import backends
from .helpers import ServeProcess, free_port
from .test_settings import clean_env, refused_line, run

ROOT = Path(__file__).resolve().parent.parent
#: Every command line a case may use; the check comes before any of them runs.
#: (``serve`` gets a free port: ``command_line``.)
COMMANDS = [
    ["serve"],
    ["worker"],
    ["accounts", "list"],
    ["keys", "create", "ada@example.com", "--name", "ci"],
    ["db", "upgrade"],
    ["events", "sweep"],
    ["mcp"],
]
SETTINGS = sorted(config.ACCEPTS)


def command_line(command: list[str]) -> list[str]:
    return [*command, "--port", str(free_port())] if command == ["serve"] else command


def misspelt(name: str) -> str:
    """``name`` without the middle letter of its part after ``MAPAPI_``."""
    tail = name.removeprefix("MAPAPI_")
    middle = len(tail) // 2
    return "MAPAPI_" + tail[:middle] + tail[middle + 1 :]


def nothing_started(tmp_path: Path) -> None:
    assert not (tmp_path / "instance").exists()


@pytest.mark.parametrize("number, name", list(enumerate(SETTINGS)))
def test_each_setting_misspelt_by_one_letter_names_the_setting_meant(tmp_path, number, name):
    command = command_line(COMMANDS[number % len(COMMANDS)])
    wrong = misspelt(name)
    line = refused_line(run(tmp_path, clean_env(tmp_path, **{wrong: "1"}), *command))
    assert line == f"Error: {wrong} is not a setting; did you mean {name}?", line
    nothing_started(tmp_path)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_an_unknown_name_stops_every_command(tmp_path, command):
    env = clean_env(tmp_path, MAPAPI_DATABSE_URL="postgresql+psycopg://u@db/mapapi")
    line = refused_line(run(tmp_path, env, *command_line(command)))
    assert line == "Error: MAPAPI_DATABSE_URL is not a setting; did you mean MAPAPI_DATABASE_URL?"
    nothing_started(tmp_path)


@pytest.mark.parametrize("name", ["mapapi_bootstrap", "MAPAPI_NOT_A_SETTING", "MAPAPI_"])
def test_any_name_starting_with_mapapi_in_any_case_is_checked(tmp_path, name):
    line = refused_line(run(tmp_path, clean_env(tmp_path, **{name: "0"}), "accounts", "list"))
    assert line.startswith(f"Error: {name} is not a setting; did you mean MAPAPI_"), line


@pytest.mark.parametrize("number, name", list(enumerate(SETTINGS)))
def test_every_setting_refuses_an_inline_comment(tmp_path, number, name):
    command = command_line(COMMANDS[number % len(COMMANDS)])
    line = refused_line(run(tmp_path, clean_env(tmp_path, **{name: "on # note"}), *command))
    accepts, secret = config.ACCEPTS[name]
    assert line.startswith(f"Error: {name}"), line
    assert "inline comment" in line and accepts in line, line
    assert ("on # note" in line) is not secret, line  # a key is never shown
    nothing_started(tmp_path)


@pytest.mark.parametrize("value", ["#", "# all of it", "x\t# tab"])
def test_a_comment_is_refused_wherever_it_starts(tmp_path, value):
    line = refused_line(run(tmp_path, clean_env(tmp_path, MAPAPI_BOOTSTRAP=value), "serve"))
    assert "MAPAPI_BOOTSTRAP" in line and "inline comment" in line, line


def test_a_hash_inside_a_value_is_no_comment(tmp_path):
    password = "p#ss"  # noqa: S105 - a password of the test's own
    url = f"postgresql+psycopg://mapapi:{password}@127.0.0.1:{free_port()}/mapapi"
    line = refused_line(
        run(tmp_path, clean_env(tmp_path, MAPAPI_DATABASE_URL=url), "accounts", "list")
    )
    assert "cannot be reached" in line and "inline comment" not in line, line


#: A password with every character a URL reserves; no three characters of
#: it in a row may be shown.
PASSWORD = "Zq@Xv/Wk#Jm:Yp"  # noqa: S105


def shows_part_of(text: str, password: str) -> list[str]:
    return [password[i : i + 3] for i in range(len(password) - 2) if password[i : i + 3] in text]


@pytest.mark.parametrize("command", [COMMANDS[0], COMMANDS[1], COMMANDS[2], COMMANDS[4]], ids=str)
def test_a_password_written_with_reserved_characters_is_never_shown(tmp_path, command):
    url = f"postgresql+psycopg://mapapi:{PASSWORD}@127.0.0.1:{free_port()}/mapapi"
    result = run(tmp_path, clean_env(tmp_path, MAPAPI_DATABASE_URL=url), *command_line(command))
    line = refused_line(result)
    assert "MAPAPI_DATABASE_URL" in line and "%40" in line, line  # how to write it
    assert shows_part_of(result.stderr, PASSWORD) == [], result.stderr


@pytest.mark.parametrize("command", [COMMANDS[0], COMMANDS[2]], ids=str)
def test_a_percent_encoded_password_is_hidden_when_the_database_does_not_answer(tmp_path, command):
    encoded = "Zq%40Xv%2FWk%23Jm%3AYp"
    port = free_port()
    url = f"postgresql+psycopg://mapapi:{encoded}@127.0.0.1:{port}/mapapi"
    result = run(tmp_path, clean_env(tmp_path, MAPAPI_DATABASE_URL=url), *command_line(command))
    line = refused_line(result)
    assert f"postgresql+psycopg://mapapi:***@127.0.0.1:{port}/mapapi" in line, line
    assert shows_part_of(result.stderr, PASSWORD) == [] and "%40" not in result.stderr


def test_help_and_version_need_no_settings(tmp_path):
    env = clean_env(tmp_path, MAPAPI_DATABSE_URL="x", MAPAPI_BOOTSTRAP="1 # on")
    for arguments in [["--help"], ["--version"], ["keys", "--help"]]:
        result = run(tmp_path, env, *arguments)
        assert result.returncode == 0 and result.stderr == "", (arguments, result.stderr)


def test_the_test_suite_s_own_variables_are_known(tmp_path):
    env = clean_env(tmp_path, **dict.fromkeys(config.TEST_SUITE_VARIABLES, "x # any"))
    result = run(tmp_path, env, "accounts", "list")
    assert result.returncode == 1 and "There is no database file" in result.stderr, result.stderr


def test_the_registry_names_each_setting_once():
    names = [setting.env for setting in (*config.SETTINGS, *config.COMMAND_SETTINGS)]
    assert len(names) == len(set(names))
    assert not set(names) & config.TEST_SUITE_VARIABLES


def walk(command, found: set) -> set:
    for parameter in command.params:
        if parameter.envvar:
            found.add(parameter.envvar)
    for child in getattr(command, "commands", {}).values():
        walk(child, found)
    return found


def test_every_variable_an_option_reads_is_a_setting():
    read = set()
    for name in cli.COMMANDS:
        walk(cli.load(name), read)
    assert {"MAPAPI_HOST", "MAPAPI_PORT", "MAPAPI_THREADS", "MAPAPI_URL"} <= read
    assert read <= set(config.ACCEPTS)


MENTIONED = re.compile(r"\bMAPAPI_[A-Z0-9]+(?:_[A-Z0-9]+)*\b")
QUOTED_REFUSAL = re.compile(r"MAPAPI_\w+ is not a setting")


@pytest.mark.parametrize(
    "folder, pattern",
    [("mapapi", "**/*.py"), ("docs", "*.md"), (".", "README.md"), ("benchmarks", "**/*.py"),
     ("tests", "*.py")],
)  # fmt: skip
def test_every_name_the_code_and_the_docs_use_is_a_setting(folder, pattern):
    known = set(config.ACCEPTS) | config.TEST_SUITE_VARIABLES
    written = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in (ROOT / folder).glob(pattern)
        # The refusal quoted as an example names a misspelling on purpose.
        for name in MENTIONED.findall(QUOTED_REFUSAL.sub("", path.read_text()))
    }
    # This file's own misspellings, and the prefix itself, are meant.
    unknown = {
        (path, name)
        for path, name in written
        if name not in known and path != "tests/test_environment.py"
    }
    assert unknown == set()


def test_serve_s_log_never_shows_a_password_with_reserved_characters(tmp_path, postgres_server):
    database = backends.create_postgres_database()
    # Trust authentication ignores the password: the server starts, and logs it hidden.
    url = make_url(database).set(password=PASSWORD).render_as_string(hide_password=False)
    assert "%40" in url  # SQLAlchemy writes it percent-encoded, as the docs ask
    server = ServeProcess(clean_env(tmp_path, MAPAPI_DATABASE_URL=url, MAPAPI_BOOTSTRAP="0"),
                          tmp_path, "secret")  # fmt: skip
    try:
        server.wait_until_up()
    finally:
        server.stop()
        backends.drop_postgres_database(database)
    log = server.stderr()
    assert "database postgresql+psycopg://postgres:***@" in log, log
    assert shows_part_of(log, PASSWORD) == [] and "%40" not in log, log
