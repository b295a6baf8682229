"""What categories, tags and layers have in common: they belong to a map."""

from sqlalchemy import select

from ..extensions import db
from ..storage.models import Category, Location, LocationTag, Map, Tag
from ..timeutil import utcnow
from . import journal
from .locations import touch_locations


def children_of(map_: Map, model):
    """``model`` rows of ``map_`` in creation order, as a statement to page."""
    return select(model).where(model.map_id == map_.id).order_by(model.pk)


def add_child(map_: Map, model, data: dict):
    now = utcnow()
    child = model(map_id=map_.id, created_at=now, updated_at=now, **data)
    db.session.add(child)
    db.session.flush()
    journal.created(journal.KINDS[model], child, map_.id)
    return child


#: The locations that lose something when a category or a tag is deleted.
_HOLDERS = {
    Category: lambda category: Location.category_id == category.id,
    Tag: lambda tag: Location.id.in_(
        select(LocationTag.location_id).where(LocationTag.tag_id == tag.id)
    ),
}


def remove_child(child) -> None:
    """Delete a category or a tag; its locations lose it, and their
    ``updatedAt`` moves (the database would take it off them by itself:
    ON DELETE SET NULL or CASCADE)."""
    journal.deleted(journal.KINDS[type(child)], child.id, child.map_id)
    touch_locations(_HOLDERS[type(child)](child), child.map_id)
    db.session.delete(child)
