"""The feed never skips: many writers at once, a reader following ``next``.

Event ids come from a counter when a row is inserted, but become visible
when its transaction commits, and concurrent transactions commit in any
order. A reader that passed id 11 while 10 was still committing would never
see 10. Here writers in several ``mapapi serve`` processes (PostgreSQL) or
threads of one server (SQLite) create locations in maps of their own, so
that nothing but the events serializes them, while a reader follows
``next`` as fast as it can. Every acknowledged location must reach the
reader exactly once, in id order.
"""

import threading
import time
import uuid

import pytest
import requests
from limits import parse

from . import backends
from .helpers import ServeProcess
from .test_multiprocess import STARTUP_SECONDS, checked, command_env, run_mapapi

API = "/api/v1"
WRITE_SECONDS = 20
WRITERS = 12


class Writers:
    """Threads creating locations (single and small bulks) until told to stop."""

    def __init__(self, bases: list[str], secret: str, maps: list[str]):
        self.bases, self.secret, self.maps = bases, secret, maps
        self.created: list[str] = []
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def run(self, number: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.secret}"
        base = self.bases[number % len(self.bases)]
        path = f"{base}{API}/maps/{self.maps[number % len(self.maps)]}/locations"
        sent = 0
        while not self.stop.is_set():
            sent += 1
            item = {"name": f"w{number}-{sent}", "lat": 1, "lng": 2}
            if sent % 4:
                response = session.post(path, json=item, timeout=30)
                created = [response.json()["data"]] if response.status_code == 201 else []
            else:
                response = session.post(f"{path}/bulk", json={"locations": [item] * 3}, timeout=30)
                created = response.json()["data"]["created"] if response.status_code == 201 else []
            with self.lock:
                if response.status_code != 201:
                    self.failures.append(response.text)
                self.created.extend(location["id"] for location in created)


class Reader:
    """Follows ``next`` in a tight loop, keeping every event it is given."""

    def __init__(self, base: str, secret: str):
        self.base = base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {secret}"
        self.after = None
        self.seen: list[dict] = []
        self.reads = 0

    def read_once(self) -> bool:
        """One page; whether more follow."""
        params = {"limit": 100} | ({} if self.after is None else {"after": self.after})
        response = self.session.get(f"{self.base}{API}/events", params=params, timeout=30)
        assert response.status_code == 200, response.text
        page = response.json()["data"]
        self.reads += 1
        self.seen.extend(page["events"])
        self.after = page["next"]
        return page["hasMore"]

    def follow(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.read_once()

    def drain(self) -> None:
        while self.read_once():
            pass


def run_and_check(bases: list[str], secret: str) -> None:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {secret}"
    maps = []
    for number in range(WRITERS):
        response = session.post(f"{bases[0]}{API}/maps", json={"title": f"m{number}"}, timeout=30)
        assert response.status_code == 201, response.text
        maps.append(response.json()["data"]["id"])
    reader = Reader(bases[-1], secret)
    reader.drain()  # the maps' events
    writers = Writers(bases, secret, maps)
    threads = [threading.Thread(target=writers.run, args=(n,)) for n in range(WRITERS)]
    reading_done = threading.Event()
    following = threading.Thread(target=reader.follow, args=(reading_done,))
    following.start()
    for thread in threads:
        thread.start()
    time.sleep(WRITE_SECONDS)
    writers.stop.set()
    for thread in threads:
        thread.join(timeout=60)
    reading_done.set()
    following.join(timeout=60)
    reader.drain()

    print(f"\n{len(writers.created)} locations in {WRITE_SECONDS} s, {reader.reads} reads")
    assert writers.failures == []
    ids = [int(event["id"]) for event in reader.seen]
    assert ids == sorted(set(ids)), "the reader saw an event twice or out of order"
    located = [e["data"]["id"] for e in reader.seen if e["type"] == "location.created"]
    missing = set(writers.created) - set(located)
    assert not missing, f"{len(missing)} of {len(writers.created)} events skipped"
    assert sorted(located) == sorted(writers.created)
    # The reader kept up with the writers, so it read while they committed.
    assert reader.reads > 20 and len(writers.created) > 200, (reader.reads, len(writers.created))


def test_a_reader_following_next_sees_every_event_once_in_order_sqlite(app, live_server):
    if backends.on_postgres():
        pytest.skip("the PostgreSQL run uses several processes (below)")
    from .factories import create_account, create_key

    # Limits as high as the PostgreSQL run's (below): the writers' pace,
    # not the test app's 1,000 bulks an hour, decides how much is written.
    buckets = app.extensions["mapapi.buckets"].items
    buckets["general"] = buckets["bulk"] = parse("1000000 per hour")
    create_account(app, "order@example.com")
    run_and_check([live_server], create_key(app, "order@example.com"))


def test_a_reader_following_next_sees_every_event_once_in_order_postgres(
    postgres_server, redis_url, tmp_path
):
    instance = tmp_path / "instance"
    instance.mkdir()
    (instance / "config.py").write_text(f"RATELIMIT_KEY_PREFIX = {backends.unique_prefix()!r}\n")
    database_url = backends.create_postgres_database()
    servers = []
    try:
        env = command_env(
            instance,
            database_url,
            MAPAPI_RATELIMIT_STORAGE_URI=redis_url,
            MAPAPI_RATELIMIT_GENERAL="1000000 per hour",
            MAPAPI_RATELIMIT_MAP_CREATE="1000 per hour",
            MAPAPI_RATELIMIT_BULK="1000000 per hour",
        )
        checked(run_mapapi(env, tmp_path, "db", "upgrade"))
        email = f"order-{uuid.uuid4().hex[:8]}@example.com"
        checked(run_mapapi(env, tmp_path, "accounts", "create", email))
        secret = checked(run_mapapi(env, tmp_path, "keys", "create", email, "--name", "t")).strip()
        servers = [ServeProcess(env, tmp_path, name) for name in ("a", "b", "c")]
        for server in servers:
            server.wait_until_up(STARTUP_SECONDS)
        run_and_check([server.base for server in servers], secret)
    finally:
        for server in servers:
            server.stop()
        backends.drop_postgres_database(database_url)
