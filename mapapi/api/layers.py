"""Layers of a map, kept in order 0..n-1."""

from flask import Blueprint
from sqlalchemy import select

from ..contract.openapi import operation
from ..contract.pagination import PageQuerySchema, list_schema, paginate
from ..contract.schemas import DeletedSchema, LayerInputSchema, LayerSchema
from ..extensions import db
from ..http.payload import load_body, load_query, respond
from ..services.layers import add_layer, apply_layer_update, remove_layer
from ..services.ownership import map_child, owned_child, owned_map, read_map
from ..storage.models import Layer

bp = Blueprint("layers", __name__)


@bp.get("/maps/<map_id>/layers")
@operation(query=PageQuerySchema, response=list_schema("layers", LayerSchema))
def list_layers(map_id):
    """List a map's layers by order."""
    map_ = read_map(map_id)
    statement = select(Layer).where(Layer.map_id == map_.id).order_by(Layer.position)
    return respond(paginate(statement, load_query()))


@bp.post("/maps/<map_id>/layers")
@operation(body=LayerInputSchema, response=LayerSchema, status=201)
def create_layer(map_id):
    """Create a layer: appended, or inserted at `order` (the rest shift)."""
    map_ = owned_map(map_id)
    layer = add_layer(map_, load_body())
    db.session.commit()
    return respond(layer)


@bp.get("/maps/<map_id>/layers/<layer_id>")
@operation(response=LayerSchema)
def get_layer(map_id, layer_id):
    """Get a layer."""
    return respond(owned_child(Layer, map_id, layer_id))


@bp.put("/maps/<map_id>/layers/<layer_id>")
@operation(body=LayerInputSchema(partial=True), response=LayerSchema)
def update_layer(map_id, layer_id):
    """Update a layer; `order` moves it and shifts the others."""
    map_ = owned_map(map_id)
    layer = map_child(Layer, map_, layer_id)
    apply_layer_update(map_, layer, load_body())
    db.session.commit()
    return respond(layer)


@bp.delete("/maps/<map_id>/layers/<layer_id>")
@operation(response=DeletedSchema)
def delete_layer(map_id, layer_id):
    """Delete a layer and close the gap in the order."""
    map_ = owned_map(map_id)
    layer = map_child(Layer, map_, layer_id)
    remove_layer(map_, layer)
    db.session.commit()
    return respond({"id": layer.id, "deleted": True})
