"""The ``mapapi`` commands: each in a module of its own, listed here.

The list names each command's module, the line ``mapapi --help`` shows for
it (a test keeps it the command's own) and the app it runs in. It imports
nothing but the standard library: ``mapapi --help`` reads it without
importing click, and a command's module is imported (``load``) only once a
command line names it.
"""

from importlib import import_module
from typing import NamedTuple

#: What ``mapapi --help`` says the command is.
DESCRIPTION = "Serve mapapi, deliver its webhooks, manage its accounts and API keys, serve MCP, sync a file."


class Listed(NamedTuple):
    #: ``module:attribute`` of the click command.
    target: str
    #: The first paragraph of its help: what ``mapapi --help`` shows of it.
    help: str
    #: The app it runs in: "service" (``create_app``), "base" or "" (none).
    app: str = "base"


COMMANDS = {
    "serve": Listed(
        "mapapi.commands.serve:serve_command",
        "Run the API under waitress (creates the schema on an empty database).",
        "service",
    ),
    "worker": Listed(
        "mapapi.commands.worker:worker_command",
        "Deliver webhooks only (no HTTP server), until SIGTERM or SIGINT.",
    ),
    "accounts": Listed(
        "mapapi.commands.accounts:accounts_group",
        "Create and list accounts, and change their plans.",
    ),
    "keys": Listed("mapapi.commands.keys:keys_group", "Create, list and revoke API keys."),
    "grants": Listed(
        "mapapi.commands.grants:grants_group",
        "List and revoke the assistants and apps connected with OAuth.",
    ),
    "db": Listed(
        "mapapi.commands.database:db_group",
        "Apply schema migrations; back up the embedded SQLite database.",
    ),
    "events": Listed("mapapi.commands.events:events_group", "The change feed's events."),
    # Checks the settings itself, every problem on a line: it needs no app.
    "config": Listed(
        "mapapi.commands.config_check:config_group",
        "Check every setting without starting anything: each problem, or the settings in effect.",
        "",
    ),
    # Clients of a running service: they need no app, no database.
    "mcp": Listed(
        "mapapi.mcp.command:mcp_command",
        "Serve the API's tools to an AI agent over stdio (MCP); the key comes from MAPAPI_KEY.",
        "",
    ),
    "sync": Listed(
        "mapapi.filesync.command:sync_command",
        "Keep a map in step with a CSV or GeoJSON file (FILE, or - for standard input).",
        "",
    ),
}


#: On ``flask --app mapapi`` beside Flask's own; there ``db`` is Flask-Migrate's
#: whole group (writing migrations too), with ``db backup`` added.
FLASK_COMMANDS = ("serve", "worker", "accounts", "keys", "grants", "events")


def register_commands(app) -> None:
    """``flask --app mapapi``: the operator's commands beside Flask's own (the
    app factory calls it: it lives below the ``mapapi`` command group, which
    builds apps)."""
    from flask_migrate.cli import db as migrate_group

    from .database import backup_command

    for name in FLASK_COMMANDS:
        app.cli.add_command(load(name))
    migrate_group.add_command(backup_command)


def load(name: str):
    """The click command ``name`` (a key of ``COMMANDS``), its module imported now."""
    module, _, attribute = COMMANDS[name].target.partition(":")
    return getattr(import_module(module), attribute)


def help_text() -> str:
    """``mapapi --help``: the usage, the options, every command with its line."""
    width = max(len(name) for name in COMMANDS)
    return "\n".join(
        [
            "Usage: mapapi [OPTIONS] COMMAND [ARGS]...",
            "",
            f"  {DESCRIPTION}",
            "",
            "Options:",
            "  --version  Show the version and exit.",
            "  --help     Show this message and exit.",
            "",
            "Commands:",
            *(f"  {name:<{width}}  {listed.help}" for name, listed in COMMANDS.items()),
        ]
    )
