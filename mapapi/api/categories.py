"""Categories of a map; deleting one leaves its locations uncategorized."""

from flask import Blueprint, request

from ..extensions import db
from ..models import Category, Location
from ..pagination import list_schema, paginate
from ..payload import load_body, respond
from ..schemas import CategoryInputSchema, CategorySchema
from ..services.changes import apply_changes
from ..services.children import add_child, children_of
from ..services.locations import touch_locations
from ..services.ownership import owned_child, owned_map
from .responses import respond_deleted

bp = Blueprint("categories", __name__)

_input = CategoryInputSchema()
_output = CategorySchema()
_list = list_schema("categories", CategorySchema)


@bp.get("/maps/<map_id>/categories")
def list_categories(map_id):
    """List a map's categories."""
    return respond(_list, paginate(children_of(owned_map(map_id), Category), request.args))


@bp.post("/maps/<map_id>/categories")
def create_category(map_id):
    """Create a category."""
    map_ = owned_map(map_id, lock=True)
    category = add_child(map_, Category, load_body(_input))
    db.session.commit()
    return respond(_output, category, 201)


@bp.get("/maps/<map_id>/categories/<category_id>")
def get_category(map_id, category_id):
    """Get a category."""
    return respond(_output, owned_child(Category, map_id, category_id))


@bp.put("/maps/<map_id>/categories/<category_id>")
def update_category(map_id, category_id):
    """Update a category (fields left out keep their value)."""
    category = owned_child(Category, map_id, category_id, lock=True)
    apply_changes(category, load_body(_input, partial=True))
    db.session.commit()
    return respond(_output, category)


@bp.delete("/maps/<map_id>/categories/<category_id>")
def delete_category(map_id, category_id):
    """Delete a category; its locations get categoryId null."""
    category = owned_child(Category, map_id, category_id, lock=True)
    # The database would null categoryId by itself (ON DELETE SET NULL), but
    # the locations' updatedAt must move too.
    touch_locations(Location.category_id == category.id)
    db.session.delete(category)
    db.session.commit()
    return respond_deleted(category.id)
