"""``mapapi config check [--env-file FILE]``: every setting checked as ``serve``
checks it, without starting anything.

Every problem is a line of its own on stderr (exit 2): unknown ``MAPAPI_``
names, inline comments, values, then the database and the rate-limit
storage, reached as ``serve`` reaches them. Otherwise the settings in
effect go to stdout, one ``NAME=value`` a line, passwords hidden (exit 0).
With ``--env-file``, the file alone is the environment, read as systemd's
``EnvironmentFile=`` reads it (``mapapi.envfile``). Nothing is written: a
SQLite file that does not exist yet is not made (``serve`` will).
"""

import os
import sys

import click

from .. import config as settings
from ..envfile import EnvFileError, read_environment_file
from ..printable import printable


@click.group("config")
def config_group():
    """Check every setting without starting anything: each problem, or the settings in effect."""


@config_group.command("check")
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Check this file alone, read as systemd's EnvironmentFile= reads it.",
)
def check_command(env_file):
    """Check every setting as serve would: print each problem (exit 2), or the settings in effect."""
    if env_file is None:
        environ = dict(os.environ)
    else:
        try:
            environ = read_environment_file(env_file)
        except EnvFileError as error:
            click.echo(f"Error: {error}", err=True)
            sys.exit(2)
    given, problems = settings_in_effect(environ)
    problems = settings.environment_problems(environ) + problems
    if not problems:
        problems = reached(given)
    if problems:
        for problem in problems:
            click.echo(printable(problem), err=True)
        sys.exit(2)
    for name, text in given.items():
        click.echo(f"{name}={printable(settings.without_password(text))}")
    for setting in settings.COMMAND_SETTINGS:
        if environ.get(setting.env):
            shown = "***" if setting.secret else printable(environ[setting.env])
            click.echo(f"{setting.env}={shown}")


def settings_in_effect(environ: dict) -> tuple[dict[str, str], list[str]]:
    """Each setting's text in effect (its default, ``instance/config.py``,
    then ``environ``) by its variable; and one line per value refused."""
    from flask import Config

    instance_path = os.path.abspath(environ.get("MAPAPI_INSTANCE_PATH") or "instance")
    config = Config(instance_path, settings.defaults(instance_path))
    try:
        config.from_pyfile(os.path.join(instance_path, "config.py"), silent=True)
    except Exception as error:  # the operator's own Python: whatever it raises is shown
        return {}, [f"{instance_path}/config.py cannot be read: {type(error).__name__}: {error}"]
    config.update(settings.from_environment(environ))
    given = {setting.env: str(config[setting.key]) for setting in settings.SETTINGS}
    return given, settings.value_problems(config, settings.SETTINGS, environ)


def reached(given: dict[str, str]) -> list[str]:
    """The database and the rate-limit storage, when either cannot be reached."""
    from .common import database_unreachable, storage_unreachable

    problems = (
        database_unreachable(given["MAPAPI_DATABASE_URL"]),
        storage_unreachable(given["MAPAPI_RATELIMIT_STORAGE_URI"]),
    )
    return [problem for problem in problems if problem]
