"""The ``mapapi`` console script.

``mapapi --help`` and ``mapapi --version`` are answered here, from the
list of commands, without importing click: a script that asks costs
little more than the interpreter's start. They need no settings.

Otherwise the environment is checked first, before anything else is
imported: a ``MAPAPI_*`` name that is no setting, or a value with an
inline comment, stops every command in one line (exit 2).

The clients of a running service (``mapapi mcp``, ``mapapi sync``: the
commands listed with no app) are dispatched before the command group is
imported: they need none of the app, so an agent's host or a nightly job
starts them in about half the time. Every other command is the group in
``cli.py``, which imports a command only once it is named.
"""

import sys

from . import __version__
from .commands import COMMANDS, help_text, load
from .config import SettingError, check_environment, environment_settings

#: Commands that check the settings themselves, and list every problem.
CHECKS_ITSELF = ("config",)


def main() -> None:
    arguments = sys.argv[1:]
    if arguments == ["--version"]:
        print(f"mapapi {__version__}")
        return
    if arguments == ["--help"]:
        print(help_text())
        return
    client = COMMANDS.get(arguments[0]) if arguments else None
    if not asks_for_help(arguments) and arguments[0] not in CHECKS_ITSELF:
        try:
            check_environment()
            if client is not None and not client.app:
                # No app checks them for a client of the service: here, as serve would.
                problems = environment_settings()
                if problems:
                    raise SettingError(problems[0])
        except SettingError as error:
            print(f"Error: {error}", file=sys.stderr)
            sys.exit(2)
    if client is not None and not client.app:
        load(arguments[0]).main(arguments[1:], prog_name=f"mapapi {arguments[0]}")
    else:
        from .cli import main as command_group

        command_group()


def asks_for_help(arguments: list[str]) -> bool:
    """Whether the command line only asks what there is: usage, or a command's help."""
    return not arguments or "--help" in arguments
