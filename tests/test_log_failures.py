"""Statements that fail on purpose leave no secret or value in the log.

A lock time-out and a dropped connection on PostgreSQL, a busy database on
SQLite, during a webhook create (its secret, URL and description), a key
lookup (the key and its hash) and a location write (its name and
properties): every record, written by the service's own formatter, is one
line, says which statement failed and why, and holds none of those values.
SQLAlchemy's statement log is captured too (at INFO: the statements, their
parameters hidden).
"""

import logging
import re
import secrets
import sqlite3
import threading
from contextlib import contextmanager

import pytest
import requests
import waitress
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from mapapi import create_app
from mapapi.extensions import db
from mapapi.http.auth import hash_secret
from mapapi.log_output import FORMAT, OneLineFormatter

from . import backends
from .conftest import stop_server
from .factories import create_account, create_key
from .helpers import wait_until

API = "/api/v1"
#: The start of every webhook secret: none may reach the log.
SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix to look for, not a secret


@pytest.fixture
def logged(caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    return caplog


class Service:
    """The app on its own database, served by waitress, with an account, a key and a map."""

    def __init__(self, database_url: str):
        self.database_url = database_url
        self.app = create_app(
            {"SQLALCHEMY_DATABASE_URI": database_url, "WEBHOOKS_DELIVER": "0",
             "RATELIMIT_GENERAL": "100000 per hour"}
        )  # fmt: skip
        with self.app.app_context():
            db.create_all()
        create_account(self.app, "owner@example.com")
        self.key = create_key(self.app, "owner@example.com")
        self.server = waitress.create_server(self.app, host="127.0.0.1", port=0, threads=8)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.effective_port}{API}"
        self.map_id = self.call("POST", "/maps", json={"title": "Logged"}).json()["data"]["id"]

    def call(self, method, path, **kwargs):
        headers = {"Authorization": f"Bearer {self.key}"}
        return requests.request(method, self.base + path, headers=headers, timeout=60, **kwargs)

    def close(self):
        stop_server(self.server, self.thread)
        with self.app.app_context():
            db.engine.dispose()


def create_webhook(service: Service):
    token = secrets.token_hex(8)
    body = {
        "url": f"https://93.184.215.14/hook-{token}",
        "events": ["*"],
        "description": f"about-{token}",
    }
    return service.call("POST", "/webhooks", json=body), [body["url"], body["description"]]


def look_up_key(service: Service):
    return service.call("GET", "/maps"), []


def write_location(service: Service):
    token = secrets.token_hex(8)
    body = {
        "name": f"name-{token}",
        "lat": 1,
        "lng": 2,
        "properties": {f"key-{token}": f"value-{token}"},
    }
    response = service.call("POST", f"/maps/{service.map_id}/locations", json=body)
    return response, [body["name"], f"key-{token}", f"value-{token}"]


def assert_logged_safely(caplog, service: Service, values, reason: str) -> None:
    """One line a record; the failure logged as ``reason`` (a regular
    expression) says; no secret, key, hash nor ``values``."""
    formatter = OneLineFormatter(FORMAT)
    lines = [formatter.format(record) for record in caplog.records]
    for line in lines:
        assert "\n" not in line and "\r" not in line, line
    raw = [f"{record.msg!r} {record.args!r}" for record in caplog.records]
    written = "\n".join(lines + raw)
    assert re.search(reason, written), (reason, lines)
    forbidden = [SECRET_PREFIX, service.key, hash_secret(service.key), *values]
    for value in forbidden:
        assert value not in written, (value, [line for line in lines if value in line])


def assert_unavailable(response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"


# --- PostgreSQL -----------------------------------------------------------------------------

#: What each operation's statement waits behind, held by another transaction.
BLOCKERS = {
    create_webhook: ("LOCK TABLE webhooks IN SHARE MODE", "INSERT on webhooks failed"),
    look_up_key: ("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE", "SELECT on api_keys failed"),
    write_location: ("LOCK TABLE locations IN SHARE MODE", "INSERT on locations failed"),
}


@pytest.fixture
def postgres_service(postgres_server):
    if not backends.on_postgres():
        pytest.skip("PostgreSQL's failures are tested in the suite's PostgreSQL run")
    url = backends.create_postgres_database()
    service = Service(url)
    yield service
    service.close()
    backends.drop_postgres_database(url)


@contextmanager
def holding(database_url: str, statement: str):
    """``statement`` run in a transaction of another connection, held open."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection, connection.begin() as transaction:
            connection.execute(text(statement))
            yield
            transaction.rollback()
    finally:
        engine.dispose()


def test_on_postgresql_a_lock_time_out_logs_no_value(postgres_service, logged):
    service = postgres_service
    name = make_url(service.database_url).database
    admin = create_engine(backends.POSTGRES_SERVER_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'ALTER DATABASE "{name}" SET lock_timeout = \'300ms\''))
    admin.dispose()
    with service.app.app_context():
        db.engine.dispose()  # the pool's new connections take the setting
    for operation, (lock, failed) in BLOCKERS.items():
        with holding(service.database_url, lock):
            response, values = operation(service)
        assert_unavailable(response)
        assert_logged_safely(
            logged, service, values,
            rf"{failed}: LockNotAvailable \(SQLSTATE 55P03\): canceling statement due to lock timeout",
        )  # fmt: skip


def test_on_postgresql_a_dropped_connection_logs_no_value(postgres_service, logged):
    service = postgres_service
    name = make_url(service.database_url).database
    admin = create_engine(backends.POSTGRES_SERVER_URL, isolation_level="AUTOCOMMIT")

    def drop_the_waiting_connection() -> bool:
        with admin.connect() as connection:
            return bool(
                connection.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :name AND wait_event_type = 'Lock'"
                    ),
                    {"name": name},
                ).all()
            )

    try:
        for operation, (lock, failed) in BLOCKERS.items():
            answered = []
            with holding(service.database_url, lock):
                request = threading.Thread(target=lambda: answered.append(operation(service)))
                request.start()
                assert wait_until(drop_the_waiting_connection, 20, interval=0.02)
                request.join(timeout=60)
            [(response, values)] = answered
            assert_unavailable(response)
            # The server's farewell, or the driver finding the connection gone.
            dropped = r"AdminShutdown \(SQLSTATE 57P01\)|OperationalError: the connection is lost"
            assert_logged_safely(logged, service, values, rf"{failed}: ({dropped})")
    finally:
        admin.dispose()


# --- SQLite ---------------------------------------------------------------------------------


def test_on_sqlite_a_busy_database_logs_no_value(tmp_path, logged):
    if backends.on_postgres():
        pytest.skip("SQLite's failures are tested in the suite's SQLite run")
    path = tmp_path / "busy.sqlite3"
    service = Service(f"sqlite:///{path}")
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # another process's long write
        answered = {}
        operations = (create_webhook, write_location)  # each begins with its key lookup
        threads = [
            threading.Thread(target=lambda op=op: answered.setdefault(op, op(service)))
            for op in operations
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        blocker.execute("ROLLBACK")
        for operation in operations:
            response, values = answered[operation]
            assert_unavailable(response)
            assert_logged_safely(
                logged, service, values,
                "BEGIN failed: OperationalError: database is locked",
            )  # fmt: skip
    finally:
        blocker.close()
        service.close()
