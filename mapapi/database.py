"""Database engine setup: SQLite made safe for a threaded server."""

from flask import has_request_context, request
from sqlalchemy import event

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def configure_engine(engine) -> None:
    """Tune SQLite for many threads; other databases need nothing here."""
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)


def _sqlite_on_connect(dbapi_connection, _record) -> None:
    # The driver's own transaction handling begins a transaction only at the
    # first write, so a request's reads are not isolated from other writers
    # and updates get lost; we issue BEGIN ourselves instead (see below).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    # FULL: a write acknowledged to the client survives a power loss too.
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_on_begin(connection) -> None:
    # A writing transaction takes the write lock up front: a deferred one
    # that read first could not upgrade once another writer had committed,
    # and would fail with "database is locked" instead of waiting its turn.
    if wants_write_lock(connection):
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        connection.exec_driver_sql("BEGIN")


def wants_write_lock(connection) -> bool:
    """Whether a transaction beginning on ``connection`` may write."""
    explicit = connection.get_execution_options().get("write_lock")
    if explicit is not None:
        return explicit
    if has_request_context():
        return request.method in WRITE_METHODS
    return True
