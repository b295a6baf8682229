"""Whether the database schema matches this version's migrations."""

from alembic.script import ScriptDirectory
from flask import current_app
from flask_migrate import upgrade
from sqlalchemy import inspect, text

from .extensions import db


def pending_migrations() -> bool:
    """True when the database is behind the newest migration (or empty)."""
    config = current_app.extensions["migrate"].migrate.get_config()
    heads = set(ScriptDirectory.from_config(config).get_heads())
    # Read directly, not through alembic's MigrationContext, which logs.
    with db.engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return True
        current = set(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())
    return current != heads


def prepare_schema() -> None:
    """Bring the embedded SQLite database up to date; elsewhere insist on it.

    A shared server database is upgraded by its operator (``mapapi db
    upgrade``), once, never by each of many starting processes.
    """
    if db.engine.dialect.name == "sqlite":
        upgrade()
    elif pending_migrations():
        raise RuntimeError("The database schema is out of date: run `mapapi db upgrade` first.")
