"""Events: recording changes in the transaction that makes them, and reading
them back in order.

Never skip. An event's id comes from a counter (SQLite's AUTOINCREMENT,
PostgreSQL's sequence) when it is inserted, but becomes visible only when
its transaction commits, and transactions commit in any order: a reader
asking for ``id > cursor`` could see 11 before 10 commits, move its cursor
to 11 and never see 10. So the writers of one account take their event ids
one transaction after the other: on PostgreSQL ``record``'s INSERT first
takes a transaction-level advisory lock named after the account, which is
held until commit, so a transaction that took ids later commits later too.
SQLite has one writer at a time, so it needs nothing. ``record`` runs at
the very end of a transaction (``journal.py``), so the lock is held for
the insert and the commit only. docs/decisions.md says why this and not a
visibility horizon.
"""

import threading
import time
from datetime import timedelta

from flask import current_app
from sqlalchemy import (
    String,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
)

from ..contract.jsonprovider import RawJSON, encode
from ..extensions import db
from ..http.errors import APIError, validation_error
from ..storage.models import Event, could_be_id
from ..timeutil import format_timestamp, utcnow

#: Where a session keeps the types of the events its transaction wrote, for
#: whoever observes commits (``metrics`` counts them): this module imports
#: no observer.
RECORDED_EVENTS = "mapapi.recorded_events"

#: Events of this type are for one webhook endpoint, never in the feed.
PING = "ping"
#: The service switched a failing webhook endpoint off (``services.webhooks``).
WEBHOOK_DISABLED = "webhook.disabled"

_events = Event.__table__
_COLUMNS = ("account_id", "map_id", "type", "data", "created_at")
# The first key of PostgreSQL's two-key advisory locks: this lock's family,
# so that it never meets another lock of the same account's hash.
_LOCK_FAMILY = int.from_bytes(b"evnt", "big")
_account_lock = select(
    func.pg_advisory_xact_lock(
        literal_column(str(_LOCK_FAMILY)), func.hashtext(bindparam("account_id", type_=String))
    )
).cte("account_lock")
# On PostgreSQL the INSERT takes the lock itself (re-entrant within the
# transaction), so recording costs one statement there as on SQLite.
_INSERT = {
    "sqlite": insert(_events),
    "postgresql": insert(_events).from_select(
        _COLUMNS,
        select(*(bindparam(name, type_=_events.c[name].type) for name in _COLUMNS)).select_from(
            _account_lock
        ),
    ),
}
_INSERT_ONE = {dialect: statement.returning(_events.c.id) for dialect, statement in _INSERT.items()}


def record(account_id: str, changes: list[tuple[str, str | None, str]]) -> None:
    """Insert the events ``(type, map_id, data JSON text)`` of account
    ``account_id`` in the current transaction, in this order, in one
    statement (an executemany for several: one call whatever their number).

    Call it as late as possible in the transaction: on PostgreSQL it holds
    the account's event lock until the transaction ends.
    """
    if changes:
        connection = db.session.connection()
        rows = [_row(account_id, *change) for change in changes]
        connection.execute(_INSERT[connection.dialect.name], rows[0] if len(rows) == 1 else rows)
        _note_recorded([row["type"] for row in rows])


def record_one(account_id: str, type_: str, map_id: str | None, data: str) -> int:
    """``record`` for one event; its id."""
    connection = db.session.connection()
    event_id = connection.scalar(
        _INSERT_ONE[connection.dialect.name], _row(account_id, type_, map_id, data)
    )
    _note_recorded([type_])
    return event_id


def _note_recorded(types: list[str]) -> None:
    """Keep the types written in this transaction where an observer of its commit finds them."""
    db.session.info.setdefault(RECORDED_EVENTS, []).extend(types)


def _row(account_id: str, type_: str, map_id: str | None, data: str) -> dict:
    return {
        "account_id": account_id,
        "map_id": map_id,
        "type": type_,
        "data": data,
        "created_at": utcnow(),
    }


def data_text(data: dict) -> str:
    """A resource's GET body as the JSON text an event keeps."""
    return encode(data).decode("utf-8")


def event_payload(event) -> dict:
    """The event as the feed shows it (and a webhook receives it).

    ``data`` is embedded as stored: encode the dict with
    ``mapapi.contract.jsonprovider.encode`` (or ``event_body``).
    """
    return {
        "id": str(event.id),
        "type": event.type,
        "createdAt": format_timestamp(event.created_at),
        "mapId": event.map_id,
        "data": RawJSON(event.data),
    }


def event_body(event) -> bytes:
    """The event as the JSON bytes a webhook receives: the feed's object."""
    return encode(event_payload(event))


def feed(account_id: str, after, limit: int, map_id=None, types=None) -> dict:
    """``GET /events``: the account's events after cursor ``after`` (an
    event id, ``"latest"``, or None for the oldest kept), as the feed shows them."""
    if map_id is not None and not could_be_id(map_id):
        raise validation_error("The query is invalid.", {"mapId": ["Not a map id."]})
    if after == "latest":
        newest = latest_id(account_id)
        return {"events": [], "next": None if newest is None else str(newest), "hasMore": False}
    if after is not None:
        state = cursor_state(account_id, after)
        if state == "expired":
            raise APIError(
                410,
                "CURSOR_EXPIRED",
                "Events after this cursor are no longer kept: list the resources "
                "again, then follow the feed from after=latest.",
            )
        if state == "foreign":
            raise validation_error(
                "The query is invalid.", {"after": ["Not an event id of this account."]}
            )
    found = read_after(account_id, after, limit + 1, map_id, types)
    shown = found[:limit]
    last = shown[-1].id if shown else after
    return {
        "events": [event_payload(event) for event in shown],
        "next": None if last is None else str(last),
        "hasMore": len(found) > limit,
    }


def retention_cutoff():
    """Events made before this are no longer kept."""
    days = float(current_app.config["EVENTS_RETENTION_DAYS"])
    return utcnow() - timedelta(days=days)


def read_after(
    account_id: str,
    after: int | None,
    limit: int,
    map_id: str | None = None,
    types: list[str] | None = None,
) -> list[Event]:
    """The account's next ``limit`` kept events after id ``after`` (from the
    oldest kept when None), in id order, passing the filters.

    ``types`` holds types and ``<resource>.*`` patterns. Whatever a reader
    sees here, every event of the account with a smaller id is visible too
    (see the module's docstring), so following the last id never skips one.
    """
    statement = (
        select(Event)
        .where(Event.account_id == account_id, Event.created_at >= retention_cutoff())
        .order_by(Event.id)
        .limit(limit)
    )
    if after is not None:
        statement = statement.where(Event.id > after)
    if map_id is not None:
        statement = statement.where(Event.map_id == map_id)
    statement = statement.where(_type_filter(types))
    return list(db.session.scalars(statement))


def _type_filter(types: list[str] | None):
    if not types:
        return Event.type != PING
    exact = [name for name in types if not name.endswith(".*")]
    prefixes = [name[:-1] for name in types if name.endswith(".*")]
    return or_(
        Event.type.in_(exact),
        *(Event.type.startswith(prefix, autoescape=True) for prefix in prefixes),
    )


def latest_id(account_id: str) -> int | None:
    """The id of the account's newest kept event (ping events aside), or None."""
    return db.session.scalar(
        select(func.max(Event.id)).where(
            Event.account_id == account_id,
            Event.type != PING,
            Event.created_at >= retention_cutoff(),
        )
    )


_CURSOR = select(Event.account_id, Event.created_at).where(Event.id == bindparam("id"))
_OLDEST_KEPT = select(func.min(Event.id)).where(Event.created_at >= bindparam("cutoff"))


def cursor_state(account_id: str, after: int) -> str:
    """What ``after`` is to account ``account_id``: ``"kept"`` (an event of
    its own still kept), ``"expired"`` (older than every event kept), or
    ``"foreign"`` (an event of another account, or no event at all)."""
    cutoff = retention_cutoff()
    row = db.session.execute(_CURSOR, {"id": after}).one_or_none()
    if row is not None:
        if row.account_id != account_id:
            return "foreign"
        return "kept" if row.created_at >= cutoff else "expired"
    oldest = db.session.scalar(_OLDEST_KEPT, {"cutoff": cutoff})
    return "expired" if oldest is None or after < oldest else "foreign"


#: Rows one sweep deletes at most, so that the transaction it rides in stays short.
SWEEP_BATCH = 2000
#: How often a process sweeps while it keeps up.
SWEEP_INTERVAL_SECONDS = 600


class _SweepClock:
    """When this process sweeps next: every ``SWEEP_INTERVAL_SECONDS``, and
    at the next chance again while a sweep finds a full batch (a backlog)."""

    def __init__(self):
        self.due = 0.0
        self.lock = threading.Lock()

    def sweep_if_due(self) -> None:
        if time.monotonic() < self.due or not self.lock.acquire(blocking=False):
            return
        try:
            deleted = sweep()
            pause = 0 if deleted == SWEEP_BATCH else SWEEP_INTERVAL_SECONDS
            self.due = time.monotonic() + pause
        finally:
            self.lock.release()


sweep_if_due = _SweepClock().sweep_if_due


def sweep(cutoff=None) -> int:
    """Delete up to ``SWEEP_BATCH`` events made before ``cutoff`` (by default
    the retention's), oldest first, in the current transaction; how many.

    Rows another process is sweeping right now are skipped (PostgreSQL),
    not waited for.
    """
    oldest = (
        select(_events.c.id)
        .where(_events.c.created_at < (cutoff or retention_cutoff()))
        .order_by(_events.c.id)
        .limit(SWEEP_BATCH)
        .with_for_update(skip_locked=True)
    )
    result = db.session.execute(delete(_events).where(_events.c.id.in_(oldest.scalar_subquery())))
    return result.rowcount
