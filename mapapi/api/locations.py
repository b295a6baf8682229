"""Locations of a map: single and bulk creation, updates, layer memberships."""

from flask import Blueprint
from marshmallow import ValidationError

from ..contract.loading import compile_loader
from ..contract.openapi import operation
from ..contract.pagination import PageQuerySchema, list_schema
from ..contract.schemas import (
    BulkEnvelopeSchema,
    BulkInputSchema,
    BulkResultSchema,
    DeletedSchema,
    LayerMembershipInputSchema,
    LocationInputSchema,
    LocationSchema,
)
from ..extensions import db
from ..http.errors import not_found, settled, stringify_keys, validation_error
from ..http.payload import load_body, load_query, respond, respond_dumped
from ..services.location_reads import location_page, read_location
from ..services.locations import (
    LOCATION_LOADS,
    apply_location_update,
    check_references,
    create_locations,
    location_layer_ids,
    reference_errors,
    remove_location,
    replace_layers,
)
from ..services.ownership import map_child, owned_map, read_map
from ..storage.models import Location, could_be_id

bp = Blueprint("locations", __name__)

_load_item = compile_loader(LocationInputSchema())
_bulk_envelope = BulkEnvelopeSchema()


@bp.get("/maps/<map_id>/locations")
@operation(query=PageQuerySchema, response=list_schema("locations", LocationSchema))
def list_locations(map_id):
    """List a map's locations, with their tags and layers, in creation order."""
    map_ = read_map(map_id)
    query = load_query()
    return respond_dumped(location_page(map_.id, query["page"], query["page_size"]))


@bp.post("/maps/<map_id>/locations")
@operation(body=LocationInputSchema, response=LocationSchema, status=201)
def create_location(map_id):
    """Create a location."""
    map_ = owned_map(map_id)
    data = load_body()
    check_references(map_, data)
    (location,) = create_locations(map_, [data])
    db.session.commit()
    return respond(location)


@bp.post("/maps/<map_id>/locations/bulk")
@operation(body=BulkInputSchema, response=BulkResultSchema, status=201)
def bulk_create_locations(map_id):
    """Create 1 to 100 locations at once: all of them or none.

    Each item is validated as a single create; the details of an error name
    every bad item by its index.
    """
    # The items are read before the map's lock is taken (PostgreSQL's row
    # lock), so that the map's other writers do not wait while a hundred are
    # validated; an unknown map still answers 404 before any 400, as the
    # contract orders.
    read_items = settled(_read_items)
    map_ = owned_map(map_id)
    loaded, errors = read_items()
    indexes = list(loaded)
    for position, item_errors in reference_errors(map_, list(loaded.values())).items():
        errors[indexes[position]] = item_errors
    if errors:
        details = {str(index): errors[index] for index in sorted(errors)}
        raise validation_error(
            "Some locations are invalid; none was created.", {"locations": details}
        )
    created = create_locations(map_, list(loaded.values()))
    db.session.commit()
    return respond({"created": created, "count": len(created)})


def _read_items() -> tuple[dict[int, dict], dict[int, dict]]:
    """The bulk's valid items loaded, and the field errors of the others, by index."""
    items = load_body(schema=_bulk_envelope)["locations"]
    loaded, errors = {}, {}
    for index, item in enumerate(items):
        try:
            loaded[index] = _load_item(item)
        except ValidationError as error:
            errors[index] = stringify_keys(error.normalized_messages())
    return loaded, errors


@bp.get("/maps/<map_id>/locations/<location_id>")
@operation(response=LocationSchema)
def get_location(map_id, location_id):
    """Get a location."""
    map_ = read_map(map_id)
    location = could_be_id(location_id) and read_location(map_.id, location_id)
    if not location:
        raise not_found("Location")
    return respond_dumped(location)


@bp.put("/maps/<map_id>/locations/<location_id>")
@operation(body=LocationInputSchema(partial=True), response=LocationSchema)
def update_location(map_id, location_id):
    """Update a location (fields left out keep their value)."""
    map_ = owned_map(map_id)
    location = map_child(Location, map_, location_id, *LOCATION_LOADS)
    data = load_body()
    check_references(map_, data)
    apply_location_update(location, data)
    db.session.commit()
    return respond(location)


@bp.delete("/maps/<map_id>/locations/<location_id>")
@operation(response=DeletedSchema)
def delete_location(map_id, location_id):
    """Delete a location."""
    location = map_child(Location, owned_map(map_id), location_id)
    remove_location(location)
    db.session.commit()
    return respond({"id": location.id, "deleted": True})


@bp.put("/maps/<map_id>/locations/<location_id>/layers")
@operation(body=LayerMembershipInputSchema, response=LocationSchema)
def replace_location_layers(map_id, location_id):
    """Replace the set of layers a location is on."""
    map_ = owned_map(map_id)
    current = location_layer_ids(map_, location_id)
    location = replace_layers(map_, location_id, current, load_body()["layer_ids"])
    db.session.commit()
    return respond_dumped(location)
