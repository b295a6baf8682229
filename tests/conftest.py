"""Fixtures: an app on a fresh database per test, clients, keys, a live server.

The database is a SQLite file per test, or with ``MAPAPI_TEST_BACKEND=postgres``
one PostgreSQL database for the run, emptied before each test, with rate
limits in Redis (see backends.py).
"""

import threading

import pytest
import waitress
from sqlalchemy import event

from mapapi import create_app
from mapapi.extensions import db
from mapapi.server import shutdown
from mapapi.storage import driver

from . import backends
from .factories import ApiClient, create_account, create_key


def pytest_report_header():
    if backends.on_postgres():
        return f"mapapi backend: PostgreSQL and Redis ({backends.REDIS_URL})"
    return "mapapi backend: SQLite, in-memory rate limits"


@pytest.fixture(scope="session")
def suite_database():
    """The PostgreSQL database of this run (with the schema), or None on SQLite."""
    if not backends.on_postgres():
        yield None
        return
    reason = backends.postgres_unavailable() or backends.redis_unavailable()
    if reason:
        pytest.exit(f"MAPAPI_TEST_BACKEND=postgres, but {reason}", returncode=3)
    url = backends.create_postgres_database()
    app = create_app({"SQLALCHEMY_DATABASE_URI": url})
    with app.app_context():
        db.create_all()
        db.engine.dispose()
    yield url
    backends.drop_postgres_database(url)


@pytest.fixture
def app_config(tmp_path, suite_database):
    """Settings for the app under test; tests may change them before ``app``."""
    config = {
        "TESTING": True,
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'mapapi.sqlite3'}",
        "RATELIMIT_STORAGE_URI": "memory://",
        "RATELIMIT_GENERAL": "10000 per hour",
        "RATELIMIT_MAP_CREATE": "1000 per hour",
        "RATELIMIT_BULK": "1000 per hour",
        "RATELIMIT_SYNC": "1000 per hour",
    }
    if suite_database:
        config["SQLALCHEMY_DATABASE_URI"] = suite_database
        config["RATELIMIT_STORAGE_URI"] = backends.REDIS_URL
        config["RATELIMIT_KEY_PREFIX"] = backends.unique_prefix()
    return config


@pytest.fixture
def app(app_config):
    app = create_app(app_config)
    with app.app_context():
        if db.engine.dialect.name == "sqlite":
            db.create_all()
        else:
            backends.empty_tables(db)
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture(scope="session")
def postgres_server():
    """The PostgreSQL server URL, for tests that need one whatever the backend."""
    reason = backends.postgres_unavailable()
    if reason:
        pytest.skip(reason)
    return backends.POSTGRES_SERVER_URL


@pytest.fixture(scope="session")
def redis_url():
    """The Redis URL, for tests that need one whatever the backend."""
    reason = backends.redis_unavailable()
    if reason:
        pytest.skip(reason)
    return backends.REDIS_URL


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def account(app):
    """The id of a pro account, ``owner@example.com``."""
    return create_account(app, "owner@example.com")


@pytest.fixture
def key(app, account):
    """A READ_WRITE secret of ``owner@example.com``."""
    return create_key(app, "owner@example.com")


@pytest.fixture
def api(client, key):
    """The test client speaking as ``owner@example.com``."""
    return ApiClient(client, key)


@pytest.fixture
def other_api(app, client):
    """The test client speaking as a second account, ``other@example.com``."""
    create_account(app, "other@example.com")
    return ApiClient(client, create_key(app, "other@example.com"))


@pytest.fixture
def statements(app):
    """Counts the SQL statements the app sends: ``statements.count``."""

    class Counter:
        count = 0

        def reset(self):
            self.count = 0

    counter = Counter()

    def count(*_args):
        counter.count += 1

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", count)
    driver.statement_listeners.append(count)  # the checks' statements (storage.driver)
    yield counter
    driver.statement_listeners.remove(count)
    event.remove(engine, "before_cursor_execute", count)


@pytest.fixture
def live_server(app):
    """The app served by a real waitress server (8 threads) on 127.0.0.1."""
    server = waitress.create_server(app, host="127.0.0.1", port=0, threads=8)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.effective_port}"
    stop_server(server, thread)


def stop_server(server, thread) -> None:
    """Stop waitress as `mapapi serve` does on SIGTERM, and wait for it."""
    shutdown(server).join(timeout=35)
    thread.join(timeout=10)
    server.task_dispatcher.shutdown()


