"""The ``mapapi`` command: serve the API and manage accounts and keys.

Every failure is one line on stderr: exit status 2 for a setting, an option
or an address the command cannot use, or a database it cannot reach; exit
status 1 for anything else. ``keys create`` prints the secret alone on
stdout so that ``KEY=$(mapapi keys create ...)`` works.

The commands are listed in ``commands/__init__.py`` and imported only once
a command line names one: ``mapapi keys create`` imports only what creating
a key needs (``mapapi --help`` and ``--version`` are answered by the console
without this group). Each runs in the app it needs: ``serve`` in the whole
service, the others in its base (settings and database, ``app_base``),
``mcp`` in none.
"""

import sys

import click

from . import __version__
from .commands import COMMANDS, DESCRIPTION, FLASK_COMMANDS, Listed, load


def script_info(kind: str):
    """What Flask's ``with_appcontext`` builds the command's app with."""
    from flask.cli import ScriptInfo

    def create_app():
        from .commands.refusals import SettingRefused
        from .config import SettingError

        try:
            if kind == "service":
                from .app import create_app as build
            else:
                from .app_base import create_base_app as build
            return build()
        except SettingError as error:
            raise SettingRefused(str(error)) from None

    return ScriptInfo(create_app=create_app, set_debug_flag=False, load_dotenv_defaults=False)


class ListedCommand(click.Command):
    """A command known by its name and help until a command line names it;
    then the command itself takes over (its options, its own ``--help``)."""

    def __init__(self, name: str, listed: Listed):
        super().__init__(name, help=listed.help)
        self.listed = listed

    def make_context(self, info_name, args, parent=None, **extra):
        if parent is not None and self.listed.app:
            parent.obj = script_info(self.listed.app)
        return load(self.name).make_context(info_name, args, parent=parent, **extra)


class OperatorGroup(click.Group):
    """The ``mapapi`` command: the operator's commands only, on the app factory.

    Flask's development commands (``run``, ``shell``, ``routes``, writing
    migrations) stay behind ``flask --app mapapi``. A mistake on the command
    line is one line on stderr, exit 2, like a bad setting.
    """

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        listed = COMMANDS.get(name)
        return ListedCommand(name, listed) if listed is not None else None

    def main(self, args=None, prog_name=None, **extra):
        try:
            status = super().main(args, prog_name, standalone_mode=False, **extra)
        except click.UsageError as error:
            click.echo(f"Error: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        except click.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(status if isinstance(status, int) else 0)


@click.group("mapapi", cls=OperatorGroup, help=DESCRIPTION)
@click.version_option(__version__, prog_name="mapapi", message="%(prog)s %(version)s")
def main():
    pass
