"""What categories, tags and layers have in common: they belong to a map."""

from sqlalchemy import select

from ..extensions import db
from ..storage.models import Map
from ..timeutil import utcnow


def children_of(map_: Map, model):
    """``model`` rows of ``map_`` in creation order, as a statement to page."""
    return select(model).where(model.map_id == map_.id).order_by(model.pk)


def add_child(map_: Map, model, data: dict):
    now = utcnow()
    child = model(map_id=map_.id, created_at=now, updated_at=now, **data)
    db.session.add(child)
    db.session.flush()
    return child
