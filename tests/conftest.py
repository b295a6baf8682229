"""Fixtures: an app on a fresh SQLite file per test, clients, keys, a live server."""

import threading

import pytest
import waitress
from sqlalchemy import event

from mapapi import create_app
from mapapi.extensions import db

from .factories import ApiClient, create_account, create_key


@pytest.fixture
def app_config(tmp_path):
    """Settings for the app under test; tests may change them before ``app``."""
    return {
        "TESTING": True,
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'mapapi.sqlite3'}",
        "RATELIMIT_STORAGE_URI": "memory://",
        "RATELIMIT_GENERAL": "10000 per hour",
        "RATELIMIT_MAP_CREATE": "1000 per hour",
        "RATELIMIT_BULK": "1000 per hour",
    }


@pytest.fixture
def app(app_config):
    app = create_app(app_config)
    with app.app_context():
        db.create_all()
    yield app
    with app.app_context():
        db.engine.dispose()


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
    yield counter
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
    """Close waitress from inside its own loop, so no select() sees a closed fd."""

    def close_everything():
        for dispatcher in list(server._map.values()):
            dispatcher.handle_close()

    server.trigger.pull_trigger(close_everything)
    thread.join(timeout=10)
    server.task_dispatcher.shutdown()
