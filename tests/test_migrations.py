"""Migrations: they build exactly the models' schema, on SQLite and PostgreSQL."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import upgrade
from sqlalchemy import inspect

from mapapi import create_app
from mapapi.extensions import db
from mapapi.storage.upgrade import pending_migrations

from . import backends


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request, tmp_path):
    """The URL of an empty database of each kind (PostgreSQL skips when absent)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrated.sqlite3'}"
        return
    reason = backends.postgres_unavailable()
    if reason:
        pytest.skip(reason)
    url = backends.create_postgres_database()
    yield url
    backends.drop_postgres_database(url)


@pytest.fixture
def migration_app(empty_database):
    app = create_app({"SQLALCHEMY_DATABASE_URI": empty_database})
    yield app
    with app.app_context():
        db.engine.dispose()


def schema_differences(app) -> list:
    """What autogenerate would change to make the database match the models."""
    with app.app_context(), db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return compare_metadata(context, db.metadata)


def test_migrations_create_exactly_the_models_schema(migration_app):
    with migration_app.app_context():
        assert pending_migrations()
        upgrade()
        assert not pending_migrations()
        tables = set(inspect(db.engine).get_table_names())
    assert tables == set(db.metadata.tables) | {"alembic_version"}
    assert schema_differences(migration_app) == []


def test_upgrade_keeps_existing_data_and_is_idempotent(migration_app):
    with migration_app.app_context():
        upgrade()
    runner = migration_app.test_cli_runner()
    created = runner.invoke(args=["accounts", "create", "kept@example.com"])
    assert created.exit_code == 0, created.output
    again = runner.invoke(args=["db", "upgrade"])
    assert again.exit_code == 0, again.output
    listed = runner.invoke(args=["accounts", "list"])
    assert "kept@example.com" in listed.stdout
