"""Layers of a map, kept in order 0..n-1."""

from flask import Blueprint, request
from sqlalchemy import select

from ..extensions import db
from ..models import Layer
from ..pagination import list_schema, paginate
from ..payload import load_body, respond
from ..schemas import LayerInputSchema, LayerSchema
from ..services.layers import add_layer, apply_layer_update, remove_layer
from ..services.ownership import map_child, owned_child, owned_map
from .responses import respond_deleted

bp = Blueprint("layers", __name__)

_input = LayerInputSchema()
_output = LayerSchema()
_list = list_schema("layers", LayerSchema)


@bp.get("/maps/<map_id>/layers")
def list_layers(map_id):
    """List a map's layers by order."""
    map_ = owned_map(map_id)
    statement = select(Layer).where(Layer.map_id == map_.id).order_by(Layer.position)
    return respond(_list, paginate(statement, request.args))


@bp.post("/maps/<map_id>/layers")
def create_layer(map_id):
    """Create a layer: appended, or inserted at ``order``."""
    map_ = owned_map(map_id, lock=True)
    layer = add_layer(map_, load_body(_input))
    db.session.commit()
    return respond(_output, layer, 201)


@bp.get("/maps/<map_id>/layers/<layer_id>")
def get_layer(map_id, layer_id):
    """Get a layer."""
    return respond(_output, owned_child(Layer, map_id, layer_id))


@bp.put("/maps/<map_id>/layers/<layer_id>")
def update_layer(map_id, layer_id):
    """Update a layer; ``order`` moves it and shifts the others."""
    map_ = owned_map(map_id, lock=True)
    layer = map_child(Layer, map_, layer_id)
    apply_layer_update(map_, layer, load_body(_input, partial=True))
    db.session.commit()
    return respond(_output, layer)


@bp.delete("/maps/<map_id>/layers/<layer_id>")
def delete_layer(map_id, layer_id):
    """Delete a layer and close the gap in the order."""
    map_ = owned_map(map_id, lock=True)
    layer = map_child(Layer, map_, layer_id)
    remove_layer(map_, layer)
    db.session.commit()
    return respond_deleted(layer.id)
