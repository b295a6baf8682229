"""Finding resources of the calling account: anything else is NOT_FOUND."""

from flask import g
from sqlalchemy import select

from ..errors import not_found
from ..extensions import db
from ..models import Map


def owned_map(map_id: str, *, lock: bool = False) -> Map:
    """The caller's map ``map_id``.

    Every write inside a map takes ``lock``: a row lock on the map, so that
    writes to one map run one after the other. That keeps layer orders
    0..n-1 and stops a location from gaining a tag, category or layer that a
    concurrent request is deleting. On SQLite, write transactions are
    serialized anyway (BEGIN IMMEDIATE) and FOR UPDATE is not emitted.
    """
    statement = select(Map).where(Map.id == map_id, Map.account_id == g.account.id)
    if lock:
        statement = statement.with_for_update()
    found = db.session.scalar(statement)
    if found is None:
        raise not_found("Map")
    return found


def map_child(model, map_: Map, child_id: str, *options):
    """A category, tag, layer or location ``child_id`` of ``map_``."""
    found = db.session.scalar(
        select(model).where(model.id == child_id, model.map_id == map_.id).options(*options)
    )
    if found is None:
        raise not_found(model.__name__)
    return found


def owned_child(model, map_id: str, child_id: str, *, lock: bool = False):
    """``map_child`` of the caller's map ``map_id`` in one query; ``lock`` as above."""
    statement = (
        select(model)
        .join(Map, Map.id == model.map_id)
        .where(model.id == child_id, Map.id == map_id, Map.account_id == g.account.id)
    )
    if lock:
        statement = statement.with_for_update()
    found = db.session.scalar(statement)
    if found is None:
        raise not_found(model.__name__)
    return found
