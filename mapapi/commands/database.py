"""``mapapi db``: apply schema migrations; back up the embedded SQLite database."""

import sqlite3

import click
from flask.cli import with_appcontext
from sqlalchemy.exc import DBAPIError

from ..storage.backup import BackupError, backup_sqlite
from .common import database_failure, open_database


@click.group("db")
def db_group():
    """Apply schema migrations; back up the embedded SQLite database."""


@db_group.command("upgrade")
@click.argument("revision", default="head")
@with_appcontext
def upgrade_command(revision):
    """Apply the schema migrations of this version; an existing database is upgraded in place."""
    from ..storage.upgrade import apply_migrations  # Alembic: this command's alone

    open_database(create=True)
    try:
        done = apply_migrations(revision)
    except DBAPIError as error:
        raise click.ClickException(database_failure(error)) from None
    click.echo(done[:1].upper() + done[1:] + ".", err=True)


@db_group.command("backup")
@click.argument("path", type=click.Path(dir_okay=False))
@with_appcontext
def backup_command(path):
    """Copy the embedded SQLite database to PATH, consistently, while it serves."""
    open_database()
    try:
        backup_sqlite(path)
    except (BackupError, sqlite3.Error) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"Backed up to {path}", err=True)
