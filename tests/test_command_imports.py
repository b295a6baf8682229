"""Each ``mapapi`` command imports only what it uses (how fast they start is
measured by benchmarks/commands.py), and ``--help`` still lists them all."""

import inspect
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from mapapi import cli
from mapapi.commands import DESCRIPTION

from .helpers import run_mapapi
from .test_settings import clean_env

#: Run the console as the installed script does, then list the top-level
#: packages (and mapapi's modules) imported by then, whatever the command did.
PROBE = """
import json, sys
sys.argv = ["mapapi", *json.loads(sys.argv[1])]
from mapapi.console import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(name for name in sys.modules if "." not in name or name.startswith("mapapi."))))
"""

#: What serving requests, delivering webhooks and migrating bring in.
HEAVY = {"flask", "sqlalchemy", "flask_sqlalchemy", "werkzeug", "marshmallow", "limits",
         "flask_limiter", "alembic", "flask_migrate", "waitress", "prometheus_client",
         "apispec", "mcp", "orjson"}  # fmt: skip
SERVICE = {"marshmallow", "limits", "flask_limiter", "alembic", "flask_migrate", "waitress",
           "prometheus_client", "apispec", "mcp"}  # fmt: skip


def imported(tmp_path, *arguments) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(arguments)], cwd=tmp_path,
        env=clean_env(tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


@pytest.mark.parametrize("arguments", [["--help"], ["--version"], []], ids=str)
def test_help_and_version_import_no_framework(tmp_path, arguments):
    modules = imported(tmp_path, *arguments)
    assert not modules & HEAVY, modules & HEAVY
    assert not {name for name in modules if name.startswith("mapapi.commands.")}


def test_keys_create_imports_neither_the_http_side_nor_migrations(tmp_path):
    assert run_mapapi(clean_env(tmp_path), tmp_path, "db", "upgrade").returncode == 0
    made = run_mapapi(clean_env(tmp_path), tmp_path, "accounts", "create", "ada@example.com")
    assert made.returncode == 0, made.stderr
    modules = imported(tmp_path, "keys", "create", "ada@example.com", "--name", "ci")
    assert {"flask", "sqlalchemy"} <= modules
    assert not modules & SERVICE, modules & SERVICE
    assert not {name for name in modules if name.startswith(("mapapi.api", "mapapi.delivery"))}


def test_help_lists_every_command_with_its_own_first_line(tmp_path):
    listed = run_mapapi(clean_env(tmp_path), tmp_path, "--help").stdout.split("Commands:")[1]
    lines = {line.split()[0]: line.split(None, 1)[1] for line in listed.strip().splitlines()}
    assert list(lines) == list(cli.COMMANDS)
    for name, entry in cli.COMMANDS.items():
        command = cli.load(name)
        assert entry.help == inspect.cleandoc(command.help).split("\n\n")[0], name
        assert lines[name] == entry.help, name
    assert set(cli.FLASK_COMMANDS) <= set(cli.COMMANDS)


def test_the_command_group_s_own_help_lists_the_same_commands():
    """What ``--help`` says without click is what the group would say."""
    result = CliRunner().invoke(cli.main, ["--help"])
    assert result.exit_code == 0, result.output
    listed = result.output.split("Commands:")[1].split()
    assert [name for name in listed if name in cli.COMMANDS] == list(cli.COMMANDS)
    assert " ".join(DESCRIPTION.split()) in " ".join(result.output.split())
