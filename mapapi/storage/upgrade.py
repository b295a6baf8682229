"""The schema's migrations: bound to the app, applied, and compared with
the database.

``serve`` creates the schema on a new database and applies what the
embedded SQLite one lacks, in one log line (Alembic's own lines are kept
for ``mapapi db upgrade``, the command whose whole job they describe);
``worker`` never changes the schema (``check_schema``).
"""

import functools
import logging
import os
from contextlib import contextmanager

from alembic.script import ScriptDirectory
from flask import Flask, current_app
from flask_migrate import Migrate, upgrade
from sqlalchemy import inspect, text

from ..extensions import db
from .search_indexes import include_object

MIGRATIONS = os.path.join(os.path.dirname(__file__), "migrations")
#: PostgreSQL advisory lock held while a starting process looks at the schema.
_SCHEMA_LOCK = int.from_bytes(b"mapapi", "big")

migrate = Migrate()


def register_migrations(app: Flask) -> None:
    """Bind Flask-Migrate (``flask --app mapapi db ...``, and ``upgrade`` below)."""
    if "migrate" in app.extensions:
        return
    # Batch mode: SQLite alters a table by copying it, which Alembic then does.
    migrate.init_app(
        app,
        db,
        directory=MIGRATIONS,
        render_as_batch=True,
        compare_type=True,
        include_object=include_object,
    )


@functools.cache
def _migration_scripts() -> ScriptDirectory:
    """The migrations, read once per process (each read loads every file)."""
    return ScriptDirectory(MIGRATIONS)


def newest_revision() -> str:
    return _migration_scripts().get_current_head()


def current_revision() -> str | None:
    """The revision the database is at; None when it has none (a new database)."""
    # Read directly, not through alembic's MigrationContext, which logs.
    with db.engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def pending_migrations() -> bool:
    """True when the database is behind the newest migration (or empty)."""
    return current_revision() != newest_revision()


def is_empty() -> bool:
    """True when the database holds none of mapapi's tables: a new one."""
    with db.engine.connect() as connection:
        present = set(inspect(connection).get_table_names())
    return not present & set(db.metadata.tables)


def prepare_schema() -> str:
    """Create the schema on an empty database; bring the embedded SQLite one
    up to date. What was done, in one line for the log.

    A shared server database that is behind is upgraded by its operator
    (``mapapi db upgrade``), once, never by each of many starting processes.
    An empty one is created by the first process to start: the others wait
    for it on a lock, then find the schema there.
    """
    if db.engine.dialect.name == "sqlite":
        return _upgrade_quietly()
    with _schema_lock():
        if is_empty():
            return _upgrade_quietly()
        _refuse_if_behind()
    return _summary(newest_revision(), newest_revision())


def check_schema() -> None:
    """For a process that never changes the schema (``mapapi worker``):
    RuntimeError, naming the command that does, unless it is up to date."""
    if is_empty():
        raise RuntimeError(
            "The database has no schema: create it with `mapapi db upgrade` "
            "(or by starting `mapapi serve`), then start the worker."
        )
    _refuse_if_behind()


def _refuse_if_behind() -> None:
    if pending_migrations():
        raise RuntimeError("The database schema is out of date: run `mapapi db upgrade` first.")


def apply_migrations(revision: str = "head") -> str:
    """``mapapi db upgrade``: bring the schema up to this version (or
    ``revision``); what was done, in one line (``up to date`` when nothing was).

    On PostgreSQL under the lock a starting ``serve`` takes, so that the
    command and the first ``serve`` on an empty database, run at the same
    moment, never both create the tables: the second waits, then finds the
    schema up to date.
    """
    register_migrations(current_app)
    before = current_revision()
    if db.engine.dialect.name == "sqlite":
        upgrade(revision=revision)
    else:
        with _schema_lock():
            upgrade(revision=revision)
    return _summary(before, current_revision())


def _upgrade_quietly() -> str:
    """Apply what is missing with Alembic's INFO lines silenced; a summary of it."""
    register_migrations(current_app)
    before = current_revision()
    alembic_log = logging.getLogger("alembic")
    level = alembic_log.level
    alembic_log.setLevel(logging.WARNING)
    try:
        upgrade()
    finally:
        alembic_log.setLevel(level)
    return _summary(before, newest_revision())


def _summary(before: str | None, after: str | None) -> str:
    if before == after:
        return f"database schema up to date (revision {after})"
    applied = len(list(_migration_scripts().iterate_revisions(after, before or "base")))
    if before is None:
        return f"database schema created: {applied} migrations applied (revision {after})"
    return f"database schema upgraded: {applied} migrations applied (revision {before} to {after})"


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
