"""Rate limits in Redis: shared by every process, and failing over to memory.

Each test counts under a key prefix of its own, so no two tests (or runs)
share a bucket in Redis. The failover tests run a private ``redis-server``
on a free port, so stopping it never touches the machine's shared server.
"""

import logging
import os
import subprocess
import time

import pytest
import redis

from mapapi import create_app
from mapapi.extensions import db

from . import backends
from .factories import ApiClient, create_account, create_key
from .helpers import free_port

REDIS_SERVER = "/usr/bin/redis-server"
LIMIT = 3
RETRY_SECONDS = 0.2
LOGGER = "mapapi.http.ratelimit"
DOWN_MESSAGE = "rate-limit storage unreachable"
BACK_MESSAGE = "reachable again"


# -- helpers -----------------------------------------------------------------


@pytest.fixture
def build_app(app_config):
    """``build_app(**overrides)``: an app on the test's database, disposed afterwards.

    The first app of a test gets a fresh schema; later ones (other
    "processes") share that database as it is.
    """
    apps = []

    def build(**overrides):
        app = create_app({**app_config, **overrides})
        with app.app_context():
            if db.engine.dialect.name == "sqlite":
                db.create_all()
            elif not apps:
                backends.empty_tables(db)
        apps.append(app)
        return app

    yield build
    for app in apps:
        with app.app_context():
            db.engine.dispose()


@pytest.fixture
def prefix(redis_url):
    """A key prefix of this test alone; its keys are deleted afterwards."""
    value = backends.unique_prefix()
    yield value
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"*{value}*"):
        client.delete(key)
    client.close()


def limit_headers(response) -> tuple[int, int, int]:
    """(limit, remaining, reset) from the X-RateLimit-* headers, checked for form."""
    values = []
    for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"):
        raw = response.headers.get(name)
        assert raw is not None and raw.isdigit(), (name, raw, response.status_code)
        values.append(int(raw))
    now = time.time()
    assert now < values[2] <= now + 61, (values, now)
    return tuple(values)


def assert_served(response, remaining: int) -> None:
    """A normal 200 of the API, counted, with the bucket's headers."""
    assert response.status_code == 200, (response.status_code, response.data[:300])
    assert set(response.get_json()) == {"data"}
    assert "Retry-After" not in response.headers
    assert limit_headers(response)[:2] == (LIMIT, remaining)


def assert_limited(response) -> None:
    assert response.status_code == 429, (response.status_code, response.data[:300])
    assert response.get_json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    assert limit_headers(response)[:2] == (LIMIT, 0)
    raw = response.headers.get("Retry-After")
    assert raw is not None and raw.isdigit() and 1 <= int(raw) <= 60, raw


def bucket_keys(client: redis.Redis, prefix: str) -> list[str]:
    return sorted(key.decode() for key in client.scan_iter(match=f"*{prefix}*"))


def warnings_logged(caplog, fragment: str) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == LOGGER
        and record.levelno == logging.WARNING
        and fragment in record.getMessage()
    ]


class PrivateRedis:
    """A throw-away ``redis-server`` on one port, started and killed at will."""

    def __init__(self, port: int):
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_connect_timeout=1, socket_timeout=1)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = self.client()
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    pass
                if self.process.poll() is not None:
                    pytest.fail(f"redis-server on port {self.port} exited: {self.process.returncode}")
                if time.monotonic() > deadline:
                    pytest.fail(f"redis-server on port {self.port} did not answer PING in 10 s")
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def private_redis():
    """A private redis-server (started), always killed at teardown."""
    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.skip(f"{REDIS_SERVER} is not installed: cannot run a private Redis to stop")
    server = PrivateRedis(free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()


# -- one bucket for every process ----------------------------------------------


def test_two_app_processes_share_an_accounts_bucket_in_redis(build_app, redis_url, prefix):
    settings = dict(
        RATELIMIT_STORAGE_URI=redis_url,
        RATELIMIT_KEY_PREFIX=prefix,
        RATELIMIT_GENERAL=f"{LIMIT} per minute",
    )
    app_a = build_app(**settings)
    app_b = build_app(**settings)
    assert app_a is not app_b
    account_id = create_account(app_a, "owner@example.com")
    secret = create_key(app_a, "owner@example.com")
    api_a = ApiClient(app_a.test_client(), secret)
    api_b = ApiClient(app_b.test_client(), secret)

    assert_served(api_a.get("/maps"), remaining=2)
    assert_served(api_b.get("/maps"), remaining=1)
    assert_served(api_a.get("/maps"), remaining=0)
    # A used the last request only through its own process; B refuses anyway.
    assert_limited(api_b.get("/maps"))
    assert_limited(api_a.get("/maps"))

    store = redis.Redis.from_url(redis_url)
    try:
        keys = bucket_keys(store, prefix)
        assert len(keys) == 1, keys
        assert f"/{prefix}/account:{account_id}/general/" in keys[0]
        # The moving window holds one entry per counted request: the 429s took nothing.
        assert store.llen(keys[0]) == LIMIT
    finally:
        store.close()


def test_apps_with_different_key_prefixes_do_not_share_buckets(build_app, redis_url, prefix):
    app_a = build_app(
        RATELIMIT_STORAGE_URI=redis_url, RATELIMIT_KEY_PREFIX=prefix,
        RATELIMIT_GENERAL=f"{LIMIT} per minute",
    )
    app_b = build_app(
        RATELIMIT_STORAGE_URI=redis_url, RATELIMIT_KEY_PREFIX=prefix + "-other",
        RATELIMIT_GENERAL=f"{LIMIT} per minute",
    )
    create_account(app_a, "owner@example.com")
    secret = create_key(app_a, "owner@example.com")
    api_a = ApiClient(app_a.test_client(), secret)
    api_b = ApiClient(app_b.test_client(), secret)
    for remaining in (2, 1, 0):
        assert_served(api_a.get("/maps"), remaining=remaining)
    assert_limited(api_a.get("/maps"))
    assert_served(api_b.get("/maps"), remaining=2)


# -- failover ------------------------------------------------------------------


def test_redis_outage_falls_back_to_per_process_limits_and_recovers(
    build_app, private_redis, caplog
):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    prefix = backends.unique_prefix()
    app = build_app(
        RATELIMIT_STORAGE_URI=private_redis.url,
        RATELIMIT_KEY_PREFIX=prefix,
        RATELIMIT_GENERAL=f"{LIMIT} per minute",
        RATELIMIT_STORAGE_RETRY_SECONDS=RETRY_SECONDS,
    )
    account_id = create_account(app, "owner@example.com")
    api = ApiClient(app.test_client(), create_key(app, "owner@example.com"))
    bucket = f"/{prefix}/account:{account_id}/general/"

    # Up: counted in Redis.
    assert_served(api.get("/maps"), remaining=2)
    assert_served(api.get("/maps"), remaining=1)
    store = private_redis.client()
    keys = bucket_keys(store, prefix)
    assert len(keys) == 1 and bucket in keys[0], keys
    assert store.llen(keys[0]) == 2
    store.close()
    assert warnings_logged(caplog, DOWN_MESSAGE) == []

    # Down: the service answers normally, counting in this process's memory
    # (which starts empty, so 3 more are served even though Redis had 1 left).
    private_redis.stop()
    started = time.monotonic()
    for remaining in (2, 1, 0):
        assert_served(api.get("/maps"), remaining=remaining)
    assert_limited(api.get("/maps"))
    # Past the retry interval, Redis is tried again, fails again: still no 500,
    # still the fallback's count, and no second warning.
    time.sleep(RETRY_SECONDS * 1.5)
    assert_limited(api.get("/maps"))
    time.sleep(RETRY_SECONDS * 1.5)
    for _ in range(5):
        assert_limited(api.get("/maps"))
    assert time.monotonic() - started < 5, "requests stalled while Redis was down"
    down = warnings_logged(caplog, DOWN_MESSAGE)
    assert len(down) == 1, down
    assert warnings_logged(caplog, BACK_MESSAGE) == []

    # Back (an empty server on the same port): counted in Redis again.
    private_redis.start()
    time.sleep(RETRY_SECONDS * 1.5)
    assert_served(api.get("/maps"), remaining=2)
    assert_served(api.get("/maps"), remaining=1)
    store = private_redis.client()
    keys = bucket_keys(store, prefix)
    assert len(keys) == 1 and bucket in keys[0], keys
    assert store.llen(keys[0]) == 2
    store.close()
    back = warnings_logged(caplog, BACK_MESSAGE)
    assert len(back) == 1, back
    assert len(warnings_logged(caplog, DOWN_MESSAGE)) == 1


def test_a_second_outage_is_warned_about_again(build_app, private_redis, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    app = build_app(
        RATELIMIT_STORAGE_URI=private_redis.url,
        RATELIMIT_KEY_PREFIX=backends.unique_prefix(),
        RATELIMIT_GENERAL="100 per minute",
        RATELIMIT_STORAGE_RETRY_SECONDS=RETRY_SECONDS,
    )
    create_account(app, "owner@example.com")
    api = ApiClient(app.test_client(), create_key(app, "owner@example.com"))
    for _ in range(2):
        private_redis.stop()
        assert api.get("/maps").status_code == 200
        private_redis.start()
        time.sleep(RETRY_SECONDS * 1.5)
        assert api.get("/maps").status_code == 200
    assert len(warnings_logged(caplog, DOWN_MESSAGE)) == 2
    assert len(warnings_logged(caplog, BACK_MESSAGE)) == 2


def test_app_starts_and_answers_when_redis_is_unreachable_from_the_start(
    build_app, caplog
):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    port = free_port()  # nothing listens there
    started = time.monotonic()
    app = build_app(
        RATELIMIT_STORAGE_URI=f"redis://127.0.0.1:{port}/0",
        RATELIMIT_KEY_PREFIX=backends.unique_prefix(),
        RATELIMIT_GENERAL=f"{LIMIT} per minute",
        RATELIMIT_STORAGE_RETRY_SECONDS=RETRY_SECONDS,
    )
    create_account(app, "owner@example.com")
    client = app.test_client()
    api = ApiClient(client, create_key(app, "owner@example.com"))

    assert client.get("/healthz").status_code == 200
    for remaining in (2, 1, 0):
        assert_served(api.get("/maps"), remaining=remaining)
    assert_limited(api.get("/maps"))
    time.sleep(RETRY_SECONDS * 1.5)
    assert_limited(api.get("/maps"))
    # Unauthenticated requests keep their contract answer and address bucket.
    response = client.get("/api/v1/maps", environ_base={"REMOTE_ADDR": "10.0.0.7"})
    assert response.status_code == 401
    assert response.get_json()["error"]["code"] == "MISSING_API_KEY"
    assert limit_headers(response)[:2] == (LIMIT, 2)
    assert time.monotonic() - started < 10
    down = warnings_logged(caplog, DOWN_MESSAGE)
    assert len(down) == 1, down
    assert str(port) in down[0]
