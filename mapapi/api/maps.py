"""Maps: the caller's maps and everything in them."""

from flask import Blueprint, g
from sqlalchemy import select

from ..contract.openapi import operation
from ..contract.pagination import PageQuerySchema, list_schema, paginate
from ..contract.schemas import DeletedSchema, MapInputSchema, MapSchema
from ..extensions import db
from ..http.payload import load_body, load_query, respond
from ..services import maps as map_service
from ..services.ownership import owned_map, read_map
from ..storage.models import Map

bp = Blueprint("maps", __name__)


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
    map_ = map_service.create_map(load_body())
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
    map_service.update_map(map_, load_body())
    db.session.commit()
    return respond(map_)


@bp.delete("/maps/<map_id>")
@operation(response=DeletedSchema)
def delete_map(map_id):
    """Delete a map and everything in it."""
    map_ = owned_map(map_id)
    map_service.delete_map(map_)
    db.session.commit()
    return respond({"id": map_.id, "deleted": True})
