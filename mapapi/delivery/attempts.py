"""Delivery attempts in the database: new events become attempts, due
attempts are claimed by one process, outcomes are recorded.

Every function runs in the caller's transaction and leaves the commit to it.

How events become attempts: each endpoint keeps a ``cursor``, the id of the
last event of the feed looked at for it, and ``enqueue_new_events`` follows
the feed from there with ``events.read_after`` (the feed that never skips),
turning each event into a first attempt and moving the cursor, in one
transaction, with the endpoint's row locked so that two processes never
follow the same endpoint at once.

How attempts are shared: ``claim_due`` locks due attempts with ``FOR UPDATE
SKIP LOCKED`` (on SQLite, writers are serialized), writes a claim token of
its own and moves ``next_attempt_at`` to the end of a lease, then commits;
only then is the HTTP request made. ``record`` writes the outcome only where
the claim is still that token. A process killed in between leaves an
attempt that becomes due again when the lease ends: it is made again.
"""

import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import bindparam, delete, or_, select, update

from ..extensions import db
from ..services.events import read_after, retention_cutoff
from ..services.webhooks import first_attempt
from ..storage.models import Webhook, WebhookDelivery
from ..timeutil import utcnow
from .sender import Outcome

MAX_ATTEMPTS = 8
#: Endpoints one transaction follows, and events it reads for each.
ENDPOINTS_PER_ROUND = 50
EVENTS_PER_ENDPOINT = 100


@dataclass(frozen=True)
class Claimed:
    """What a process needs to make one attempt, read when it claimed it."""

    delivery_id: str
    claim: str
    attempt: int
    webhook_id: str
    url: str
    secret: str
    event_id: str
    event_type: str
    body: str


def enqueue_new_events(after_pk: int = 0) -> tuple[int, int | None]:
    """Turn new events into attempts for up to ``ENDPOINTS_PER_ROUND``
    endpoints past ``after_pk``; (attempts made, the last endpoint's pk, or
    None when no endpoint was left)."""
    webhooks = db.session.scalars(
        select(Webhook)
        .where(Webhook.pk > after_pk)
        .order_by(Webhook.pk)
        .limit(ENDPOINTS_PER_ROUND)
        .with_for_update(skip_locked=True)
    ).all()
    made = 0
    for webhook in webhooks:
        events = read_after(
            webhook.account_id,
            webhook.cursor,
            EVENTS_PER_ENDPOINT,
            map_id=webhook.map_id,
            types=None if "*" in webhook.events else webhook.events,
        )
        for event in events:
            if _was_enabled(webhook, event.created_at):
                first_attempt(webhook, event)
                made += 1
        if events:
            webhook.cursor = events[-1].id
    return made, webhooks[-1].pk if webhooks else None


def _was_enabled(webhook: Webhook, moment) -> bool:
    return webhook.enabled_since <= moment and (
        webhook.disabled_since is None or moment < webhook.disabled_since
    )


def claim_due(limit: int, lease_seconds: float) -> list[Claimed]:
    """Up to ``limit`` due attempts, now this process's for ``lease_seconds``.

    Attempts to a disabled endpoint wait (a ping excepted: it was asked for).
    """
    now = utcnow()
    rows = db.session.execute(
        select(WebhookDelivery, Webhook.url, Webhook.secret)
        .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
        .where(
            WebhookDelivery.status == "pending",
            WebhookDelivery.next_attempt_at <= now,
            or_(Webhook.enabled, WebhookDelivery.event_type == "ping"),
        )
        .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.pk)
        .limit(limit)
        .with_for_update(of=WebhookDelivery, skip_locked=True)
    ).all()
    lease_end = now + timedelta(seconds=lease_seconds)
    claimed = []
    for delivery, url, secret in rows:
        delivery.claim = secrets.token_hex(16)
        delivery.next_attempt_at = lease_end
        claimed.append(
            Claimed(
                delivery.id,
                delivery.claim,
                delivery.attempt,
                delivery.webhook_id,
                url,
                secret,
                delivery.event_id,
                delivery.event_type,
                delivery.body,
            )
        )
    return claimed


_deliveries = WebhookDelivery.__table__
_RECORD = (
    update(_deliveries)
    .where(
        _deliveries.c.id == bindparam("b_id"),
        _deliveries.c.claim == bindparam("b_claim"),
    )
    .values(
        status=bindparam("b_status"),
        response_status=bindparam("b_response_status"),
        error=bindparam("b_error"),
        duration_ms=bindparam("b_duration_ms"),
        next_attempt_at=bindparam("b_next_attempt_at"),
        claim=None,
    )
)


def record(finished: list[tuple[Claimed, Outcome, int]], schedule) -> None:
    """Write the outcomes of attempts ``(claimed, outcome, duration_ms)``,
    and after a failure schedule the next attempt (``schedule[n - 1]``
    seconds after attempt n). An outcome whose claim is no longer ours (the
    lease ran out, or the endpoint is gone) is dropped.

    Successes are written with one statement for all (one round trip); each
    failure on its own, as its retry depends on the claim still being ours.
    """
    now = utcnow()
    successes = [
        _row(claimed, outcome, ms, None)
        for claimed, outcome, ms in finished
        if outcome.succeeded
    ]
    if successes:
        db.session.execute(_RECORD, successes)
    for claimed, outcome, duration_ms in finished:
        if outcome.succeeded:
            continue
        retry_at = None
        if claimed.attempt < MAX_ATTEMPTS:
            retry_at = now + timedelta(seconds=schedule[claimed.attempt - 1])
        written = db.session.execute(
            _RECORD, _row(claimed, outcome, duration_ms, retry_at)
        )
        if written.rowcount and retry_at is not None:
            db.session.add(
                WebhookDelivery(
                    webhook_id=claimed.webhook_id,
                    event_id=claimed.event_id,
                    event_type=claimed.event_type,
                    body=claimed.body,
                    attempt=claimed.attempt + 1,
                    created_at=now,
                    next_attempt_at=retry_at,
                )
            )


def _row(claimed: Claimed, outcome: Outcome, duration_ms: int, retry_at) -> dict:
    return {
        "b_id": claimed.delivery_id,
        "b_claim": claimed.claim,
        "b_status": "succeeded" if outcome.succeeded else "failed",
        "b_response_status": outcome.response_status,
        "b_error": outcome.error,
        "b_duration_ms": duration_ms,
        "b_next_attempt_at": retry_at,
    }


def prune() -> int:
    """Delete finished attempts older than the events the service keeps."""
    return db.session.execute(
        delete(WebhookDelivery).where(
            WebhookDelivery.status != "pending",
            WebhookDelivery.created_at < retention_cutoff(),
        )
    ).rowcount
