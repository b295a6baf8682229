"""Claiming due attempts, fairly: accounts take turns, and no endpoint ever
has more than ``PER_ENDPOINT`` attempts in flight, counted across every
process.

An attempt is in flight from its claim until its outcome is recorded or
its lease runs out. A claim locks the endpoints it will serve (``FOR NO KEY
UPDATE SKIP LOCKED``: two processes never claim for one endpoint at once;
SQLite serializes writers anyway), counts their attempts in flight in a
statement of its own (under READ COMMITTED, one that sees every claim
committed before the lock was taken), and claims at most the rest. A claim
writes a token and moves ``next_attempt_at`` to the end of a lease, then
commits; only then is the HTTP request made (attempts.py records it).

Every function runs in the caller's transaction and leaves the commit to it.
"""

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, bindparam, func, literal_column, or_, select, update

from ..extensions import db
from ..services.events import PING
from ..storage.models import Webhook, WebhookDelivery
from ..timeutil import utcnow

#: Attempts in flight to one endpoint at most, across all processes.
PER_ENDPOINT = 2


@dataclass(frozen=True)
class Claimed:
    """What a process needs to make one attempt, read when it claimed it."""

    delivery_id: str
    claim: str
    attempt: int
    webhook_id: str
    account_id: str
    url: str
    secret: str
    event_id: str
    event_type: str
    body: str


_deliveries = WebhookDelivery.__table__
#: Written out, not a parameter: so the planners see the partial indexes apply.
_PENDING = literal_column("'pending'")


def due_attempt():
    """An attempt of a ``Webhook`` that may be made at ``:now``, and the
    condition: a disabled endpoint's wait (a ping excepted: it was asked for).
    The metrics count what is due by the same rule."""
    due = _deliveries.alias("due")
    return due, and_(
        due.c.webhook_id == Webhook.id,
        due.c.status == _PENDING,
        due.c.next_attempt_at <= bindparam("now"),
        or_(Webhook.enabled, due.c.event_type == PING),
    )


def _in_flight():
    """How many attempts of the endpoint are claimed, with a lease not run out at ``:now``.

    Only a pending attempt has a claim (recording an outcome, or giving an
    attempt up, clears it): the status is left out, so that the planner
    reads the small index of claimed attempts, not the pending ones'.
    """
    flying = _deliveries.alias("flying")
    return (
        select(func.count())
        .select_from(flying)
        .where(
            flying.c.webhook_id == Webhook.id,
            flying.c.claim.is_not(None),
            flying.c.next_attempt_at > bindparam("now"),
        )
        .scalar_subquery()
    )


def _nth_due(offset: int):
    due, condition = due_attempt()
    return (
        select(due.c.pk)
        .where(condition)
        .order_by(due.c.next_attempt_at, due.c.pk)
        .limit(1)
        .offset(offset)
        .scalar_subquery()
    )


def _endpoints_in_turn():
    """Up to ``:limit`` endpoints with a due attempt and room for one more
    in flight, none of ``:full`` accounts', in turn order, locked for the
    transaction; those another process is claiming for are skipped."""
    due, condition = due_attempt()
    oldest_due = (
        select(due.c.next_attempt_at)
        .where(condition)
        .order_by(due.c.next_attempt_at)
        .limit(1)
        .scalar_subquery()
    )
    candidates = (
        select(Webhook.pk, Webhook.account_id, oldest_due.label("oldest"))
        .where(_in_flight() < PER_ENDPOINT)
        .where(Webhook.account_id.not_in(bindparam("full", expanding=True)))
        .subquery()
    )
    ranked = (
        select(
            candidates.c.pk,
            candidates.c.oldest,
            func.row_number()
            .over(
                partition_by=candidates.c.account_id,
                order_by=(candidates.c.oldest, candidates.c.pk),
            )
            .label("turn"),
        )
        .where(candidates.c.oldest.is_not(None))
        .subquery()
    )
    return (
        select(Webhook.id, Webhook.account_id, Webhook.url, Webhook.secret)
        .join(ranked, ranked.c.pk == Webhook.pk)
        .order_by(ranked.c.turn, ranked.c.oldest, ranked.c.pk)
        .limit(bindparam("limit"))
        .with_for_update(of=Webhook, key_share=True, skip_locked=True)
    )


# Built once: a claim runs for every attempt or two that finishes.
_LOCK_ENDPOINTS = _endpoints_in_turn()
#: For each endpoint of ``:ids``: its attempts in flight and its next two due.
_STATE = select(
    Webhook.id,
    _in_flight().label("in_flight"),
    _nth_due(0).label("first"),
    _nth_due(1).label("second"),
).where(Webhook.id.in_(bindparam("ids", expanding=True)))
_CLAIM = (
    update(_deliveries)
    .where(_deliveries.c.pk.in_(bindparam("pks", expanding=True)))
    .values(claim=bindparam("claim"), next_attempt_at=bindparam("lease_end"))
    .returning(
        _deliveries.c.pk,
        _deliveries.c.id,
        _deliveries.c.attempt,
        _deliveries.c.event_id,
        _deliveries.c.event_type,
        _deliveries.c.body,
    )
)


def claim_due(
    free: int, share: int, busy: Mapping[str, int], lease_seconds: float
) -> list[Claimed]:
    """Up to ``free`` due attempts, now this process's for ``lease_seconds``.

    Accounts take turns: endpoints are taken in the order of their rank
    within their account (each account's most overdue endpoint first, then
    each account's second...), and attempts one per endpoint before a
    second. An account with ``busy[account]`` attempts in flight in this
    process gets at most ``share`` minus those; an endpoint at most
    ``PER_ENDPOINT`` minus its attempts in flight anywhere.
    """
    now = utcnow()
    room = {account: share - count for account, count in busy.items()}
    full = [account for account, left in room.items() if left <= 0]
    endpoints = db.session.execute(_LOCK_ENDPOINTS, {"now": now, "limit": free, "full": full}).all()
    if not endpoints:
        return []
    state = {
        row.id: (row.in_flight, [pk for pk in (row.first, row.second) if pk is not None])
        for row in db.session.execute(
            _STATE, {"now": now, "ids": [endpoint.id for endpoint in endpoints]}
        )
    }
    chosen = {}  # the pk of each attempt chosen: its endpoint
    for turn in range(PER_ENDPOINT):
        for endpoint in endpoints:
            in_flight, due = state[endpoint.id]
            left = room.get(endpoint.account_id, share)
            endpoint_has_room = turn < len(due) and in_flight + turn < PER_ENDPOINT
            if len(chosen) < free and endpoint_has_room and left > 0:
                chosen[due[turn]] = endpoint
                room[endpoint.account_id] = left - 1
    if not chosen:
        return []
    claim = secrets.token_hex(16)
    lease_end = now + timedelta(seconds=lease_seconds)
    rows = db.session.execute(
        _CLAIM, {"pks": list(chosen), "claim": claim, "lease_end": lease_end}
    ).all()
    return [_claimed(row, claim, chosen[row.pk]) for row in rows]


def _claimed(row, claim: str, endpoint) -> Claimed:
    return Claimed(
        delivery_id=row.id,
        claim=claim,
        attempt=row.attempt,
        webhook_id=endpoint.id,
        account_id=endpoint.account_id,
        url=endpoint.url,
        secret=endpoint.secret,
        event_id=row.event_id,
        event_type=row.event_type,
        body=row.body,
    )
