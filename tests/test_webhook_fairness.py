"""No account slows another's deliveries: a hostile account's endpoints
that accept and never answer, names whose lookup never ends and a flood of
events, beside a victim whose every event must reach it within 5 s.

The attacker holds two accounts (an account has at most 10 endpoints): ten
endpoints on real sockets of 127.0.0.1 that accept and stay silent, and ten
whose names' lookups hang. Delivered by one worker in this process, and by
`mapapi serve` itself as a real process; with two workers on PostgreSQL in
test_webhook_workers.py.
"""

import threading
import time

import pytest
import requests

from mapapi import create_app
from mapapi.delivery.worker import DeliveryWorker
from mapapi.extensions import db
from mapapi.services.events import data_text, record_one

from . import backends
from .factories import ApiClient, create_account, create_key
from .helpers import ServeProcess, data_of, serve_env, wait_until
from .hostile_peers import HangingResolver, SilentReceiver, hanging_dns_path, hanging_url
from .receiver import Receiver

API = "/api/v1"
#: The contract's "a few seconds": the most a victim's event may take to arrive.
WITHIN_SECONDS = 5.0
VICTIM_EVENTS = 20
ATTACK_EVENTS = 300


@pytest.fixture
def app_config(app_config):
    app_config.update(WEBHOOKS_DELIVER="0", WEBHOOKS_ALLOW_PRIVATE="1")
    return app_config


@pytest.fixture
def silent_receivers():
    receivers = [SilentReceiver() for _ in range(10)]
    yield receivers
    for receiver in receivers:
        receiver.close()


@pytest.fixture
def victim_receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


class Flood:
    """Events of the attacker's accounts, made in a thread of their own until stopped."""

    def __init__(self, make_events, per_second: float = 40):
        self.make_events = make_events
        self.pause = 1 / per_second
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.pause):
            self.make_events(1)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_exc):
        self.stop.set()
        self.thread.join(timeout=30)


def victim_latencies(receiver: Receiver, made: dict[str, float]) -> dict[str, float]:
    """Seconds from each event's making to its first arrival, by event id."""
    assert receiver.wait_for(
        lambda got: made.keys() <= {r.headers["webhook-id"] for r in got}, 60
    ), f"{len(receiver.received)} of the victim's {len(made)} events arrived"
    first = {}
    for received in receiver.received:
        first.setdefault(received.headers["webhook-id"], received.at)
    return {event_id: first[event_id] - made[event_id] for event_id in made}


def test_a_hostile_account_delays_nobody_on_one_worker(
    app, client, silent_receivers, victim_receiver
):
    def account_with_endpoints(email, urls):
        account_id = create_account(app, email)
        api = ApiClient(client, create_key(app, email))
        for url in urls:
            data_of(api.post("/webhooks", json={"url": url, "events": ["*"]}), 201)
        return account_id

    silent = account_with_endpoints("silent@example.com", [r.url for r in silent_receivers])
    hanging = account_with_endpoints("hanging@example.com", [hanging_url(n) for n in range(10)])
    victim = account_with_endpoints("victim@example.com", [victim_receiver.url])

    def record(account_id, count):
        with app.app_context():
            ids = [
                record_one(account_id, "map.created", "m", data_text({"id": "m"}))
                for _ in range(count)
            ]
            db.session.commit()
        return ids

    def attack(count):
        record(silent, count)
        record(hanging, count)

    attack(ATTACK_EVENTS)
    resolver = HangingResolver()
    worker = DeliveryWorker(app, getaddrinfo=resolver)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        # The attack holds its share: every silent endpoint and hanging name in use.
        assert wait_until(lambda: sum(r.open_now for r in silent_receivers) >= 10, 30)
        assert wait_until(lambda: len(resolver.calls) == 10, 30)
        made = {}
        with Flood(attack):
            for _ in range(VICTIM_EVENTS):
                [event_id] = record(victim, 1)
                made[str(event_id)] = time.monotonic()
                time.sleep(0.2)
            latencies = victim_latencies(victim_receiver, made)
        assert max(latencies.values()) <= WITHIN_SECONDS, sorted(latencies.values())
        assert all(r.most_at_once <= 2 for r in silent_receivers)
        assert all(r.connections >= 1 for r in silent_receivers)
        # One lookup per hanging name, however many attempts wait for it.
        assert set(resolver.calls.values()) == {1}
    finally:
        resolver.release()
        for receiver in silent_receivers:
            receiver.close()
        worker.stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


@pytest.fixture
def database_url(tmp_path):
    """A new database on the suite's backend, for a process of its own."""
    if not backends.on_postgres():
        yield f"sqlite:///{tmp_path / 'served.sqlite3'}"
        return
    url = backends.create_postgres_database()
    yield url
    backends.drop_postgres_database(url)


def test_a_hostile_account_delays_nobody_when_serve_delivers(
    tmp_path, database_url, silent_receivers, victim_receiver
):
    env = serve_env(
        tmp_path,
        database_url,
        MAPAPI_BOOTSTRAP="0",
        MAPAPI_WEBHOOKS_ALLOW_PRIVATE="1",
        MAPAPI_RATELIMIT_GENERAL="1000000 per hour",
        MAPAPI_RATELIMIT_BULK="1000000 per hour",
        PYTHONPATH=hanging_dns_path(tmp_path / "hanging_dns"),
    )
    server = ServeProcess(env, tmp_path, "serve")
    same_database = create_app({"SQLALCHEMY_DATABASE_URI": database_url})
    try:
        server.wait_until_up()
        keys = {}
        for email in ("silent@example.com", "hanging@example.com", "victim@example.com"):
            create_account(same_database, email)
            keys[email] = create_key(same_database, email)

        def call(email, method, path, status, **kwargs):
            response = requests.request(
                method, server.base + API + path, timeout=30,
                headers={"Authorization": f"Bearer {keys[email]}"}, **kwargs,
            )  # fmt: skip
            assert response.status_code == status, response.text
            return response.json()["data"]

        urls = {
            "silent@example.com": [r.url for r in silent_receivers],
            "hanging@example.com": [hanging_url(n) for n in range(10)],
            "victim@example.com": [victim_receiver.url],
        }
        maps = {}
        for email, endpoints in urls.items():
            for url in endpoints:
                call(email, "POST", "/webhooks", 201, json={"url": url, "events": ["*"]})
            maps[email] = call(email, "POST", "/maps", 201, json={"title": "m"})["id"]

        def attack(bulks):
            spots = [{"name": f"s{n}", "lat": 0, "lng": 0} for n in range(100)]
            for email in ("silent@example.com", "hanging@example.com"):
                for _ in range(bulks):
                    call(email, "POST", f"/maps/{maps[email]}/locations/bulk", 201,
                         json={"locations": spots})  # fmt: skip

        attack(ATTACK_EVENTS // 100)
        assert wait_until(lambda: sum(r.open_now for r in silent_receivers) >= 10, 30)
        made = {}
        with Flood(lambda _count: attack(1), per_second=0.5):
            for number in range(VICTIM_EVENTS):
                path = f"/maps/{maps['victim@example.com']}/locations"
                call("victim@example.com", "POST", path, 201,
                     json={"name": f"v{number}", "lat": 1, "lng": 2})  # fmt: skip
                at = time.monotonic()
                made[call("victim@example.com", "GET", "/events?after=latest", 200)["next"]] = at
                time.sleep(0.2)
            latencies = victim_latencies(victim_receiver, made)
        assert max(latencies.values()) <= WITHIN_SECONDS, sorted(latencies.values())
        assert all(r.most_at_once <= 2 for r in silent_receivers)
    finally:
        for receiver in silent_receivers:
            receiver.close()
        server.stop()
        with same_database.app_context():
            db.engine.dispose()
