"""The peer: mapapi's two reads written the way FastAPI's tutorial teaches them.

FastAPI with SQLAlchemy ORM models over the same tables, a session per
request from a dependency, the key checked in a dependency (by its SHA-256
hash: revocation, expiry, plan), pydantic response models with camelCase
aliases, and uvicorn with one worker: what a user would pick instead of
mapapi. It answers the same JSON (checked against mapapi before the load);
it keeps no rate limit and writes no ``lastUsedAt``, as the tutorial has
neither, which only flatters it.

Usage: ``python peer.py PORT DATABASE_URL``.
"""

import hashlib
import math
import sys
from datetime import UTC, datetime
from typing import Annotated, Any

import uvicorn
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, field_serializer
from pydantic.alias_generators import to_camel
from sqlalchemy import JSON, Column, ForeignKey, Table, create_engine, func, select
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    mapped_column,
    relationship,
    selectinload,
    sessionmaker,
)

API = "/api/v1"
SEND_A_KEY = "`Authorization: Bearer <key>`"


# --- models ------------------------------------------------------------------------------


class Base(DeclarativeBase):
    pass


location_layers = Table(
    "location_layers",
    Base.metadata,
    Column("location_id", ForeignKey("locations.id"), primary_key=True),
    Column("layer_id", ForeignKey("layers.id"), primary_key=True),
)


class Account(Base):
    __tablename__ = "accounts"
    pk: Mapped[int] = mapped_column(primary_key=True)
    id: Mapped[str]
    plan: Mapped[str]
    plan_until: Mapped[datetime | None]


class ApiKey(Base):
    __tablename__ = "api_keys"
    pk: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    secret_hash: Mapped[str]
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    account: Mapped[Account] = relationship(lazy="joined")


class Map(Base):
    __tablename__ = "maps"
    pk: Mapped[int] = mapped_column(primary_key=True)
    id: Mapped[str]
    account_id: Mapped[str]
    title: Mapped[str]
    slug: Mapped[str]
    description: Mapped[str]
    country: Mapped[str]
    city: Mapped[str]
    public: Mapped[bool]
    allow_cloning: Mapped[bool]
    style: Mapped[str]
    center_lat: Mapped[float | None]
    center_lng: Mapped[float | None]
    zoom: Mapped[float | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Layer(Base):
    __tablename__ = "layers"
    pk: Mapped[int] = mapped_column(primary_key=True)
    id: Mapped[str]
    map_id: Mapped[str]
    name: Mapped[str]
    color: Mapped[str]
    position: Mapped[int]
    route_enabled: Mapped[bool]
    route_show_by_default: Mapped[bool]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class LocationTag(Base):
    __tablename__ = "location_tags"
    location_id: Mapped[str] = mapped_column(ForeignKey("locations.id"), primary_key=True)
    tag_id: Mapped[str] = mapped_column(primary_key=True)
    position: Mapped[int]


class Location(Base):
    __tablename__ = "locations"
    pk: Mapped[int] = mapped_column(primary_key=True)
    id: Mapped[str]
    map_id: Mapped[str]
    name: Mapped[str]
    lat: Mapped[float]
    lng: Mapped[float]
    description: Mapped[str]
    address: Mapped[str]
    category_id: Mapped[str | None]
    properties: Mapped[dict] = mapped_column(JSON)
    external_id: Mapped[str | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    tags: Mapped[list[LocationTag]] = relationship(order_by=LocationTag.position)
    layers: Mapped[list[Layer]] = relationship(secondary=location_layers, order_by=Layer.position)


# --- response models --------------------------------------------------------------------


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True, alias_generator=to_camel,
                              populate_by_name=True)

    @field_serializer("created_at", "updated_at", check_fields=False)
    def timestamp(self, value: datetime) -> str:
        return value.isoformat(timespec="milliseconds") + "Z"


class MapOut(Out):
    id: str
    created_at: datetime
    title: str
    slug: str
    description: str
    country: str
    city: str
    public: bool
    allow_cloning: bool
    style: str
    center_lat: float | None
    center_lng: float | None
    zoom: float | None
    user_id: str
    updated_at: datetime


class LayerOut(Out):
    id: str
    created_at: datetime
    map_id: str
    updated_at: datetime
    name: str
    color: str
    order: int
    route_enabled: bool
    route_show_by_default: bool


class LocationOut(Out):
    id: str
    created_at: datetime
    map_id: str
    updated_at: datetime
    name: str
    lat: float
    lng: float
    description: str
    address: str
    category_id: str | None
    properties: dict[str, Any]
    external_id: str | None
    tag_ids: list[str]
    layers: list[LayerOut]


class Pagination(Out):
    total: int
    page: int
    page_size: int
    total_pages: int


class LocationPage(Out):
    locations: list[LocationOut]
    pagination: Pagination


class MapEnvelope(BaseModel):
    data: MapOut


class LocationPageEnvelope(BaseModel):
    data: LocationPage


# --- the app ------------------------------------------------------------------------------

app = FastAPI()
SessionLocal: sessionmaker


def get_db():
    db = SessionLocal()
    try:
        yield db
    finally:
        db.close()


class APIError(HTTPException):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(status_code=status, detail={"code": code, "message": message})


@app.exception_handler(APIError)
def api_error(_request: Request, error: APIError):
    return JSONResponse({"error": error.detail}, status_code=error.status_code)


def current_account(
    db: Annotated[Session, Depends(get_db)], authorization: Annotated[str, Header()] = ""
) -> Account:
    scheme, _, token = authorization.strip().partition(" ")
    if not authorization.strip():
        raise APIError(401, "MISSING_API_KEY", f"An API key is required: send it as {SEND_A_KEY}.")
    digest = hashlib.sha256(token.strip().encode()).hexdigest()
    key = db.scalars(select(ApiKey).where(ApiKey.secret_hash == digest)).first()
    now = datetime.now(UTC).replace(tzinfo=None)
    if scheme.lower() != "bearer" or key is None or key.revoked_at is not None:
        raise APIError(
            401,
            "INVALID_API_KEY",
            f"The API key is not valid (malformed, unknown or revoked): send a current key as "
            f"{SEND_A_KEY}.",
        )
    if key.expires_at is not None and key.expires_at <= now:
        raise APIError(
            401, "API_KEY_EXPIRED", f"This API key has expired: send a current key as {SEND_A_KEY}."
        )
    account = key.account
    if account.plan != "pro" or (account.plan_until is not None and account.plan_until <= now):
        raise APIError(403, "PRO_SUBSCRIPTION_REQUIRED", "The API needs an active Pro plan.")
    return account


def owned_map(db: Session, map_id: str, account: Account) -> Map:
    found = db.scalars(select(Map).where(Map.id == map_id, Map.account_id == account.id)).first()
    if found is None:
        raise APIError(404, "NOT_FOUND", "Map not found.")
    return found


@app.get(API + "/maps/{map_id}", response_model=MapEnvelope)
def get_map(
    map_id: str,
    db: Annotated[Session, Depends(get_db)],
    account: Annotated[Account, Depends(current_account)],
):
    found = owned_map(db, map_id, account)
    return {"data": MapOut(**vars_of(found), user_id=found.account_id)}


@app.get(API + "/maps/{map_id}/locations", response_model=LocationPageEnvelope)
def list_locations(
    map_id: str,
    db: Annotated[Session, Depends(get_db)],
    account: Annotated[Account, Depends(current_account)],
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int, Query(alias="pageSize", ge=1, le=100)] = 50,
):
    owned_map(db, map_id, account)
    total = db.scalar(select(func.count()).select_from(Location).where(Location.map_id == map_id))
    locations = db.scalars(
        select(Location)
        .where(Location.map_id == map_id)
        .order_by(Location.pk)
        .limit(page_size)
        .offset((page - 1) * page_size)
        .options(selectinload(Location.tags), selectinload(Location.layers))
    ).all()
    items = [
        LocationOut(
            **vars_of(location),
            tag_ids=[tag.tag_id for tag in location.tags],
            layers=[LayerOut(**vars_of(layer), order=layer.position) for layer in location.layers],
        )
        for location in locations
    ]
    pagination = Pagination(
        total=total, page=page, page_size=page_size, total_pages=math.ceil(total / page_size)
    )
    return {"data": LocationPage(locations=items, pagination=pagination)}


def vars_of(row) -> dict:
    """A model's column values by attribute name."""
    return {column.key: getattr(row, column.key) for column in row.__mapper__.column_attrs}


if __name__ == "__main__":
    port, url = int(sys.argv[1]), sys.argv[2]
    engine = create_engine(url, pool_size=10, max_overflow=0) if url.startswith(
        "postgresql") else create_engine(url, connect_args={"check_same_thread": False})
    SessionLocal = sessionmaker(autocommit=False, autoflush=False, bind=engine)
    uvicorn.run(app, host="127.0.0.1", port=port, workers=1)
