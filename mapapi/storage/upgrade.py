"""Whether the database schema matches this version's migrations, and
creating it on a new database."""

from contextlib import contextmanager

from alembic.script import ScriptDirectory
from flask import current_app
from flask_migrate import upgrade
from sqlalchemy import inspect, text

from ..extensions import db

#: PostgreSQL advisory lock held while a starting process looks at the schema.
_SCHEMA_LOCK = int.from_bytes(b"mapapi", "big")


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


def is_empty() -> bool:
    """True when the database holds none of mapapi's tables: a new one."""
    with db.engine.connect() as connection:
        present = set(inspect(connection).get_table_names())
    return not present & set(db.metadata.tables)


def prepare_schema() -> None:
    """Create the schema on an empty database; bring the embedded SQLite one up to date.

    A shared server database that is behind is upgraded by its operator
    (``mapapi db upgrade``), once, never by each of many starting processes.
    An empty one is created by the first process to start: the others wait
    for it on a lock, then find the schema there.
    """
    if db.engine.dialect.name == "sqlite":
        upgrade()
        return
    with _schema_lock():
        if is_empty():
            upgrade()
        elif pending_migrations():
            raise RuntimeError(
                "The database schema is out of date: run `mapapi db upgrade` first."
            )


def apply_migrations(revision: str = "head") -> None:
    """``mapapi db upgrade``: bring the schema up to this version (or ``revision``).

    On PostgreSQL under the lock a starting ``serve`` takes, so that the
    command and the first ``serve`` on an empty database, run at the same
    moment, never both create the tables: the second waits, then finds the
    schema up to date.
    """
    if db.engine.dialect.name == "sqlite":
        upgrade(revision=revision)
        return
    with _schema_lock():
        upgrade(revision=revision)


@contextmanager
def _schema_lock():
    """PostgreSQL's advisory lock, in a transaction of its own, for the block.

    A transaction-level lock is released when that transaction ends, on an
    error too. Waiting for it is not a statement the engine's
    ``statement_timeout`` should cut short: a process waits as long as the
    first one takes to create the schema.
    """
    with db.engine.connect() as connection:
        connection.execute(text("SET LOCAL statement_timeout = 0"))
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
        yield
