"""Webhook delivery: a real receiver on 127.0.0.1, the worker loop, the
sender's bounds and the address guard at every attempt."""

import asyncio
import json
import logging
import socket
import ssl
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import select
from standardwebhooks.webhooks import Webhook as Verifier

from mapapi.delivery import sender
from mapapi.delivery.addresses import (
    AddressRefused,
    Destination,
    Lookups,
    destination,
    parse_url,
)
from mapapi.delivery.sender import MAX_ANSWER_BYTES
from mapapi.delivery.worker import DeliveryWorker
from mapapi.extensions import db
from mapapi.services.events import data_text, event_body, read_after, record_one
from mapapi.storage.models import Event, WebhookDelivery
from mapapi.timeutil import parse_timestamp

from .helpers import data_of, wait_until
from .hostile_peers import HANGING_DOMAIN, HangingResolver
from .receiver import Receiver
from .tls import serve_over_tls

QUICK_SCHEDULE = (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1)


@pytest.fixture
def app_config(app_config):
    app_config.update(
        WEBHOOKS_DELIVER="0",
        WEBHOOKS_ALLOW_PRIVATE="1",
        WEBHOOKS_RETRY_SCHEDULE=QUICK_SCHEDULE,
        WEBHOOKS_POLL_SECONDS=0.05,
    )
    return app_config


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def worker(app):
    """Starts the delivery loop on demand; stops it at the end of the test."""
    started = []

    def start():
        loop = DeliveryWorker(app)
        thread = threading.Thread(target=loop.run, daemon=True)
        thread.start()
        started.append((loop, thread))
        return loop

    yield start
    for loop, thread in started:
        loop.stop.set()
        thread.join(timeout=30)
        assert not thread.is_alive()


def create_endpoint(api, url, **fields):
    return data_of(api.post("/webhooks", json={"url": url, "events": ["*"], **fields}), 201)


def attempts(api, webhook_id):
    """Every delivery attempt of the endpoint, newest first."""
    found, page = [], 1
    while True:
        listed = data_of(api.get(f"/webhooks/{webhook_id}/deliveries?pageSize=100&page={page}"))
        found += listed["deliveries"]
        if page >= listed["pagination"]["totalPages"]:
            return found
        page += 1


def make_events(app, account_id, changes):
    """Record events ``(type, map_id, data)`` as a change does, committed."""
    with app.app_context():
        ids = [record_one(account_id, kind, map_id, data_text(data)) for kind, map_id, data in changes]
        db.session.commit()
    return [str(event_id) for event_id in ids]


def feed_bodies(app, account_id) -> dict[str, bytes]:
    """Every event of the account as the feed shows it, by id."""
    with app.app_context():
        return {str(event.id): event_body(event) for event in read_after(account_id, None, 1000)}


def verified(secret, received):
    """The body, after standardwebhooks has checked the signature."""
    return Verifier(secret).verify(received.body, received.headers)


# --- the whole path, through failures ---------------------------------------------------------


def make_changes(api) -> None:
    """Changes of every kind through the API, side effects included."""
    map_id = data_of(api.post("/maps", json={"title": "Synced"}), 201)["id"]
    tag = data_of(api.post(f"/maps/{map_id}/tags", json={"name": "t"}), 201)
    layer = data_of(api.post(f"/maps/{map_id}/layers", json={"name": "L"}), 201)
    data_of(api.post(f"/maps/{map_id}/layers", json={"name": "First", "order": 0}), 201)
    category = data_of(api.post(f"/maps/{map_id}/categories", json={"name": "c"}), 201)
    spots = [{"name": f"S{i}", "lat": i, "lng": -i, "tagIds": [tag["id"]]} for i in range(5)]
    created = data_of(api.post(f"/maps/{map_id}/locations/bulk", json={"locations": spots}), 201)
    first = created["created"][0]["id"]
    data_of(api.put(f"/maps/{map_id}/locations/{first}", json={"categoryId": category["id"]}))
    data_of(api.put(f"/maps/{map_id}/locations/{first}/layers", json={"layerIds": [layer["id"]]}))
    data_of(api.delete(f"/maps/{map_id}/tags/{tag['id']}"))
    data_of(api.delete(f"/maps/{map_id}/locations/{created['created'][1]['id']}"))
    data_of(api.put(f"/maps/{map_id}", json={"title": "Synced again"}))
    data_of(api.delete(f"/maps/{map_id}"))


def followed_feed(api) -> list[dict]:
    """Every event of the account, following ``next`` as a client does."""
    events, after = [], None
    while True:
        page = data_of(api.get("/events?limit=100" + (f"&after={after}" if after else "")))
        events += page["events"]
        after = page["next"]
        if not page["hasMore"]:
            return events


def test_every_event_arrives_signed_exactly_as_the_feed_shows_it_through_failures(
    app, api, account, receiver, worker
):
    endpoint = create_endpoint(api, receiver.url)
    # Refused twice, then redirected, then "too many", then accepted.
    receiver.script.extend([500, 503, 302, 429])
    make_changes(api)
    worker()
    first_round = len(followed_feed(api))
    assert receiver.wait_for(lambda got: len({r.headers["webhook-id"] for r in got}) >= first_round)
    receiver.go_down()
    make_changes(api)
    time.sleep(0.5)
    receiver.come_up()
    feed = followed_feed(api)
    assert len(feed) > 2 * 20 and {event["type"] for event in feed} >= {
        "map.created", "map.updated", "map.deleted", "location.created", "location.updated",
        "location.deleted", "tag.created", "tag.deleted", "layer.created", "layer.updated",
        "category.created",
    }  # fmt: skip
    by_id = {event["id"]: event for event in feed}
    bodies = feed_bodies(app, account)

    def all_succeeded():
        return {a["eventId"] for a in attempts(api, endpoint["id"]) if a["status"] == "succeeded"}

    deadline = time.monotonic() + 30
    while all_succeeded() != set(by_id) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all_succeeded() == set(by_id)
    assert {r.headers["webhook-id"] for r in receiver.received} == set(by_id)
    for got in receiver.received:
        event = verified(endpoint["secret"], got)
        assert event == by_id[event["id"]]  # the feed's object...
        assert list(event) == ["id", "type", "createdAt", "mapId", "data"]
        assert got.body == bodies[event["id"]]  # ...byte for byte
        assert got.headers["webhook-id"] == event["id"]
        assert got.headers["Content-Type"] == "application/json"
        assert abs(int(got.headers["webhook-timestamp"]) - time.time()) < 60
    log = attempts(api, endpoint["id"])
    failed = [a for a in log if a["status"] == "failed"]
    assert {a["responseStatus"] for a in failed} >= {500, 503, 302, 429}
    assert any(a["responseStatus"] is None and "connection" in a["error"] for a in failed)
    redirect = next(a for a in failed if a["responseStatus"] == 302)
    assert "redirect" in redirect["error"]
    assert all(a["nextAttemptAt"] for a in failed)
    assert not any(r.path == "/elsewhere" for r in receiver.received)
    for attempt in log:
        if attempt["status"] == "succeeded":
            assert attempt["responseStatus"] == 204 and attempt["error"] is None
            assert attempt["nextAttemptAt"] is None and attempt["durationMs"] >= 0
    retried = {a["eventId"] for a in log if a["attempt"] > 1}
    assert retried
    for event_id in retried:  # the same webhook-id and body on every attempt that arrived
        answered = [a for a in log if a["eventId"] == event_id and a["responseStatus"]]
        sent = [r for r in receiver.received if r.headers["webhook-id"] == event_id]
        assert len(sent) == len(answered) and len({r.body for r in sent}) == 1


def test_an_attempt_is_given_up_after_eight(app, api, account, receiver, worker):
    receiver.default = 500
    endpoint = create_endpoint(api, receiver.url)
    event_id = data_of(api.post(f"/webhooks/{endpoint['id']}/ping"), 202)["eventId"]
    worker()
    assert receiver.wait_for(lambda got: len(got) >= 8)
    time.sleep(0.5)
    assert len(receiver.received) == 8
    log = attempts(api, endpoint["id"])
    assert [a["attempt"] for a in log] == [8, 7, 6, 5, 4, 3, 2, 1]
    assert {a["eventId"] for a in log} == {event_id}
    assert all(a["status"] == "failed" and a["responseStatus"] == 500 for a in log)
    assert log[0]["nextAttemptAt"] is None
    assert all(a["nextAttemptAt"] is not None for a in log[1:])


def test_an_attempt_is_logged_when_scheduled_then_when_made(app, api, receiver, worker):
    app.config["WEBHOOKS_RETRY_SCHEDULE"] = (1.0,) * 7
    receiver.script.append(500)
    endpoint = create_endpoint(api, receiver.url)
    data_of(api.post(f"/webhooks/{endpoint['id']}/ping"), 202)
    worker()

    def second_attempt():
        log = attempts(api, endpoint["id"])
        return log[0] if log[0]["attempt"] == 2 else None

    assert wait_until(second_attempt, 20)
    pending = second_attempt()
    assert pending["status"] == "pending"  # due a second after it was scheduled
    scheduled = parse_timestamp(pending["createdAt"])
    due = parse_timestamp(pending["nextAttemptAt"])
    assert timedelta(seconds=0.9) <= due - scheduled <= timedelta(seconds=1.1)
    assert receiver.wait_for(lambda got: len(got) == 2)
    assert wait_until(lambda: second_attempt()["status"] == "succeeded", 20)
    made = parse_timestamp(second_attempt()["createdAt"])
    assert due <= made <= due + timedelta(seconds=5)


def test_the_retry_schedule_defaults_to_the_contracts():
    from mapapi.config import defaults

    assert defaults("x")["WEBHOOKS_RETRY_SCHEDULE"] == (5, 30, 120, 600, 3600, 21600, 86400)


def test_ping_reaches_that_endpoint_alone(app, api, receiver, worker):
    endpoint = create_endpoint(api, receiver.url)
    other = Receiver()
    try:
        create_endpoint(api, other.url)
        event_id = data_of(api.post(f"/webhooks/{endpoint['id']}/ping"), 202)["eventId"]
        worker()
        assert receiver.wait_for(lambda got: len(got) == 1)
        event = verified(endpoint["secret"], receiver.received[0])
        assert event["id"] == event_id and event["type"] == "ping"
        assert event["mapId"] is None and event["data"] == {"webhookId": endpoint["id"]}
        assert list(event) == ["id", "type", "createdAt", "mapId", "data"]
        time.sleep(0.3)
        assert other.received == []
    finally:
        other.close()


def test_filters_by_type_and_map(app, api, account, receiver, worker):
    endpoint = create_endpoint(api, receiver.url, events=["location.*", "map.deleted"])
    map_id = data_of(api.post("/maps", json={"title": "Kept"}), 201)["id"]
    scoped = create_endpoint(api, receiver.url, mapId=map_id)
    made = make_events(
        app,
        account,
        [
            ("map.created", "x", {"id": "x"}),
            ("location.created", "x", {"id": "a", "mapId": "x"}),
            ("tag.created", map_id, {"id": "t", "mapId": map_id}),
            ("map.deleted", "x", {"id": "x"}),
        ],
    )
    worker()
    assert receiver.wait_for(lambda got: len(got) >= 3)
    time.sleep(0.3)
    by_endpoint = {
        endpoint["id"]: {a["eventId"] for a in attempts(api, endpoint["id"])},
        scoped["id"]: {a["eventId"] for a in attempts(api, scoped["id"])},
    }
    assert by_endpoint[endpoint["id"]] == {made[1], made[3]}
    created_events = {r.headers["webhook-id"] for r in receiver.received}
    assert made[2] in by_endpoint[scoped["id"]] and made[0] not in by_endpoint[scoped["id"]]
    assert made[2] in created_events


def test_events_before_creation_or_while_disabled_are_not_sent(app, api, account, receiver, worker):
    before = make_events(app, account, [("map.created", "a", {"id": "a"})])
    endpoint = create_endpoint(api, receiver.url)
    sent = make_events(app, account, [("map.created", "b", {"id": "b"})])
    data_of(api.put(f"/webhooks/{endpoint['id']}", json={"enabled": False}))
    time.sleep(0.01)
    while_disabled = make_events(app, account, [("map.created", "c", {"id": "c"})])
    worker()
    time.sleep(0.5)
    data_of(api.put(f"/webhooks/{endpoint['id']}", json={"enabled": True}))
    time.sleep(0.01)
    after = make_events(app, account, [("map.created", "d", {"id": "d"})])
    assert receiver.wait_for(lambda got: len(got) >= 2)
    time.sleep(0.5)
    ids = [r.headers["webhook-id"] for r in receiver.received]
    assert sorted(ids) == sorted(sent + after)
    assert not set(ids) & set(before + while_disabled)


# --- the sender's bounds ----------------------------------------------------------------------


def local(url: str) -> Destination:
    return asyncio.run(destination(url, allow_private=True))


def post(*args, **kwargs) -> sender.Outcome:
    """One attempt's POST, on an event loop of its own."""
    return asyncio.run(sender.post(*args, **kwargs))


def test_the_sender_connects_to_the_checked_address_and_keeps_the_name(receiver):
    # A name that resolves nowhere: the sender never looks it up itself.
    target = parse_url(f"http://hooks.invalid:{receiver.port}/in?x=1")
    outcome = post(Destination(target, "127.0.0.1"), {"webhook-id": "1"}, b"{}")
    assert outcome.succeeded and outcome.response_status == 204
    [got] = receiver.received
    assert got.headers["Host"] == f"hooks.invalid:{receiver.port}"
    assert got.path == "/in?x=1"


def test_a_name_resolving_to_loopback_is_refused_at_the_attempt():
    with pytest.raises(AddressRefused):
        asyncio.run(destination("http://localhost:9/", allow_private=False))
    with pytest.raises(AddressRefused):
        asyncio.run(destination("http://LOCALHOST:9/", allow_private=False))
    assert local("http://localhost:9/").address == "127.0.0.1"


def test_a_private_address_found_at_the_attempt_fails_it(app, api, receiver, worker):
    endpoint = create_endpoint(api, f"http://localhost:{receiver.port}/hook")  # allowed then
    app.config["WEBHOOKS_ALLOW_PRIVATE"] = False  # the rule holds again
    data_of(api.post(f"/webhooks/{endpoint['id']}/ping"), 202)
    worker()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and attempts(api, endpoint["id"])[-1]["status"] == "pending":
        time.sleep(0.05)
    first = attempts(api, endpoint["id"])[-1]
    assert first["status"] == "failed" and first["responseStatus"] is None
    assert first["error"].startswith("address refused")
    assert receiver.received == []


def test_a_hanging_lookup_delays_its_own_name_only_and_is_shared():
    resolver = HangingResolver()
    lookups = Lookups(resolver)

    async def resolve_both():
        hanging = [lookups.resolve_async(f"a{HANGING_DOMAIN}", 80, timeout=0.5) for _ in range(20)]
        started = time.monotonic()
        found = await lookups.resolve_async("localhost", 80, timeout=5)
        quick = time.monotonic() - started
        outcomes = await asyncio.gather(*hanging, return_exceptions=True)
        return found, quick, outcomes

    try:
        found, quick, outcomes = asyncio.run(resolve_both())
        assert "127.0.0.1" in found and quick < 0.5
        assert all(isinstance(outcome, OSError) for outcome in outcomes)
        assert str(outcomes[0]) == "no answer within 0.5 s"  # no host name: it is logged
        with pytest.raises(OSError):
            lookups.resolve(f"a{HANGING_DOMAIN}", 80, timeout=0.2)
        assert resolver.calls == {f"a{HANGING_DOMAIN}": 1}  # twenty-one waits, one lookup
    finally:
        resolver.release()


class RawServer:
    """A TCP server that answers each connection with ``behave(socket)``."""

    def __init__(self, behave):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sent = 0

        def serve():
            while True:
                try:
                    connection, _ = self.listener.accept()
                except OSError:
                    return
                threading.Thread(target=behave, args=(self, connection), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()

    def close(self):
        self.listener.close()


def _read_request(connection):
    connection.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)


def test_a_receiver_that_never_answers_times_out():
    def silent(server, connection):
        _read_request(connection)
        time.sleep(5)
        connection.close()

    server = RawServer(silent)
    started = time.monotonic()
    outcome = post(local(f"http://127.0.0.1:{server.port}/"), {}, b"{}", timeout=0.5)
    assert time.monotonic() - started < 2
    assert not outcome.succeeded and "no answer within" in outcome.error
    server.close()


def test_a_trickling_receiver_cannot_stretch_the_deadline():
    def trickle(server, connection):
        _read_request(connection)
        try:
            for byte in b"HTTP/1.1 200 OK\r\n":
                connection.sendall(bytes([byte]))
                time.sleep(0.1)
        except OSError:
            pass

    server = RawServer(trickle)
    started = time.monotonic()
    outcome = post(local(f"http://127.0.0.1:{server.port}/"), {}, b"{}", timeout=0.6)
    assert time.monotonic() - started < 1.5
    assert not outcome.succeeded
    server.close()


def test_at_most_a_bounded_number_of_bytes_is_read():
    def flood(server, connection):
        _read_request(connection)
        try:
            while True:  # no line end, ever
                connection.sendall(b"x" * 65536)
                server.sent += 65536
        except OSError:
            pass

    server = RawServer(flood)
    outcome = post(local(f"http://127.0.0.1:{server.port}/"), {}, b"{}", timeout=5)
    assert not outcome.succeeded and "status line" in outcome.error
    server.close()

    def endless_success(server, connection):
        _read_request(connection)
        try:
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n")
            while True:
                connection.sendall(b"x" * 65536)
        except OSError:
            pass

    server = RawServer(endless_success)
    started = time.monotonic()
    outcome = post(local(f"http://127.0.0.1:{server.port}/"), {}, b"{}", timeout=5)
    assert outcome.succeeded and time.monotonic() - started < 2
    server.close()
    assert MAX_ANSWER_BYTES <= 65536


def test_a_refused_connection_fails_the_attempt():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    outcome = post(local(f"http://127.0.0.1:{port}/"), {}, b"{}")
    assert not outcome.succeeded and outcome.response_status is None
    assert outcome.error.startswith("connection failed")


def test_the_secret_is_never_logged(app, api, receiver, worker, caplog):
    caplog.set_level(logging.DEBUG)
    receiver.script.extend([500])
    endpoint = create_endpoint(api, receiver.url)
    data_of(api.post(f"/webhooks/{endpoint['id']}/ping"), 202)
    worker()
    assert receiver.wait_for(lambda got: len(got) >= 2)
    time.sleep(0.2)
    secret = endpoint["secret"]
    raw = secret.removeprefix("whsec_")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "attempt 1" in logged  # the failure was logged...
    assert secret not in logged and raw not in logged  # ...without the secret
    with app.app_context():
        stored = db.session.scalars(select(WebhookDelivery.body)).all()
        assert all(raw not in body for body in stored)
        assert repr(db.session.scalars(select(Event)).first()).find(raw) == -1
    assert json.loads(receiver.received[0].body)["data"] == {"webhookId": endpoint["id"]}


@pytest.fixture
def https_receiver(tmp_path, receiver):
    """``receiver`` behind TLS, with a certificate for ``localhost`` made here."""
    cert = serve_over_tls(receiver.server, tmp_path)
    return receiver, cert


def test_https_verifies_the_certificate_and_the_url_host(https_receiver):
    receiver, cert = https_receiver
    trusting = ssl.create_default_context(cafile=str(cert))
    good = post(local(f"https://localhost:{receiver.port}/in"), {}, b"{}", tls=trusting)
    assert good.succeeded, good.error
    assert receiver.received[0].headers["Host"] == f"localhost:{receiver.port}"
    # The system's authorities do not know this certificate: refused.
    unknown = post(local(f"https://localhost:{receiver.port}/in"), {}, b"{}")
    assert not unknown.succeeded and unknown.error.startswith("TLS failed")
    # Reached by address, the name checked is the URL's, which the certificate does not name.
    wrong_name = post(
        Destination(parse_url(f"https://hooks.invalid:{receiver.port}/"), "127.0.0.1"),
        {}, b"{}", tls=trusting,
    )  # fmt: skip
    assert not wrong_name.succeeded and wrong_name.error.startswith("TLS failed")
    assert len(receiver.received) == 1
