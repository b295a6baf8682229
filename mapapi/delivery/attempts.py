"""Delivery attempts in the database: new events become attempts, outcomes
are recorded, endpoints that keep failing are switched off.

Every function runs in the caller's transaction and leaves the commit to it.

How events become attempts: each endpoint keeps a ``cursor``, the id of the
last event of the feed looked at for it, and ``enqueue_new_events`` follows
the feed from there with ``events.read_after`` (the feed that never skips),
turning each event into a first attempt and moving the cursor, in one
transaction, with the endpoint's row locked so that two processes never
follow the same endpoint at once.

Due attempts are claimed in claims.py. ``record`` writes an outcome only
where the claim is still the one that made it: a process killed between
claim and record leaves an attempt that becomes due again when the lease
ends, and is made again.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import Boolean, DateTime, bindparam, case, delete, func, select, update

from ..extensions import db
from ..services.events import read_after, retention_cutoff
from ..services.webhooks import first_attempt, switch_off
from ..storage.models import Webhook, WebhookDelivery
from ..timeutil import utcnow
from .claims import Claimed
from .sender import Outcome

MAX_ATTEMPTS = 8
#: Endpoints one transaction follows, and events it reads for each: an
#: account's flood of events costs each pass over the endpoints little, so
#: another's new event waits for one short pass at most.
ENDPOINTS_PER_ROUND = 10
EVENTS_PER_ENDPOINT = 20


@dataclass(frozen=True)
class Finished:
    """An attempt made: its outcome, when it started and how long it took."""

    claimed: Claimed
    outcome: Outcome
    made_at: datetime
    duration_ms: int


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
            if _is_sent(webhook, event.created_at):
                first_attempt(webhook, event)
                made += 1
        if events:
            webhook.cursor = events[-1].id
    return made, webhooks[-1].pk if webhooks else None


def _is_sent(webhook: Webhook, moment) -> bool:
    """Whether an event made at ``moment`` goes to ``webhook``: made while it
    was enabled, and it has not been switched off since (its pending attempts
    were given up then; events not yet followed are given up with them)."""
    return (
        webhook.disabled_reason is None
        and webhook.enabled_since <= moment
        and (webhook.disabled_since is None or moment < webhook.disabled_since)
    )


# --- recording ------------------------------------------------------------------------------

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
        created_at=bindparam("b_made_at"),
        next_attempt_at=bindparam("b_next_attempt_at"),
        claim=None,
    )
)


def record(finished: list[Finished], schedule) -> None:
    """Write the outcomes of attempts made, and after a failure schedule the
    next attempt (``schedule[n - 1]`` seconds after attempt n). An outcome
    whose claim is no longer ours (the lease ran out, or the endpoint is
    gone) is dropped. Each endpoint's health is noted first (``_note_health``,
    which also locks the endpoints' rows: before their attempts', as every
    writer of both does); one failing for ``WEBHOOKS_DISABLE_AFTER_HOURS``
    is switched off last.

    Successes are written with one statement for all (one round trip); each
    failure on its own, as its retry depends on the claim still being ours.
    """
    now = utcnow()
    last_failures = _note_health(finished)
    successes = [_row(done, None) for done in finished if done.outcome.succeeded]
    if successes:
        db.session.execute(_RECORD, successes)
    for done in finished:
        if done.outcome.succeeded:
            continue
        claimed = done.claimed
        retry_at = None
        if claimed.attempt < MAX_ATTEMPTS:
            retry_at = now + timedelta(seconds=schedule[claimed.attempt - 1])
        written = db.session.execute(_RECORD, _row(done, retry_at))
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
    if last_failures:
        hours = current_app.config["WEBHOOKS_DISABLE_AFTER_HOURS"]
        _switch_off_failing(last_failures, now - timedelta(hours=hours))


def _row(done: Finished, retry_at) -> dict:
    return {
        "b_id": done.claimed.delivery_id,
        "b_claim": done.claimed.claim,
        "b_status": "succeeded" if done.outcome.succeeded else "failed",
        "b_response_status": done.outcome.response_status,
        "b_error": done.outcome.error,
        "b_duration_ms": done.duration_ms,
        "b_made_at": done.made_at,
        "b_next_attempt_at": retry_at,
    }


_webhooks = Webhook.__table__
_since = bindparam("b_since", type_=DateTime())
#: After a success (``b_reset``): failing since ``b_since``, the first
#: failure after it, or not failing (None). Else failing since ``b_since``,
#: unless failing already. Written even when nothing changes: the row lock
#: it takes orders this transaction's locks (see ``_note_health``).
_HEALTH = (
    update(_webhooks)
    .where(_webhooks.c.id == bindparam("b_id"))
    .values(
        failing_since=case(
            (bindparam("b_reset", type_=Boolean()), _since),
            else_=func.coalesce(_webhooks.c.failing_since, _since),
        )
    )
)


def _note_health(finished: list[Finished]) -> dict[str, Outcome]:
    """Keep each endpoint's ``failing_since``: when the failures since its
    last success began (None when its last attempt succeeded). The last
    failure of each endpoint still failing, by endpoint.

    The endpoints are written in id order, so that two processes recording
    at once lock their rows in the same order; and before their attempts,
    as a claim, an endpoint's deletion and a switch-off lock them: no
    deadlock.
    """
    by_endpoint: dict[str, list[Finished]] = {}
    for done in sorted(finished, key=lambda done: done.made_at):
        by_endpoint.setdefault(done.claimed.webhook_id, []).append(done)
    rows, last_failures = [], {}
    for webhook_id in sorted(by_endpoint):
        done = by_endpoint[webhook_id]
        succeeded = [i for i, one in enumerate(done) if one.outcome.succeeded]
        failures = done[succeeded[-1] + 1 :] if succeeded else done
        since = failures[0].made_at if failures else None
        rows.append({"b_id": webhook_id, "b_reset": bool(succeeded), "b_since": since})
        if failures:
            last_failures[webhook_id] = failures[-1].outcome
    if rows:
        db.session.execute(_HEALTH, rows)
    return last_failures


def _switch_off_failing(last_failures: Mapping[str, Outcome], before: datetime) -> None:
    """Switch off the enabled endpoints of ``last_failures`` failing since ``before``
    (their rows are locked already: ``_note_health``)."""
    failing = db.session.scalars(
        select(Webhook)
        .where(
            Webhook.id.in_(sorted(last_failures)),
            Webhook.enabled,
            Webhook.failing_since <= before,
        )
        .order_by(Webhook.id)
    ).all()
    for webhook in failing:
        switch_off(webhook, _last_error(last_failures[webhook.id]))


def _last_error(outcome: Outcome) -> str:
    """``HTTP 500`` for an answer, else the attempt's error."""
    if outcome.response_status is not None:
        return f"HTTP {outcome.response_status}"
    return outcome.error


def prune() -> int:
    """Delete finished attempts older than the events the service keeps."""
    return db.session.execute(
        delete(WebhookDelivery).where(
            WebhookDelivery.status != "pending",
            WebhookDelivery.created_at < retention_cutoff(),
        )
    ).rowcount
