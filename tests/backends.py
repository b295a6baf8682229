"""The servers the tests can run against, besides a SQLite file.

``MAPAPI_TEST_BACKEND=postgres`` runs the whole suite on PostgreSQL (a fresh
database, created for the run and dropped after it) with rate limits in
Redis. Tests that need those servers whatever the backend (several
processes, Redis failover) skip with the reason when they are unreachable.
"""

import os
import uuid

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

BACKEND = os.environ.get("MAPAPI_TEST_BACKEND", "sqlite")
POSTGRES_SERVER_URL = os.environ.get(
    "MAPAPI_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("MAPAPI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def on_postgres() -> bool:
    return BACKEND == "postgres"


def postgres_unavailable() -> str | None:
    """Why PostgreSQL cannot be used, or None when it can."""
    try:
        engine = create_engine(POSTGRES_SERVER_URL, connect_args={"connect_timeout": 2})
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as error:  # noqa: BLE001 - any failure means "not here"
        return f"PostgreSQL is not reachable at {POSTGRES_SERVER_URL}: {error.__class__.__name__}"
    return None


def redis_unavailable() -> str | None:
    """Why Redis cannot be used, or None when it can."""
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as error:  # noqa: BLE001
        return f"Redis is not reachable at {REDIS_URL}: {error.__class__.__name__}"
    return None


def _admin_engine():
    return create_engine(POSTGRES_SERVER_URL, isolation_level="AUTOCOMMIT")


def create_postgres_database() -> str:
    """A new, empty database; returns its URL."""
    name = f"mapapi_test_{uuid.uuid4().hex[:12]}"
    engine = _admin_engine()
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(POSTGRES_SERVER_URL).set(database=name).render_as_string(hide_password=False)


def drop_postgres_database(url: str) -> None:
    name = make_url(url).database
    engine = _admin_engine()
    with engine.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


def empty_tables(db) -> None:
    """Remove every row, keeping the schema (a fresh database for each test)."""
    names = ", ".join(f'"{table.name}"' for table in db.metadata.sorted_tables)
    db.session.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    db.session.commit()


def unique_prefix() -> str:
    """A rate-limit key prefix of one test, so tests never share a bucket in Redis."""
    return f"test-{uuid.uuid4().hex}"
