"""Delivery in real processes: `mapapi worker` (two of them on one
PostgreSQL database never send one attempt twice; one killed mid-delivery
loses nothing) and `mapapi serve`'s background delivery."""

import signal
from collections import Counter

import pytest
from standardwebhooks.webhooks import Webhook as Verifier

from .deployment import deployed, new_database
from .helpers import wait_until
from .receiver import Receiver


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def postgres_deployment(postgres_server, tmp_path):
    with new_database(tmp_path, postgres=True) as url, deployed(url, tmp_path) as deployment:
        yield deployment


@pytest.fixture
def deployment(tmp_path):
    """On the suite's backend: a new SQLite file, or a new PostgreSQL database."""
    with new_database(tmp_path) as url, deployed(url, tmp_path) as deployment:
        yield deployment


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
