"""Categories of a map; deleting one leaves its locations uncategorized."""

from flask import Blueprint

from ..contract.openapi import operation
from ..contract.pagination import PageQuerySchema, list_schema, paginate
from ..contract.schemas import CategoryInputSchema, CategorySchema, DeletedSchema
from ..extensions import db
from ..http.payload import load_body, load_query, respond
from ..services.changes import apply_changes
from ..services.children import add_child, children_of, remove_child
from ..services.ownership import owned_child, owned_map, read_map
from ..storage.models import Category

bp = Blueprint("categories", __name__)


@bp.get("/maps/<map_id>/categories")
@operation(query=PageQuerySchema, response=list_schema("categories", CategorySchema))
def list_categories(map_id):
    """List a map's categories, in creation order."""
    return respond(paginate(children_of(read_map(map_id), Category), load_query()))


@bp.post("/maps/<map_id>/categories")
@operation(body=CategoryInputSchema, response=CategorySchema, status=201)
def create_category(map_id):
    """Create a category."""
    map_ = owned_map(map_id)
    category = add_child(map_, Category, load_body())
    db.session.commit()
    return respond(category)


@bp.get("/maps/<map_id>/categories/<category_id>")
@operation(response=CategorySchema)
def get_category(map_id, category_id):
    """Get a category."""
    return respond(owned_child(Category, map_id, category_id))


@bp.put("/maps/<map_id>/categories/<category_id>")
@operation(body=CategoryInputSchema(partial=True), response=CategorySchema)
def update_category(map_id, category_id):
    """Update a category (fields left out keep their value)."""
    category = owned_child(Category, map_id, category_id, lock=True)
    apply_changes(category, load_body())
    db.session.commit()
    return respond(category)


@bp.delete("/maps/<map_id>/categories/<category_id>")
@operation(response=DeletedSchema)
def delete_category(map_id, category_id):
    """Delete a category; its locations get categoryId null."""
    category = owned_child(Category, map_id, category_id, lock=True)
    remove_child(category)
    db.session.commit()
    return respond({"id": category.id, "deleted": True})
