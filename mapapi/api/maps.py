"""Maps: the caller's maps and everything in them."""

from flask import Blueprint, g
from slugify import slugify
from sqlalchemy import delete, select

from ..contract.openapi import operation
from ..contract.pagination import PageQuerySchema, list_schema, paginate
from ..contract.schemas import DeletedSchema, MapInputSchema, MapSchema
from ..extensions import db
from ..http.payload import load_body, load_query, respond
from ..services.changes import apply_changes
from ..services.ownership import owned_map, read_map
from ..storage.models import Map

bp = Blueprint("maps", __name__)


def slug_for(title: str) -> str:
    return slugify(title) or "map"


@bp.get("/maps")
@operation(query=PageQuerySchema, response=list_schema("maps", MapSchema))
def list_maps():
    """List the caller's maps, in creation order."""
    statement = select(Map).where(Map.account_id == g.account.id).order_by(Map.pk)
    return respond(paginate(statement, load_query()))


@bp.post("/maps")
@operation(body=MapInputSchema, response=MapSchema, status=201)
def create_map():
    """Create a map."""
    data = load_body()
    map_ = Map(account_id=g.account.id, slug=slug_for(data["title"]), **data)
    db.session.add(map_)
    db.session.commit()
    return respond(map_)


@bp.get("/maps/<map_id>")
@operation(response=MapSchema)
def get_map(map_id):
    """Get a map."""
    return respond(read_map(map_id))


@bp.put("/maps/<map_id>")
@operation(body=MapInputSchema(partial=True), response=MapSchema)
def update_map(map_id):
    """Update a map (fields left out keep their value)."""
    map_ = owned_map(map_id)
    data = load_body()
    if "title" in data:
        data["slug"] = slug_for(data["title"])
    apply_changes(map_, data)
    db.session.commit()
    return respond(map_)


@bp.delete("/maps/<map_id>")
@operation(response=DeletedSchema)
def delete_map(map_id):
    """Delete a map and everything in it."""
    map_ = owned_map(map_id)
    db.session.execute(delete(Map).where(Map.pk == map_.pk))
    db.session.commit()
    return respond({"id": map_.id, "deleted": True})
