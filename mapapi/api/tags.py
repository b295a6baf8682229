"""Tags of a map, their names unique within it."""

from flask import Blueprint

from ..contract.openapi import operation
from ..contract.pagination import PageQuerySchema, list_schema, paginate
from ..contract.schemas import DeletedSchema, TagInputSchema, TagSchema
from ..extensions import db
from ..http.payload import load_body, load_query, respond
from ..services.changes import apply_changes
from ..services.children import add_child, children_of, remove_child
from ..services.ownership import owned_child, owned_map, read_map
from ..storage.models import Tag

bp = Blueprint("tags", __name__)


@bp.get("/maps/<map_id>/tags")
@operation(query=PageQuerySchema, response=list_schema("tags", TagSchema))
def list_tags(map_id):
    """List a map's tags, in creation order."""
    return respond(paginate(children_of(read_map(map_id), Tag), load_query()))


@bp.post("/maps/<map_id>/tags")
@operation(body=TagInputSchema, response=TagSchema, status=201, conflict=True)
def create_tag(map_id):
    """Create a tag (a name already on the map is a conflict)."""
    map_ = owned_map(map_id)
    tag = add_child(map_, Tag, load_body())
    db.session.commit()
    return respond(tag)


@bp.get("/maps/<map_id>/tags/<tag_id>")
@operation(response=TagSchema)
def get_tag(map_id, tag_id):
    """Get a tag."""
    return respond(owned_child(Tag, map_id, tag_id))


@bp.put("/maps/<map_id>/tags/<tag_id>")
@operation(body=TagInputSchema(partial=True), response=TagSchema, conflict=True)
def update_tag(map_id, tag_id):
    """Update a tag (renaming to a name already on the map is a conflict)."""
    tag = owned_child(Tag, map_id, tag_id, lock=True)
    apply_changes(tag, load_body())
    db.session.commit()
    return respond(tag)


@bp.delete("/maps/<map_id>/tags/<tag_id>")
@operation(response=DeletedSchema)
def delete_tag(map_id, tag_id):
    """Delete a tag; it is removed from its locations."""
    tag = owned_child(Tag, map_id, tag_id, lock=True)
    remove_child(tag)
    db.session.commit()
    return respond({"id": tag.id, "deleted": True})
