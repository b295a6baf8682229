"""Maps: creating, updating and deleting one, with their events."""

from flask import g
from slugify import slugify
from sqlalchemy import delete

from ..extensions import db
from ..storage.models import Map
from . import journal
from .changes import apply_changes


def slug_for(title: str) -> str:
    return slugify(title) or "map"


def create_map(data: dict) -> Map:
    """A new map of the calling account."""
    map_ = Map(account_id=g.account.id, slug=slug_for(data["title"]), **data)
    db.session.add(map_)
    db.session.flush()
    journal.created("map", map_, map_.id)
    return map_


def update_map(map_: Map, data: dict) -> None:
    """Apply a partial update; a new title makes a new slug."""
    if "title" in data:
        data["slug"] = slug_for(data["title"])
    apply_changes(map_, data)


def delete_map(map_: Map) -> None:
    """Delete the map and everything in it (the database cascades): one
    ``map.deleted`` event stands for all of it."""
    journal.deleted("map", map_.id, map_.id)
    db.session.execute(delete(Map).where(Map.pk == map_.pk))
