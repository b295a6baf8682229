"""Tags of a map, their names unique within it."""

from flask import Blueprint, request
from sqlalchemy import select

from ..extensions import db
from ..models import Location, LocationTag, Tag
from ..pagination import list_schema, paginate
from ..payload import load_body, respond
from ..schemas import TagInputSchema, TagSchema
from ..services.changes import apply_changes
from ..services.children import add_child, children_of
from ..services.locations import touch_locations
from ..services.ownership import owned_child, owned_map
from .responses import respond_deleted

bp = Blueprint("tags", __name__)

_input = TagInputSchema()
_output = TagSchema()
_list = list_schema("tags", TagSchema)


@bp.get("/maps/<map_id>/tags")
def list_tags(map_id):
    """List a map's tags."""
    return respond(_list, paginate(children_of(owned_map(map_id), Tag), request.args))


@bp.post("/maps/<map_id>/tags")
def create_tag(map_id):
    """Create a tag (a name already on the map is a conflict)."""
    map_ = owned_map(map_id, lock=True)
    tag = add_child(map_, Tag, load_body(_input))
    db.session.commit()
    return respond(_output, tag, 201)


@bp.get("/maps/<map_id>/tags/<tag_id>")
def get_tag(map_id, tag_id):
    """Get a tag."""
    return respond(_output, owned_child(Tag, map_id, tag_id))


@bp.put("/maps/<map_id>/tags/<tag_id>")
def update_tag(map_id, tag_id):
    """Update a tag (renaming to a name already on the map is a conflict)."""
    tag = owned_child(Tag, map_id, tag_id, lock=True)
    apply_changes(tag, load_body(_input, partial=True))
    db.session.commit()
    return respond(_output, tag)


@bp.delete("/maps/<map_id>/tags/<tag_id>")
def delete_tag(map_id, tag_id):
    """Delete a tag; it is removed from its locations."""
    tag = owned_child(Tag, map_id, tag_id, lock=True)
    tagged = select(LocationTag.location_id).where(LocationTag.tag_id == tag.id)
    touch_locations(Location.id.in_(tagged))
    db.session.delete(tag)
    db.session.commit()
    return respond_deleted(tag.id)
