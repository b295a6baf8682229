"""Finding resources of the calling account: anything else is NOT_FOUND."""

from collections import namedtuple

from flask import g
from sqlalchemy import and_, bindparam, select

from ..extensions import db
from ..http.errors import not_found
from ..storage.models import Map, could_be_id

# Built once: nearly every request runs one of them.
_maps = Map.__table__
_MAP_ROW = select(_maps).where(
    _maps.c.id == bindparam("map_id"), _maps.c.account_id == bindparam("account_id")
)
MapRow = namedtuple("MapRow", _maps.c.keys())
_MAP_COLUMNS = tuple(column.label(f"map_{column.name}") for column in _maps.c)
_LOCKED_MAP = (
    select(Map)
    .where(Map.id == bindparam("map_id"), Map.account_id == bindparam("account_id"))
    .with_for_update(key_share=True)
)
_LOCKED_MAP_ROW = _MAP_ROW.with_for_update(key_share=True)


def with_map(statement, account_id):
    """``statement`` (one row) with the columns of map ``:map_id`` of the
    account whose id is the column ``account_id`` appended: all NULL when
    that account has no such map. Its row is what ``remember_map`` keeps."""
    return statement.add_columns(*_MAP_COLUMNS).outerjoin(
        _maps, and_(_maps.c.id == bindparam("map_id"), _maps.c.account_id == account_id)
    )


def remember_map(map_id: str, row) -> None:
    """Keep the map a ``with_map`` statement read with the caller's key, so
    that ``read_map`` answers from that statement's snapshot without a
    transaction of its own (``GET /maps/<map_id>``; see ``http.auth``)."""
    values = row[-len(_MAP_COLUMNS) :]
    g.remembered_map = (map_id, None if values[0] is None else MapRow(*values))


def read_map(map_id: str) -> MapRow:
    """The caller's map ``map_id``, read as a row: what reads need (its
    ``id``, or the map itself to dump), without building an ORM object."""
    remembered = g.get("remembered_map")
    if remembered is None or remembered[0] != map_id:
        return _map_row(_MAP_ROW, map_id)
    if remembered[1] is None:
        raise not_found("Map")
    return remembered[1]


def _map_row(statement, map_id: str) -> MapRow:
    """The caller's map ``map_id`` as ``statement`` reads it; NOT_FOUND if none."""
    row = could_be_id(map_id) and (
        db.session.connection()
        .execute(statement, {"map_id": map_id, "account_id": g.account.id})
        .one_or_none()
    )
    if not row:
        raise not_found("Map")
    return MapRow(*row)


def owned_map(map_id: str) -> Map:
    """The caller's map ``map_id``, locked, for a write inside it.

    Every write inside a map takes this lock first: a row lock on the map, so
    that writes to one map run one after the other. That keeps layer orders
    0..n-1 and stops a location from gaining a tag, category or layer that a
    concurrent request is deleting. It is FOR NO KEY UPDATE, which does not
    block the foreign-key checks of rows being inserted under the map. On
    SQLite, write transactions are serialized anyway (BEGIN IMMEDIATE) and
    no FOR clause is emitted.
    """
    if not could_be_id(map_id):
        raise not_found("Map")
    found = db.session.scalar(_LOCKED_MAP, {"map_id": map_id, "account_id": g.account.id})
    if found is None:
        raise not_found("Map")
    return found


def locked_map_row(map_id: str) -> MapRow:
    """``owned_map``, locked the same way, as a row: for a write that needs
    only the map's id (creating locations), without building an ORM object."""
    return _map_row(_LOCKED_MAP_ROW, map_id)


def map_child(model, map_: Map | MapRow, child_id: str, *options):
    """A category, tag, layer or location ``child_id`` of ``map_``."""
    found = could_be_id(child_id) and db.session.scalar(
        select(model).where(model.id == child_id, model.map_id == map_.id).options(*options)
    )
    if not found:
        raise not_found(model.__name__)
    return found


def owned_child(model, map_id: str, child_id: str, *, lock: bool = False):
    """``map_child`` of the caller's map ``map_id``.

    Read in one query; with ``lock``, the map is locked first, on its own,
    so every writer takes its locks in the same order.
    """
    if lock:
        return map_child(model, owned_map(map_id), child_id)
    found = (
        could_be_id(map_id)
        and could_be_id(child_id)
        and db.session.scalar(
            select(model)
            .join(Map, Map.id == model.map_id)
            .where(model.id == child_id, Map.id == map_id, Map.account_id == g.account.id)
        )
    )
    if not found:
        raise not_found(model.__name__)
    return found
