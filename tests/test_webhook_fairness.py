"""No account slows another's deliveries: a hostile account's endpoints
that accept and never answer, names whose lookup never ends and a flood of
events, beside a victim whose every event must reach it within 5 s.

The attacker holds two accounts (an account has at most 10 endpoints): ten
endpoints on real sockets of 127.0.0.1 that accept and stay silent, and ten
whose names' lookups hang. Delivered by one worker in this process, by
`mapapi serve` itself as a real process, and by two `mapapi worker`
processes on PostgreSQL.
"""

import threading
import time
from collections import Counter

import pytest

from mapapi.delivery.worker import DeliveryWorker
from mapapi.extensions import db
from mapapi.services.events import data_text, record_one

from . import backends
from .deployment import deployed, new_database
from .factories import ApiClient, create_account, create_key
from .helpers import data_of, wait_until
from .hostile_peers import HANGING_DNS, HangingResolver, SilentReceiver, hanging_url
from .receiver import Receiver

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


def victim_latencies(
    receiver: Receiver, made: dict[str, float], endpoints: int = 1
) -> dict[tuple[str, str], float]:
    """Seconds from each event's making to its first arrival at each of the
    victim's ``endpoints``, by (path, event id)."""

    def first_arrivals(received) -> dict[tuple[str, str], float]:
        first = {}
        for got in received:
            if got.headers["webhook-id"] in made:
                first.setdefault((got.path, got.headers["webhook-id"]), got.at)
        return first

    assert receiver.wait_for(lambda got: len(first_arrivals(got)) == endpoints * len(made), 60), (
        f"{len(first_arrivals(receiver.received))} of {endpoints * len(made)} deliveries arrived"
    )
    return {
        (path, event_id): at - made[event_id]
        for (path, event_id), at in first_arrivals(receiver.received).items()
    }


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


#: Real leases (an attempt to a silent receiver lasts its whole 10 s), quick retries.
FAIR_CONFIG = """
WEBHOOKS_POLL_SECONDS = 0.2
WEBHOOKS_RETRY_SCHEDULE = (0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2)
"""
#: More than the contract's default: the attackers' bulks must not be refused.
RAISED_LIMITS = {
    "MAPAPI_RATELIMIT_GENERAL": "1000000 per hour",
    "MAPAPI_RATELIMIT_BULK": "1000000 per hour",
}


class Scene:
    """Three accounts of ``deployment``, served by ``api``: two attackers
    (ten endpoints on the silent receivers; ten whose names hang) and the
    victim, with endpoints at paths of ``victim``'s URL; a map each."""

    def __init__(self, deployment, api, silent, victim: Receiver, victim_endpoints: int = 1):
        self.deployment, self.api = deployment, api
        self.keys = {
            "victim": deployment.key,
            "silent": deployment.add_account("silent@example.com"),
            "hanging": deployment.add_account("hanging@example.com"),
        }
        urls = {
            "silent": [receiver.url for receiver in silent],
            "hanging": [hanging_url(number) for number in range(10)],
            "victim": [f"{victim.url}/{number}" for number in range(victim_endpoints)],
        }
        self.maps = {}
        for account, addresses in urls.items():
            for address in addresses:
                self.call(account, "POST", "/webhooks", 201, json={"url": address, "events": ["*"]})
            self.maps[account] = self.call(account, "POST", "/maps", 201, json={"title": "m"})["id"]

    def call(self, account: str, method: str, path: str, status: int, **kwargs):
        key = self.keys[account]
        return self.deployment.call(self.api, method, path, status, key=key, **kwargs)

    def attack(self, bulks: int = 1) -> None:
        """100 events per bulk and attacker."""
        spots = [{"name": f"s{number}", "lat": 0, "lng": 0} for number in range(100)]
        for account in ("silent", "hanging"):
            for _ in range(bulks):
                path = f"/maps/{self.maps[account]}/locations/bulk"
                self.call(account, "POST", path, 201, json={"locations": spots})

    def victim_events(self) -> dict[str, float]:
        """The victim's events, 0.2 s apart, the attack going on: when each was made, by id."""
        made = {}
        for number in range(VICTIM_EVENTS):
            spot = {"name": f"v{number}", "lat": 1, "lng": 2}
            self.call("victim", "POST", f"/maps/{self.maps['victim']}/locations", 201, json=spot)
            at = time.monotonic()
            made[self.call("victim", "GET", "/events?after=latest", 200)["next"]] = at
            if number % 5 == 0:
                self.attack()
            time.sleep(0.2)
        return made


def test_a_hostile_account_delays_nobody_when_serve_delivers(
    tmp_path, silent_receivers, victim_receiver
):
    with new_database(tmp_path) as url, deployed(url, tmp_path, FAIR_CONFIG) as deployment:
        api = deployment.serve("delivering", PYTHONPATH=str(HANGING_DNS), **RAISED_LIMITS)
        scene = Scene(deployment, api, silent_receivers, victim_receiver)
        scene.attack(ATTACK_EVENTS // 100)
        assert wait_until(lambda: sum(r.open_now for r in silent_receivers) >= 10, 30)
        latencies = victim_latencies(victim_receiver, scene.victim_events())
        assert max(latencies.values()) <= WITHIN_SECONDS, sorted(latencies.values())
        assert all(r.most_at_once <= 2 for r in silent_receivers)
        for receiver in silent_receivers:  # the attempts waiting on them end: a quick stop
            receiver.close()


def test_two_workers_on_postgresql_keep_every_bound_under_attack(
    postgres_server, tmp_path, silent_receivers, victim_receiver
):
    """Two workers: the victim's events each arrive within 5 s at both its
    endpoints, no endpoint ever has more than two attempts in flight across
    the two processes, and no attempt is sent twice."""
    if not backends.on_postgres():
        pytest.skip("run once, in the suite's PostgreSQL run (it takes half a minute)")
    with (
        new_database(tmp_path, postgres=True) as url,
        deployed(url, tmp_path, FAIR_CONFIG) as deployment,
    ):
        api = deployment.serve("api", MAPAPI_WEBHOOKS_DELIVER="0", **RAISED_LIMITS)
        scene = Scene(deployment, api, silent_receivers, victim_receiver, victim_endpoints=2)
        scene.attack(ATTACK_EVENTS // 100)
        deployment.worker("w1", PYTHONPATH=str(HANGING_DNS))
        deployment.worker("w2", PYTHONPATH=str(HANGING_DNS))
        assert wait_until(lambda: sum(r.open_now for r in silent_receivers) >= 10, 30)
        victim_receiver.hold = 0.1  # so that attempts to one endpoint overlap, if they may
        latencies = victim_latencies(victim_receiver, scene.victim_events(), endpoints=2)
        assert max(latencies.values()) <= WITHIN_SECONDS, sorted(latencies.values())
        assert all(receiver.most_at_once <= 2 for receiver in silent_receivers)
        assert set(victim_receiver.most_at_once) == {"/hook/0", "/hook/1"}
        assert max(victim_receiver.most_at_once.values()) <= 2

        victims = (
            "FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id "
            "WHERE w.url LIKE '%/hook/%'"
        )
        pending = f"SELECT 1 {victims} AND d.status = 'pending'"
        assert wait_until(lambda: not deployment.rows(pending), 30)
        attempts = deployment.rows(f"SELECT w.url, d.event_id {victims}")
        sent = Counter((r.path, r.headers["webhook-id"]) for r in victim_receiver.received)
        host = victim_receiver.url.removesuffix("/hook")
        assert sent == Counter((url.removeprefix(host), event) for url, event in attempts)
        for receiver in silent_receivers:
            receiver.close()


def test_an_accounts_share_shrinks_as_more_accounts_have_attempts_in_flight(app):
    """However many accounts' receivers hang, the next account finds room."""
    worker = DeliveryWorker(app)
    capacity = worker.capacity
    assert worker.share({}) == capacity // 4
    crowd = {f"account-{n}": worker.share({}) for n in range(6)}
    assert worker.share(crowd) == capacity // 7
    huge_crowd = {f"account-{n}": 2 for n in range(capacity)}
    assert worker.share(huge_crowd) == 2  # an endpoint's two, never less
