"""Refusals never wait for writers (API.md §5): while another connection
holds the database's write lock (SQLite) or the rows every request reads
(PostgreSQL), the answers of checks 1 to 4 come at once, over real sockets.
"""

import sqlite3
import threading
import time
from contextlib import contextmanager

import psycopg
import pytest
import requests
from sqlalchemy.engine import make_url

from .factories import create_account, create_key

#: Far below the 5 s an SQLite writer would wait for the lock.
AT_ONCE_SECONDS = 1.0
GENERAL_LIMIT = 5


@pytest.fixture
def app_config(app_config):
    app_config["RATELIMIT_GENERAL"] = f"{GENERAL_LIMIT} per hour"
    return app_config


@contextmanager
def writer_holding_the_database(database_url: str):
    """Another connection, in a transaction that holds SQLite's write lock,
    or on PostgreSQL every row of accounts, api_keys and maps FOR UPDATE."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        connection = sqlite3.connect(url.database, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
    else:
        connection = psycopg.connect(url.set(drivername="postgresql").render_as_string(False))
        for table in ("accounts", "api_keys", "maps"):
            connection.execute(f"SELECT * FROM {table} FOR UPDATE")  # noqa: S608 - our table names
    try:
        yield
    finally:
        connection.rollback() if url.get_backend_name() != "sqlite" else connection.execute(
            "ROLLBACK"
        )
        connection.close()


def answer(method: str, url: str, key: str | None = None) -> tuple[int, str, float]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    started = time.monotonic()
    response = requests.request(method, url, headers=headers, json={"title": "t"}, timeout=15)
    return response.status_code, response.json()["error"]["code"], time.monotonic() - started


def test_refusals_answer_at_once_while_a_writer_holds_the_database(app, live_server, key):
    api = live_server + "/api/v1"
    create_account(app, "reader@example.com")
    read_only = create_key(app, "reader@example.com", scope="READ_ONLY")
    create_account(app, "free@example.com", plan="free")
    free = create_key(app, "free@example.com")
    create_account(app, "busy@example.com")
    busy = create_key(app, "busy@example.com")
    for _ in range(GENERAL_LIMIT):
        assert requests.get(
            f"{api}/maps", headers={"Authorization": f"Bearer {busy}"}, timeout=10
        ).ok

    write = {}
    with writer_holding_the_database(app.config["SQLALCHEMY_DATABASE_URI"]):
        # A write of our own waits for the lock meanwhile (SQLite: holding
        # the process's queue of writers too).
        waiting = threading.Thread(
            target=lambda: write.update(response=requests.post(
                f"{api}/maps", json={"title": "after"}, headers={"Authorization": f"Bearer {key}"},
                timeout=30,
            ))
        )  # fmt: skip
        waiting.start()
        time.sleep(0.3)
        refusals = {
            "rate limit": answer("GET", f"{api}/maps", busy),
            "no key": answer("POST", f"{api}/maps"),
            "unknown key": answer("POST", f"{api}/maps", "mk_live_not-a-key"),
            "no pro plan": answer("POST", f"{api}/maps", free),
            "read-only key": answer("POST", f"{api}/maps", read_only),
            "unknown path": answer("POST", f"{api}/nothing-here", key),
            "wrong method": answer("PUT", f"{api}/maps", key),
        }
        time.sleep(0.5)
    waiting.join(timeout=30)

    assert {name: result[:2] for name, result in refusals.items()} == {
        "rate limit": (429, "RATE_LIMIT_EXCEEDED"),
        "no key": (401, "MISSING_API_KEY"),
        "unknown key": (401, "INVALID_API_KEY"),
        "no pro plan": (403, "PRO_SUBSCRIPTION_REQUIRED"),
        "read-only key": (403, "INSUFFICIENT_SCOPE"),
        "unknown path": (404, "NOT_FOUND"),
        "wrong method": (405, "METHOD_NOT_ALLOWED"),
    }
    slow = {
        name: seconds for name, (_, _, seconds) in refusals.items() if seconds > AT_ONCE_SECONDS
    }
    assert not slow, slow
    assert write["response"].status_code == 201  # the writer went on once the lock was free
