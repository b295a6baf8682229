"""Delivery in real processes: `mapapi worker` (two of them on one
PostgreSQL database never send one attempt twice; one killed mid-delivery
loses nothing) and `mapapi serve`'s background delivery."""

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import requests
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from standardwebhooks.webhooks import Webhook as Verifier

from mapapi import create_app
from mapapi.extensions import db

from . import backends
from .factories import create_account, create_key
from .helpers import ServeProcess, mapapi_program, wait_until
from .hostile_peers import SilentReceiver, hanging_dns_path, hanging_url
from .receiver import Receiver

API = "/api/v1"
#: Quick enough for a test: retries and leases in fractions of a second.
WORKER_CONFIG = """
WEBHOOKS_POLL_SECONDS = 0.05
WEBHOOKS_LEASE_SECONDS = 2
WEBHOOKS_RETRY_SCHEDULE = (0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2)
"""


class Deployment:
    """One database, the environment of `mapapi` commands on it, and a key."""

    def __init__(self, database_url: str, tmp_path: Path, config: str = WORKER_CONFIG):
        self.database_url = database_url
        self.tmp_path = tmp_path
        instance = tmp_path / "instance"
        instance.mkdir()
        (instance / "config.py").write_text(config)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MAPAPI_")}
        self.env.update(
            MAPAPI_DATABASE_URL=database_url,
            MAPAPI_INSTANCE_PATH=str(instance),
            MAPAPI_BOOTSTRAP="0",
            MAPAPI_WEBHOOKS_ALLOW_PRIVATE="1",
            MAPAPI_RATELIMIT_GENERAL="1000000 per hour",
        )
        self.processes: list[subprocess.Popen] = []
        self.servers: list[ServeProcess] = []
        self.command("db", "upgrade")
        self.command("accounts", "create", "hooks@example.com")
        self.key = self.command("keys", "create", "hooks@example.com", "--name", "t").strip()

    def command(self, *args) -> str:
        result = subprocess.run(
            [mapapi_program(), *args], cwd=self.tmp_path, env=self.env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, (args, result.stderr)
        return result.stdout

    def worker(self, name: str, **env) -> subprocess.Popen:
        with open(self.tmp_path / f"{name}.err", "wb") as err:
            process = subprocess.Popen(
                [mapapi_program(), "worker"], cwd=self.tmp_path, env={**self.env, **env},
                stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        self.processes.append(process)
        return process

    def serve(self, name: str, **env) -> ServeProcess:
        server = ServeProcess({**self.env, **env}, self.tmp_path, name, threads=8)
        self.servers.append(server)
        server.wait_until_up(20)
        return server

    def call(self, server: ServeProcess, method: str, path: str, status: int, **kwargs):
        response = requests.request(
            method, server.base + API + path, timeout=15,
            headers={"Authorization": f"Bearer {self.key}"}, **kwargs,
        )  # fmt: skip
        assert response.status_code == status, response.text
        return response.json()["data"]

    def rows(self, sql: str) -> list:
        engine = create_engine(self.database_url)
        try:
            with engine.connect() as connection:
                return connection.execute(text(sql)).all()
        finally:
            engine.dispose()

    def close(self) -> None:
        running = [process for process in self.processes if process.poll() is None]
        for process in running:  # all at once: each lets its attempts in flight finish
            process.terminate()
        for process in running:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for server in self.servers:
            server.stop()


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


def _deployment(database_url, tmp_path):
    deployment = Deployment(database_url, tmp_path)
    try:
        yield deployment
    finally:
        deployment.close()


@pytest.fixture
def postgres_deployment(postgres_server, tmp_path):
    url = backends.create_postgres_database()
    try:
        yield from _deployment(url, tmp_path)
    finally:
        backends.drop_postgres_database(url)


@pytest.fixture
def deployment(app_config, tmp_path):
    """On the suite's backend: a new SQLite file, or a new PostgreSQL database."""
    if make_url(app_config["SQLALCHEMY_DATABASE_URI"]).get_backend_name() == "postgresql":
        url = backends.create_postgres_database()
        try:
            yield from _deployment(url, tmp_path)
        finally:
            backends.drop_postgres_database(url)
    else:
        yield from _deployment(f"sqlite:///{tmp_path / 'hooks.sqlite3'}", tmp_path)


def test_two_workers_on_postgresql_never_send_one_attempt_twice(postgres_deployment, receiver):
    deployment = postgres_deployment
    api = deployment.serve("api", MAPAPI_WEBHOOKS_DELIVER="0")
    endpoints = [
        deployment.call(api, "POST", "/webhooks", 201,
                        json={"url": f"{receiver.url}/{index}", "events": ["*"]})
        for index in range(3)
    ]  # fmt: skip
    receiver.hold = 0.02
    # Every seventh request fails: retries are attempts too, and are shared.
    receiver.script.extend([500 if index % 7 == 3 else 204 for index in range(400)])
    deployment.worker("w1"), deployment.worker("w2")
    pings = [
        (endpoint["id"], deployment.call(api, "POST", f"/webhooks/{endpoint['id']}/ping", 202)["eventId"])
        for _ in range(60)
        for endpoint in endpoints
    ]  # fmt: skip

    def done():
        pending = deployment.rows(
            "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'"
        )[0][0]
        return pending == 0 and len(receiver.received) >= len(pings)

    assert wait_until(done, 120), deployment.rows("SELECT status, count(*) FROM webhook_deliveries GROUP BY status")
    attempts = deployment.rows(
        "SELECT webhook_id, event_id, attempt, status FROM webhook_deliveries"
    )
    assert {(w, e) for w, e, _, s in attempts if s == "succeeded"} == set(pings)
    sent = Counter(
        (received.path.rsplit("/", 1)[1], received.headers["webhook-id"])
        for received in receiver.received
    )
    index_of = {endpoint["id"]: str(index) for index, endpoint in enumerate(endpoints)}
    made = Counter((index_of[w], e) for w, e, _, _ in attempts)
    assert sent == made  # as many requests as attempts: none sent twice
    assert any(attempt > 1 for _, _, attempt, _ in attempts)
    secret = {str(i): e["secret"] for i, e in enumerate(endpoints)}
    for received in receiver.received:
        Verifier(secret[received.path.rsplit("/", 1)[1]]).verify(received.body, received.headers)


def test_a_worker_killed_mid_delivery_loses_nothing(deployment, receiver):
    api = deployment.serve("api", MAPAPI_WEBHOOKS_DELIVER="0")
    endpoint = deployment.call(
        api, "POST", "/webhooks", 201, json={"url": receiver.url, "events": ["*"]}
    )
    receiver.hold = 30  # the first request is never answered in time
    event_id = deployment.call(api, "POST", f"/webhooks/{endpoint['id']}/ping", 202)["eventId"]
    first = deployment.worker("first")
    assert receiver.wait_for(lambda got: len(got) == 1, 30)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    receiver.hold = 0
    deployment.worker("second")
    assert receiver.wait_for(lambda got: len(got) == 2, 30)
    assert {got.headers["webhook-id"] for got in receiver.received} == {event_id}
    assert receiver.received[0].body == receiver.received[1].body

    def recorded():
        log = deployment.call(api, "GET", f"/webhooks/{endpoint['id']}/deliveries", 200)
        return [(a["attempt"], a["status"]) for a in log["deliveries"]] == [(1, "succeeded")]

    assert wait_until(recorded, 20)


def test_serve_delivers_in_the_background_unless_turned_off(deployment, receiver):
    quiet = deployment.serve("quiet", MAPAPI_WEBHOOKS_DELIVER="0")
    endpoint = deployment.call(
        quiet, "POST", "/webhooks", 201, json={"url": receiver.url, "events": ["*"]}
    )
    deployment.call(quiet, "POST", f"/webhooks/{endpoint['id']}/ping", 202)
    assert not receiver.wait_for(lambda got: got, 2)
    quiet.stop()
    deployment.serve("delivering")
    assert receiver.wait_for(lambda got: len(got) == 1, 20)
    event = Verifier(endpoint["secret"]).verify(receiver.received[0].body, receiver.received[0].headers)
    assert event["type"] == "ping"


def test_serve_and_worker_warn_at_start_while_private_addresses_are_allowed(deployment):
    warning = "WARNING mapapi.delivery.addresses: MAPAPI_WEBHOOKS_ALLOW_PRIVATE=1:"
    for allowed in ("1", "0"):
        worker = deployment.worker(f"worker-{allowed}", MAPAPI_WEBHOOKS_ALLOW_PRIVATE=allowed)
        log = deployment.tmp_path / f"worker-{allowed}.err"
        assert wait_until(lambda log=log: "Delivering webhooks" in log.read_text(), 30)
        server = deployment.serve(f"serve-{allowed}", MAPAPI_WEBHOOKS_ALLOW_PRIVATE=allowed)
        for written in (log.read_text(), server.stderr()):
            assert (warning in written) is (allowed == "1"), written
        worker.terminate()
        server.stop()


def test_worker_stops_on_sigterm(deployment):
    worker = deployment.worker("stopping")
    log = deployment.tmp_path / "stopping.err"
    assert wait_until(lambda: "Delivering webhooks" in log.read_text(), 30)
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0


#: Real leases (an attempt to a silent receiver lasts its whole 10 s), quick retries.
FAIR_CONFIG = """
WEBHOOKS_POLL_SECONDS = 0.2
WEBHOOKS_RETRY_SCHEDULE = (0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2)
"""


def test_two_workers_on_postgresql_keep_every_bound_under_attack(postgres_server, tmp_path):
    """Two workers, a hostile account's silent endpoints and hanging names,
    a flood of its events: the victim's events each arrive within 5 s, no
    endpoint ever has more than two attempts in flight across the two
    processes, and no attempt is sent twice."""
    url = backends.create_postgres_database()
    deployment = Deployment(url, tmp_path, FAIR_CONFIG)
    silent = [SilentReceiver() for _ in range(10)]
    victim = Receiver()
    same_database = create_app({"SQLALCHEMY_DATABASE_URI": url})
    try:
        api = deployment.serve(
            "api", MAPAPI_WEBHOOKS_DELIVER="0", MAPAPI_RATELIMIT_BULK="1000000 per hour"
        )
        keys = {"victim": deployment.key}
        for name in ("silent", "hanging"):
            create_account(same_database, f"{name}@example.com")
            keys[name] = create_key(same_database, f"{name}@example.com")

        def call(account, method, path, status, **kwargs):
            response = requests.request(
                method, api.base + API + path, timeout=30,
                headers={"Authorization": f"Bearer {keys[account]}"}, **kwargs,
            )  # fmt: skip
            assert response.status_code == status, response.text
            return response.json()["data"]

        endpoints = {
            "silent": [receiver.url for receiver in silent],
            "hanging": [hanging_url(number) for number in range(10)],
            "victim": [f"{victim.url}/{number}" for number in range(2)],
        }
        maps, secrets = {}, {}
        for account, urls in endpoints.items():
            for address in urls:
                created = call(account, "POST", "/webhooks", 201,
                               json={"url": address, "events": ["*"]})  # fmt: skip
                secrets[created["id"]] = created["secret"]
            maps[account] = call(account, "POST", "/maps", 201, json={"title": "m"})["id"]
        spots = [{"name": f"s{n}", "lat": 0, "lng": 0} for n in range(100)]
        for account in ("silent", "hanging"):
            for _ in range(3):
                call(account, "POST", f"/maps/{maps[account]}/locations/bulk", 201,
                     json={"locations": spots})  # fmt: skip
        hanging_dns = hanging_dns_path(tmp_path / "hanging_dns")
        deployment.worker("w1", PYTHONPATH=hanging_dns)
        deployment.worker("w2", PYTHONPATH=hanging_dns)
        assert wait_until(lambda: sum(r.open_now for r in silent) >= 10, 30)
        victim.hold = 0.1
        made = {}
        for number in range(20):
            call("victim", "POST", f"/maps/{maps['victim']}/locations", 201,
                 json={"name": f"v{number}", "lat": 1, "lng": 2})  # fmt: skip
            at = time.monotonic()
            made[call("victim", "GET", "/events?after=latest", 200)["next"]] = at
            call("silent", "POST", f"/maps/{maps['silent']}/locations/bulk", 201,
                 json={"locations": spots})  # fmt: skip
            time.sleep(0.2)

        def all_arrived():
            arrived = Counter(r.headers["webhook-id"] for r in victim.received)
            return all(arrived[event_id] >= 2 for event_id in made)  # at both endpoints

        assert victim.wait_for(lambda _got: all_arrived(), 60)
        first = {}
        for received in victim.received:
            first.setdefault((received.path, received.headers["webhook-id"]), received.at)
        latencies = [at - made[event] for (_path, event), at in first.items() if event in made]
        assert max(latencies) <= 5.0, sorted(latencies)
        assert all(receiver.most_at_once <= 2 for receiver in silent)
        assert set(victim.most_at_once) == {"/hook/0", "/hook/1"}
        assert max(victim.most_at_once.values()) <= 2

        def settled():
            return not deployment.rows(
                "SELECT 1 FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id "
                "WHERE w.url LIKE '%/hook/%' AND d.status = 'pending'"
            )

        assert wait_until(settled, 30)
        attempts = deployment.rows(
            "SELECT w.url, d.event_id FROM webhook_deliveries d "
            "JOIN webhooks w ON w.id = d.webhook_id WHERE w.url LIKE '%/hook/%'"
        )
        sent = Counter((r.path, r.headers["webhook-id"]) for r in victim.received)
        assert sent == Counter((address.removeprefix(victim.url[: -len("/hook")]), event)
                               for address, event in attempts)  # fmt: skip
    finally:
        for receiver in silent:
            receiver.close()
        deployment.close()
        victim.close()
        with same_database.app_context():
            db.engine.dispose()
        backends.drop_postgres_database(url)
