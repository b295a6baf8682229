"""All models.

Every table has an integer ``pk`` that only orders rows by creation (the
locations of one bulk get theirs in input order) and a public ``id``: an
opaque, URL-safe string (a clock, then 96 random bits: ``new_id``) that
relations refer to.
Deletes cascade in the database itself (``ON DELETE``), so a map's delete
is one statement however much it holds.
"""

import json
import re
import secrets
import time
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    event,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ..extensions import db
from ..timeutil import utcnow

ID_LENGTH = 22
_ID_SHAPE = re.compile(r"[A-Za-z0-9_-]{%d}" % ID_LENGTH)


# Base 64 digits in the order they sort in: a clock written with them sorts
# as the time it holds does.
_SORTING_DIGITS = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
_CLOCK_SHIFTS = (30, 24, 18, 12, 6, 0)
_CLOCK_MARK = 1 << 35


def new_id() -> str:
    """A clock of 6 characters, the second the id was made, then 96 random
    bits: 22 URL-safe characters.

    Ids made together sort together, so the rows of one bulk go into a few
    pages of each index on ``id`` instead of one random page each (SQLite and
    PostgreSQL both write whole pages on commit).
    """
    return _clock(int(time.time())) + secrets.token_urlsafe(12)


@lru_cache(maxsize=2)
def _clock(second: int) -> str:
    """``second`` in 6 sorting digits. The top bit is always set, so an id
    never starts with "-", which a command line would read as an option
    (`mapapi keys revoke KEY_ID`)."""
    marked = second | _CLOCK_MARK
    return "".join(_SORTING_DIGITS[marked >> shift & 63] for shift in _CLOCK_SHIFTS)


def could_be_id(value) -> bool:
    """Whether ``value`` has the shape of our ids; anything else is unknown
    without asking the database (which may not even store it: U+0000)."""
    return isinstance(value, str) and _ID_SHAPE.fullmatch(value) is not None


def _pk() -> Mapped[int]:
    return mapped_column(Integer, primary_key=True, autoincrement=True)


def _public_id() -> Mapped[str]:
    # The sentinel lets SQLAlchemy insert many rows in one statement and still
    # match the generated pks back to them (a bulk is one INSERT).
    return mapped_column(
        String(ID_LENGTH), unique=True, nullable=False, default=new_id, insert_sentinel=True
    )


def _parent(table: str, *, index: bool = True) -> Mapped[str]:
    return mapped_column(
        String(ID_LENGTH),
        ForeignKey(f"{table}.id", ondelete="CASCADE"),
        nullable=False,
        index=index,
    )


class JSONDocument(TypeDecorator):
    """A JSON column whose changes are seen as JSON sees them.

    SQLAlchemy decides whether to write a column by comparing with ``==``,
    for which ``{"a": 1}`` equals ``{"a": True}``; those are different
    documents, and a PUT from one to the other must be stored.
    """

    impl = JSON
    cache_ok = True

    def compare_values(self, x, y):
        return json.dumps(x) == json.dumps(y)


class Timestamped:
    """``createdAt`` equals ``updatedAt`` on creation; services move ``updated_at``."""

    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime,
        nullable=False,
        default=lambda context: context.get_current_parameters()["created_at"],
    )


def has_pro(plan: str, plan_until: datetime | None, now: datetime) -> bool:
    """A ``pro`` plan counts as ``free`` once its end time has passed."""
    return plan == "pro" and (plan_until is None or plan_until > now)


def has_expired(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is not None and expires_at <= now


class Account(db.Model):
    __tablename__ = "accounts"

    pk: Mapped[int] = _pk()
    id: Mapped[str] = _public_id()
    email: Mapped[str] = mapped_column(String(320), unique=True, nullable=False)
    plan: Mapped[str] = mapped_column(String(10), nullable=False, default="pro")
    plan_until: Mapped[datetime | None] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)


class ApiKey(db.Model):
    __tablename__ = "api_keys"

    pk: Mapped[int] = _pk()
    id: Mapped[str] = _public_id()
    account_id: Mapped[str] = _parent("accounts")
    name: Mapped[str] = mapped_column(Text, nullable=False)
    scope: Mapped[str] = mapped_column(String(10), nullable=False)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    prefix: Mapped[str] = mapped_column(String(12), nullable=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime)

    account: Mapped[Account] = relationship(lazy="raise_on_sql")

    #: The secret, set only on a key just issued (it is never stored).
    secret = None

    def status(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if has_expired(self.expires_at, now):
            return "expired"
        return "active"


class Map(Timestamped, db.Model):
    __tablename__ = "maps"

    pk: Mapped[int] = _pk()
    id: Mapped[str] = _public_id()
    account_id: Mapped[str] = _parent("accounts")
    title: Mapped[str] = mapped_column(Text, nullable=False)
    slug: Mapped[str] = mapped_column(Text, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    country: Mapped[str] = mapped_column(Text, nullable=False, default="")
    city: Mapped[str] = mapped_column(Text, nullable=False, default="")
    public: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    allow_cloning: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    style: Mapped[str] = mapped_column(String(20), nullable=False, default="streets")
    center_lat: Mapped[float | None] = mapped_column(Float)
    center_lng: Mapped[float | None] = mapped_column(Float)
    zoom: Mapped[float | None] = mapped_column(Float)


class Category(Timestamped, db.Model):
    __tablename__ = "categories"

    pk: Mapped[int] = _pk()
    id: Mapped[str] = _public_id()
    map_id: Mapped[str] = _parent("maps")
    name: Mapped[str] = mapped_column(Text, nullable=False)
    color: Mapped[str | None] = mapped_column(String(7))
    icon: Mapped[str] = mapped_column(Text, nullable=False, default="")


class Tag(Timestamped, db.Model):
    __tablename__ = "tags"
    # Tag names are unique per map even when two requests race: the
    # database decides, and errors.py turns the violation into CONFLICT.
    __table_args__ = (UniqueConstraint("map_id", "name", name="uq_tags_map_id_name"),)

    pk: Mapped[int] = _pk()
    id: Mapped[str] = _public_id()
    map_id: Mapped[str] = _parent("maps")
    name: Mapped[str] = mapped_column(Text, nullable=False)
    color: Mapped[str | None] = mapped_column(String(7))


class Layer(Timestamped, db.Model):
    __tablename__ = "layers"

    pk: Mapped[int] = _pk()
    id: Mapped[str] = _public_id()
    map_id: Mapped[str] = _parent("maps")
    name: Mapped[str] = mapped_column(Text, nullable=False)
    color: Mapped[str] = mapped_column(String(7), nullable=False, default="#3B82F6")
    # "order" is an SQL keyword; the API calls this field order.
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    route_enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    route_show_by_default: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)


class LocationTag(db.Model):
    """A tag on a location; ``position`` keeps the order the client gave."""

    __tablename__ = "location_tags"
    # A location's tags in the order given, from the index alone: the
    # Features of /ogcapi and the export list them so (services.geojson).
    __table_args__ = (Index(None, "location_id", "position", "tag_id"),)

    location_id: Mapped[str] = mapped_column(
        ForeignKey("locations.id", ondelete="CASCADE"), primary_key=True
    )
    tag_id: Mapped[str] = mapped_column(
        ForeignKey("tags.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    position: Mapped[int] = mapped_column(Integer, nullable=False)


location_layers = db.Table(
    "location_layers",
    db.Column("location_id", ForeignKey("locations.id", ondelete="CASCADE"), primary_key=True),
    db.Column(
        "layer_id", ForeignKey("layers.id", ondelete="CASCADE"), primary_key=True, index=True
    ),
)


#: Text compared by code point: SQLite's default; PostgreSQL's "C" collation
#: (a database's own collation would order by language rules instead).
CodePointText = Text().with_variant(Text(collation="C"), "postgresql")
#: Each searchable text column of a location and its lower-cased copy.
FOLDED_COLUMNS = {
    "name_folded": "name",
    "description_folded": "description",
    "address_folded": "address",
}


def fold(text: str) -> str:
    """Text as the filters compare it: Python's ``str.lower()``, the rule of the
    API, which neither database's ``LOWER()`` follows for every character."""
    return text.lower()


def folded_copies(values) -> dict[str, str]:
    """The lower-cased copies of the searched texts in ``values`` (a
    location's columns by name): what an UPDATE made without the ORM must
    set with them."""
    return {folded: fold(values[source]) for folded, source in FOLDED_COLUMNS.items()}


def _folded(source: str) -> Mapped[str]:
    """``source`` lower-cased, stored: written with the row by any INSERT
    that leaves it out (Core's executemany included), kept in step by an
    ORM update (``_refold``) and by ``folded_copies`` in a Core one."""

    def default(context) -> str:
        return fold(context.get_current_parameters().get(source) or "")

    return mapped_column(CodePointText, nullable=False, default=default)


class Location(Timestamped, db.Model):
    __tablename__ = "locations"
    # A map's locations in creation order, straight from the index: a page
    # deep into a big map walks index entries only (location_reads.py).
    # The others serve the list's filters and sorts (location_filters.py).
    __table_args__ = (
        Index(None, "map_id", "pk"),
        Index(None, "map_id", "lat", "lng"),
        Index(None, "map_id", "updated_at", "pk"),
        Index(None, "map_id", "name_folded", "pk"),
        # An externalId names one location of its map, even when requests
        # race: the database decides, errors.py turns a clash into CONFLICT.
        # NULLs never clash. The same index serves lookups by externalId.
        Index("uq_locations_map_id_external_id", "map_id", "external_id", unique=True),
    )

    pk: Mapped[int] = _pk()
    id: Mapped[str] = _public_id()
    map_id: Mapped[str] = _parent("maps", index=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    lat: Mapped[float] = mapped_column(Float, nullable=False)
    lng: Mapped[float] = mapped_column(Float, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    address: Mapped[str] = mapped_column(Text, nullable=False, default="")
    category_id: Mapped[str | None] = mapped_column(
        ForeignKey("categories.id", ondelete="SET NULL"), index=True
    )
    properties: Mapped[dict[str, Any]] = mapped_column(JSONDocument, nullable=False, default=dict)
    # The location's id in the client's own system (contract section 13).
    external_id: Mapped[str | None] = mapped_column(Text)
    name_folded: Mapped[str] = _folded("name")
    description_folded: Mapped[str] = _folded("description")
    address_folded: Mapped[str] = _folded("address")

    # Lists of locations dump both relations: load them with selectinload
    # (one statement each per page), never lazily per row.
    tag_links: Mapped[list[LocationTag]] = relationship(
        order_by=LocationTag.position,
        cascade="all, delete-orphan",
        passive_deletes=True,
        lazy="raise_on_sql",
    )
    layers: Mapped[list[Layer]] = relationship(
        secondary=location_layers,
        order_by=Layer.position,
        passive_deletes=True,
        lazy="raise_on_sql",
    )

    @property
    def tag_ids(self) -> list[str]:
        return [link.tag_id for link in self.tag_links]


class LocationCell(db.Model):
    """The locations of one map in one cell of the web map at one zoom:
    how many, the sums of their coordinates, their box. Written only by
    the triggers of ``storage.cells``; read by ``services.clusters``."""

    __tablename__ = "location_cells"

    # The key's order serves a viewport: a few rows (y), a run of columns (x) in each.
    map_id: Mapped[str] = mapped_column(
        String(ID_LENGTH), ForeignKey("maps.id", ondelete="CASCADE"), primary_key=True
    )
    level: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    y: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    x: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    count: Mapped[int] = mapped_column(Integer, nullable=False)
    sum_lat: Mapped[float] = mapped_column(Float, nullable=False)
    sum_lng: Mapped[float] = mapped_column(Float, nullable=False)
    min_lat: Mapped[float] = mapped_column(Float, nullable=False)
    max_lat: Mapped[float] = mapped_column(Float, nullable=False)
    min_lng: Mapped[float] = mapped_column(Float, nullable=False)
    max_lng: Mapped[float] = mapped_column(Float, nullable=False)


class IdempotencyRecord(db.Model):
    """A POST's ``Idempotency-Key``: reserved while the request runs, then its kept answer.

    ``status`` is NULL while the request runs. ``token`` names the request
    that holds the reservation: the answer is written only by that request,
    in the transaction of its own work (``http.idempotency``).
    """

    __tablename__ = "idempotency_keys"
    # One answer per key and account, also when requests race: the database decides.
    __table_args__ = (
        UniqueConstraint("account_id", "key", name="uq_idempotency_keys_account_id_key"),
    )

    pk: Mapped[int] = _pk()
    account_id: Mapped[str] = _parent("accounts", index=False)
    key: Mapped[str] = mapped_column(String(255), nullable=False)
    #: SHA-256 of the method, path and body's JSON value.
    fingerprint: Mapped[str] = mapped_column(String(64), nullable=False)
    token: Mapped[str] = mapped_column(String(32), nullable=False)
    started_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, index=True)
    status: Mapped[int | None] = mapped_column(Integer)
    body: Mapped[str | None] = mapped_column(Text)


class Event(db.Model):
    """A change of the account's data, as the feed and webhooks show it.

    ``id`` orders the account's events: it is what a feed cursor holds.
    AUTOINCREMENT on SQLite, so that an id is never given twice even when
    the newest events have been swept. ``map_id`` has no foreign key: a
    map's ``map.deleted`` outlives the map. ``data`` is the JSON text of the
    resource's GET body right after the change, embedded as it is.
    """

    __tablename__ = "events"
    __table_args__ = (Index(None, "account_id", "id"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    account_id: Mapped[str] = _parent("accounts", index=False)
    map_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    type: Mapped[str] = mapped_column(String(30), nullable=False)
    data: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)


class Webhook(Timestamped, db.Model):
    """A webhook endpoint: where, and which of the account's events.

    ``cursor`` is the id of the last event of the feed the delivery worker
    has looked at for it (it follows the feed from there); an event becomes
    a delivery when it was made while the endpoint was enabled: at or after
    ``enabled_since`` and before ``disabled_since``.
    ``failing_since`` is when the failures since its last successful
    attempt began (None while its last attempt succeeded); the service
    disables an endpoint failing for long, saying why in ``disabled_reason``.
    ``map_id`` is no foreign key: the endpoint outlives its map's deletion,
    so that it receives ``map.deleted``.
    """

    __tablename__ = "webhooks"

    pk: Mapped[int] = _pk()
    id: Mapped[str] = _public_id()
    account_id: Mapped[str] = _parent("accounts")
    url: Mapped[str] = mapped_column(Text, nullable=False)
    events: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    map_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    secret: Mapped[str] = mapped_column(String(64), nullable=False)
    cursor: Mapped[int | None] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    enabled_since: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    disabled_since: Mapped[datetime | None] = mapped_column(DateTime)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    failing_since: Mapped[datetime | None] = mapped_column(DateTime)

    def __repr__(self) -> str:  # never the secret, should one be logged
        return f"<Webhook {self.id} {self.url}>"


class WebhookDelivery(db.Model):
    """One attempt to deliver one event to one endpoint.

    A pending attempt is due at ``next_attempt_at``. A process that takes it
    sets ``claim`` (a token of its own) and moves ``next_attempt_at`` to the
    end of its lease; it records the outcome only while the claim is still
    its own. An attempt whose lease has run out (its process was killed) is
    due again, and is made again.
    ``body`` is the event exactly as sent, kept so that every attempt sends
    the same bytes. ``created_at`` is when the attempt was scheduled, then,
    once made, when it was made.
    """

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index(None, "webhook_id", "pk"),
        Index(None, "status", "next_attempt_at"),
        # An endpoint's next due attempts, and its attempts in flight, each
        # found without reading its backlog (delivery.claims.claim_due).
        # Partial: finished attempts (most rows) and unclaimed ones cost
        # these indexes nothing.
        Index(
            "ix_webhook_deliveries_pending",
            "webhook_id",
            "next_attempt_at",
            "pk",  # the claim's order, read from the index without a sort
            postgresql_where=text("status = 'pending'"),
            sqlite_where=text("status = 'pending'"),
        ),
        Index(
            "ix_webhook_deliveries_claimed",
            "webhook_id",
            postgresql_where=text("claim IS NOT NULL"),
            sqlite_where=text("claim IS NOT NULL"),
        ),
    )

    pk: Mapped[int] = _pk()
    id: Mapped[str] = _public_id()
    webhook_id: Mapped[str] = _parent("webhooks", index=False)
    event_id: Mapped[str] = mapped_column(Text, nullable=False)
    event_type: Mapped[str] = mapped_column(String(40), nullable=False)
    body: Mapped[str] = mapped_column(Text, nullable=False)
    attempt: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    status: Mapped[str] = mapped_column(String(10), nullable=False, default="pending")
    response_status: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime)
    claim: Mapped[str | None] = mapped_column(String(32))


@event.listens_for(Location, "before_update")
def _refold(_mapper, _connection, location: Location) -> None:
    for folded, source in FOLDED_COLUMNS.items():
        setattr(location, folded, fold(getattr(location, source)))


# Its triggers are made with the tables.
from . import cells  # noqa: E402, F401
