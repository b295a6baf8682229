"""Locations of a map: single and bulk creation, updates, layer memberships."""

from flask import Blueprint, request
from marshmallow import ValidationError
from sqlalchemy import delete, select

from ..errors import stringify_keys, validation_error
from ..extensions import db
from ..models import Location
from ..pagination import list_schema, paginate
from ..payload import load_body, respond
from ..schemas import (
    BulkInputSchema,
    BulkResultSchema,
    LayerMembershipInputSchema,
    LocationInputSchema,
    LocationSchema,
)
from ..services.locations import (
    LOCATION_LOADS,
    apply_location_update,
    check_references,
    create_locations,
    reference_errors,
    replace_layers,
)
from ..services.ownership import map_child, owned_map
from .responses import respond_deleted

bp = Blueprint("locations", __name__)

_input = LocationInputSchema()
_output = LocationSchema()
_list = list_schema("locations", LocationSchema)
_bulk_input = BulkInputSchema()
_bulk_output = BulkResultSchema()
_membership_input = LayerMembershipInputSchema()


@bp.get("/maps/<map_id>/locations")
def list_locations(map_id):
    """List a map's locations, with their tags and layers."""
    map_ = owned_map(map_id)
    statement = select(Location).where(Location.map_id == map_.id).order_by(Location.pk)
    return respond(_list, paginate(statement, request.args, *LOCATION_LOADS))


@bp.post("/maps/<map_id>/locations")
def create_location(map_id):
    """Create a location."""
    map_ = owned_map(map_id, lock=True)
    data = load_body(_input)
    check_references(map_, data)
    (location,) = create_locations(map_, [data])
    db.session.commit()
    return respond(_output, location, 201)


@bp.post("/maps/<map_id>/locations/bulk")
def bulk_create_locations(map_id):
    """Create 1 to 100 locations at once: all of them or none."""
    map_ = owned_map(map_id, lock=True)
    items = load_body(_bulk_input)["locations"]
    loaded, errors = {}, {}
    for index, item in enumerate(items):
        try:
            loaded[index] = _input.load(item)
        except ValidationError as error:
            errors[index] = stringify_keys(error.normalized_messages())
    indexes = list(loaded)
    for position, item_errors in reference_errors(map_, list(loaded.values())).items():
        errors[indexes[position]] = item_errors
    if errors:
        details = {str(index): errors[index] for index in sorted(errors)}
        raise validation_error("Some locations are invalid; none was created.", {"locations": details})
    created = create_locations(map_, list(loaded.values()))
    db.session.commit()
    return respond(_bulk_output, {"created": created, "count": len(created)}, 201)


@bp.get("/maps/<map_id>/locations/<location_id>")
def get_location(map_id, location_id):
    """Get a location."""
    return respond(_output, map_child(Location, owned_map(map_id), location_id, *LOCATION_LOADS))


@bp.put("/maps/<map_id>/locations/<location_id>")
def update_location(map_id, location_id):
    """Update a location (fields left out keep their value)."""
    map_ = owned_map(map_id, lock=True)
    location = map_child(Location, map_, location_id, *LOCATION_LOADS)
    data = load_body(_input, partial=True)
    check_references(map_, data)
    apply_location_update(location, data)
    db.session.commit()
    return respond(_output, location)


@bp.delete("/maps/<map_id>/locations/<location_id>")
def delete_location(map_id, location_id):
    """Delete a location."""
    location = map_child(Location, owned_map(map_id, lock=True), location_id)
    db.session.execute(delete(Location).where(Location.pk == location.pk))
    db.session.commit()
    return respond_deleted(location.id)


@bp.put("/maps/<map_id>/locations/<location_id>/layers")
def replace_location_layers(map_id, location_id):
    """Replace the set of layers a location is on."""
    map_ = owned_map(map_id, lock=True)
    location = map_child(Location, map_, location_id, *LOCATION_LOADS)
    layer_ids = load_body(_membership_input)["layer_ids"]
    replace_layers(map_, location, layer_ids)
    db.session.commit()
    return respond(_output, location)
