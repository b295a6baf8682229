"""Endpoints that keep failing switch off: ``disabledReason``, their pending
attempts given up, a ``webhook.disabled`` event for the account's other
endpoints, and a PUT that switches them back on."""

import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import select
from standardwebhooks.webhooks import Webhook as Verifier

from mapapi.delivery import attempts
from mapapi.delivery.claims import Claimed
from mapapi.delivery.sender import Outcome
from mapapi.delivery.worker import DeliveryWorker
from mapapi.extensions import db
from mapapi.services.events import data_text, record_one
from mapapi.services.webhooks import GIVEN_UP
from mapapi.storage.models import Webhook, WebhookDelivery
from mapapi.timeutil import parse_timestamp, utcnow

from .helpers import data_of
from .receiver import Receiver

#: 1.8 seconds.
HOURS = 0.0005


@pytest.fixture
def app_config(app_config):
    app_config.update(
        WEBHOOKS_DELIVER="0",
        WEBHOOKS_ALLOW_PRIVATE="1",
        WEBHOOKS_RETRY_SCHEDULE=(0.1,) * 7,
        WEBHOOKS_POLL_SECONDS=0.05,
        WEBHOOKS_DISABLE_AFTER_HOURS=HOURS,
    )
    return app_config


@pytest.fixture
def receivers():
    made = {name: Receiver() for name in ("failing", "watcher", "other")}
    made["failing"].default = 500
    yield made
    for receiver in made.values():
        receiver.close()


def test_an_endpoint_failing_for_the_hours_set_is_switched_off_and_a_put_switches_it_on(
    app, api, account, receivers
):
    def create(receiver, events):
        body = {"url": receivers[receiver].url, "events": events}
        return data_of(api.post("/webhooks", json=body), 201)

    failing = create("failing", ["*"])
    watcher = create("watcher", ["webhook.*"])
    create("other", ["map.*"])

    def make_event():
        with app.app_context():
            record_one(account, "map.created", "m", data_text({"id": "m"}))
            db.session.commit()

    def switched_off():
        return not data_of(api.get(f"/webhooks/{failing['id']}"))["enabled"]

    worker = DeliveryWorker(app)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not switched_off() and time.monotonic() < deadline:
            make_event()
            time.sleep(0.1)
        shown = data_of(api.get(f"/webhooks/{failing['id']}"))
        assert shown["enabled"] is False
        reason = f"every attempt failed for {HOURS:g} hours; last: HTTP 500"
        assert shown["disabledReason"] == reason
        assert shown["updatedAt"] > failing["updatedAt"]
        log = data_of(api.get(f"/webhooks/{failing['id']}/deliveries?pageSize=100"))["deliveries"]
        assert not [attempt for attempt in log if attempt["status"] == "pending"]
        # Switched off once the failures had lasted the hours set (1.8 s).
        with app.app_context():
            began = db.session.scalar(
                select(Webhook.failing_since).where(Webhook.id == failing["id"])
            )
        assert parse_timestamp(shown["updatedAt"]) - began >= timedelta(hours=HOURS)

        [event] = data_of(api.get("/events?types=webhook.*"))["events"]
        assert event["type"] == "webhook.disabled" and event["mapId"] is None
        assert event["data"] == shown
        assert receivers["watcher"].wait_for(
            lambda got: any(r.headers["webhook-id"] == event["id"] for r in got)
        )
        [got] = [r for r in receivers["watcher"].received if r.headers["webhook-id"] == event["id"]]
        assert Verifier(watcher["secret"]).verify(got.body, got.headers) == event
        make_event()  # while it is off: never sent to it
        time.sleep(0.5)
        assert not any(r.headers["webhook-id"] == event["id"] for r in receivers["other"].received)
        sent_to_failing = {r.headers["webhook-id"] for r in receivers["failing"].received}
        assert event["id"] not in sent_to_failing

        receivers["failing"].default = 204
        back = data_of(
            api.put(f"/webhooks/{failing['id']}", json={**shown, "enabled": True}),
        )
        assert back["enabled"] is True and back["disabledReason"] is None
        with app.app_context():
            new = str(record_one(account, "map.created", "m", data_text({"id": "m"})))
            db.session.commit()
        assert receivers["failing"].wait_for(
            lambda got: any(r.headers["webhook-id"] == new for r in got)
        )
        assert not {r.headers["webhook-id"] for r in receivers["failing"].received} - (
            sent_to_failing | {new}
        )
        assert data_of(api.get(f"/webhooks/{failing['id']}"))["enabled"] is True
    finally:
        worker.stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


def test_a_success_in_between_keeps_an_endpoint_on(app, api, account):
    """Only an unbroken run of failures as long as the hours set switches one off."""
    app.config["WEBHOOKS_DISABLE_AFTER_HOURS"] = 2.0
    body = {"url": "https://93.184.215.14/in", "events": ["*"]}
    created = [data_of(api.post("/webhooks", json=body), 201) for _ in range(3)]
    now = utcnow()
    failed = Outcome(None, "connection failed: Connection refused")
    succeeded = Outcome(204, None)

    def outcome(webhook, result, hours_ago):
        claimed = Claimed(
            "AAAAAAAAAAAAAAAAAAAAAA", "claim", 1, webhook["id"], account, webhook["url"],
            "whsec_x", "1", "map.created", "{}",
        )  # fmt: skip
        return attempts.Finished(claimed, result, now - timedelta(hours=hours_ago), 5)

    def record(batch):
        with app.app_context():
            attempts.record(batch, (1,) * 7)
            db.session.commit()

    def state(webhook):
        with app.app_context():
            return db.session.execute(
                select(Webhook.enabled, Webhook.failing_since, Webhook.disabled_reason).where(
                    Webhook.id == webhook["id"]
                )
            ).one()

    kept, broken, off = created
    record([outcome(kept, failed, 1.5), outcome(kept, succeeded, 1.0)])
    assert state(kept) == (True, None, None)
    record([outcome(kept, failed, 0.5)])
    assert state(kept).enabled and state(kept).failing_since == now - timedelta(hours=0.5)
    # In one batch: failures, a success, failures again: failing since the later.
    record(
        [outcome(broken, failed, 3), outcome(broken, succeeded, 2.5), outcome(broken, failed, 1)]
    )
    assert state(broken) == (True, now - timedelta(hours=1), None)
    ping = data_of(api.post(f"/webhooks/{off['id']}/ping"), 202)
    record([outcome(off, failed, 2.5)])
    assert state(off) == (
        False, now - timedelta(hours=2.5),
        "every attempt failed for 2 hours; last: connection failed: Connection refused",
    )  # fmt: skip
    with app.app_context():
        given_up = db.session.scalars(
            select(WebhookDelivery).where(WebhookDelivery.event_id == ping["eventId"])
        ).one()
    assert (given_up.status, given_up.error, given_up.next_attempt_at) == ("failed", GIVEN_UP, None)
