"""Locations of a map: lists, single and bulk creation, updates, layer
memberships, GeoJSON out and in, and keeping a map in step with another
system (upsert, bulk delete)."""

from flask import Blueprint, current_app, stream_with_context
from marshmallow import ValidationError

from ..contract.cluster_schemas import ClusterQuerySchema, ClustersSchema
from ..contract.geojson import (
    GEOJSON,
    FeatureCollectionSchema,
    ImportEnvelopeSchema,
    ImportInputSchema,
    ImportQuerySchema,
    ImportUpsertEnvelopeSchema,
    read_feature,
)
from ..contract.loading import compile_loader
from ..contract.location_query import LocationFilterSchema, LocationListQuerySchema
from ..contract.openapi import operation
from ..contract.pagination import list_schema
from ..contract.schemas import (
    BulkDeleteInputSchema,
    BulkDeleteResultSchema,
    BulkEnvelopeSchema,
    BulkInputSchema,
    BulkResultSchema,
    DeletedSchema,
    LayerMembershipInputSchema,
    LocationInputSchema,
    LocationSchema,
    NewUpsertItemSchema,
    UpsertEnvelopeSchema,
    UpsertInputSchema,
    UpsertItemSchema,
    UpsertResultSchema,
)
from ..extensions import db
from ..http.errors import not_found, settled, stringify_keys
from ..http.payload import (
    load_body,
    load_items,
    load_query,
    raise_item_errors,
    respond,
    respond_dumped,
)
from ..services.clusters import viewport_clusters
from ..services.geojson import export_features
from ..services.location_filters import selection
from ..services.location_reads import location_page, read_location
from ..services.locations import (
    LOCATION_LOADS,
    References,
    apply_location_update,
    check_references,
    create_locations,
    location_layer_ids,
    remove_location,
    repeated_external_ids,
    replace_layers,
)
from ..services.ownership import locked_map_row, map_child, owned_map, read_map
from ..services.sync import UpsertItem, UpsertPlan, delete_locations
from ..storage.models import Location, could_be_id

bp = Blueprint("locations", __name__)

_load_item = compile_loader(LocationInputSchema())
_bulk_envelope = BulkEnvelopeSchema()
_import_envelope = ImportEnvelopeSchema()
_import_upsert_envelope = ImportUpsertEnvelopeSchema()
_upsert_envelope = UpsertEnvelopeSchema()
_load_upsert_new = compile_loader(NewUpsertItemSchema())
_load_upsert_given = compile_loader(UpsertItemSchema())
_UPSERT_KEYS = {name: f.data_key or name for name, f in UpsertItemSchema().load_fields.items()}


@bp.get("/maps/<map_id>/locations")
@operation(query=LocationListQuerySchema, response=list_schema("locations", LocationSchema))
def list_locations(map_id):
    """List a map's locations, with their tags and layers, filtered and sorted.

    Without filters and sort: every location, in creation order.
    """
    map_ = read_map(map_id)
    query = load_query()
    return respond_dumped(
        location_page(map_.id, query["page"], query["page_size"], selection(query))
    )


@bp.post("/maps/<map_id>/locations")
@operation(body=LocationInputSchema, response=LocationSchema, status=201, conflict=True)
def create_location(map_id):
    """Create a location (an externalId another location of the map has is a conflict)."""
    # Read before the map's lock is taken, as a bulk's items are.
    read_data = settled(load_body)
    map_ = locked_map_row(map_id)
    data = read_data()
    references = check_references(map_, data)
    (location,) = create_locations(map_, [data], references)
    db.session.commit()
    return respond(location)


@bp.post("/maps/<map_id>/locations/bulk")
@operation(body=BulkInputSchema, response=BulkResultSchema, status=201, conflict=True)
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
    map_ = locked_map_row(map_id)
    loaded, errors = read_items()
    items = list(loaded.values())
    references = References(map_, items)
    indexes = list(loaded)
    for position, item_errors in references.errors(items).items():
        errors[indexes[position]] = item_errors
    for index, item_errors in repeated_external_ids(loaded).items():
        errors.setdefault(index, {}).update(item_errors)
    raise_item_errors(errors, "Some locations are invalid; none was created.")
    created = create_locations(map_, items, references)
    db.session.commit()
    return respond({"created": created, "count": len(created)})


def _read_items() -> tuple[dict[int, dict], dict[int, dict]]:
    """The bulk's valid items loaded, and the field errors of the others, by index."""
    return load_items(load_body(schema=_bulk_envelope)["locations"], _load_item)


@bp.post("/maps/<map_id>/locations/upsert")
@operation(body=UpsertInputSchema, response=UpsertResultSchema)
def upsert_locations(map_id):
    """Create or update 1 to 1000 locations by externalId: all of them or none.

    An item whose externalId a location of the map has updates it as PUT
    does; any other creates a location as the bulk does. An item that
    changes nothing keeps its updatedAt and counts as unchanged.
    """
    read_items = settled(_read_upsert_items)  # before the map's lock, as the bulk does
    map_ = owned_map(map_id)
    items, errors = read_items()
    plan = UpsertPlan(map_, items)
    for index, item_errors in plan.errors.items():
        errors.setdefault(index, {}).update(item_errors)
    raise_item_errors(errors, "Some locations are invalid; nothing was written.")
    return respond_dumped(_upserted(plan))


def _upserted(plan: UpsertPlan) -> dict:
    """Write ``plan`` and commit: the upsert's answer."""
    outcome = plan.apply()
    db.session.commit()
    return {
        "locations": outcome.locations,
        "created": outcome.created,
        "updated": outcome.updated,
        "unchanged": outcome.unchanged,
    }


def _read_upsert_items() -> tuple[dict[int, UpsertItem], dict[int, dict]]:
    return load_items(load_body(schema=_upsert_envelope)["locations"], _read_upsert_item)


def _read_upsert_item(raw) -> UpsertItem:
    """An upsert item read as create reads it and, for an update, as PUT does:
    only the fields it gives.

    Read as a create first, so that a valid item is read once. One that
    cannot create (no name, say) may still update; its errors count only if
    its externalId turns out to be new.
    """
    try:
        new = _load_upsert_new(raw)
    except ValidationError as error:
        given = _load_upsert_given(raw)  # its errors name the fields at fault
        return UpsertItem(_given(given, raw), None, stringify_keys(error.normalized_messages()))
    return UpsertItem(_given(new, raw), new)


def _given(loaded: dict, raw: dict) -> dict:
    """The fields of ``loaded`` that ``raw`` gives: no defaults."""
    return {name: value for name, value in loaded.items() if _UPSERT_KEYS[name] in raw}


@bp.post("/maps/<map_id>/locations/bulk-delete")
@operation(body=BulkDeleteInputSchema, response=BulkDeleteResultSchema)
def bulk_delete_locations(map_id):
    """Delete 1 to 1000 locations at once, by id or by externalId.

    Names that match no location of the map are skipped; the answer lists
    the ids deleted, in the order first given.
    """
    map_ = owned_map(map_id)
    body = load_body()
    by = "ids" if "ids" in body else "external_ids"
    deleted = delete_locations(map_, by, body[by])
    db.session.commit()
    return respond({"deleted": deleted, "count": len(deleted)})


@bp.get("/maps/<map_id>/locations.geojson")
@operation(query=LocationFilterSchema, response=FeatureCollectionSchema, media_type=GEOJSON)
def export_geojson(map_id):
    """Export a map's locations as one GeoJSON FeatureCollection (RFC 7946).

    Not paged and not wrapped in `data`: streamed, in the order `sort` asks,
    with the list's filters. Each Feature is a Point `[lng, lat]`, its id the
    location's, its properties the location's fields (`layerIds` by layer
    order; `properties` the location's own object).
    """
    map_ = read_map(map_id)
    chosen = selection(load_query(), search_index=False)
    features = stream_with_context(export_features(map_.id, chosen))
    return current_app.response_class(features, mimetype=GEOJSON)


@bp.post("/maps/<map_id>/locations/import")
@operation(
    query=ImportQuerySchema,
    body=ImportInputSchema,
    body_media_types=(GEOJSON, "application/json"),
    response=BulkResultSchema,
    status=201,
    conflict=True,
    other_success=(200, UpsertResultSchema, "With upsert=true: as POST .../locations/upsert answers."),
)
def import_geojson(map_id):
    """Create 1 to 100 locations from a GeoJSON FeatureCollection: all of them or none.

    Each Feature is a Point `[lng, lat]` whose properties are read as the
    export writes them; any other property joins the location's
    `properties`. `nameProperty` names the property read as the name. The
    details of an error name every bad Feature by its index. With
    `upsert=true`, 1 to 1000 Features are upserted by their `externalId`
    (each needs one): a Feature naming a location of the map updates it as
    PUT does, the others create; the answer is the upsert's.
    """
    # Read before the map's lock is taken, as the bulk create does.
    read_features = settled(_read_features)
    map_ = owned_map(map_id)
    loaded, errors = read_features()
    if load_query()["upsert"]:
        return _upsert_features(map_, loaded, errors)
    indexes, items = list(loaded), list(loaded.values())
    references = References(map_, items)
    found = dict(repeated_external_ids(loaded))
    for position, item_errors in references.errors(items).items():
        found.setdefault(indexes[position], {}).update(item_errors)
    for index, item_errors in found.items():
        errors.setdefault(index, {}).setdefault("properties", {}).update(item_errors)
    raise_item_errors(errors, "Some Features are invalid; none was created.", "features")
    created = create_locations(map_, items, references)
    db.session.commit()
    return respond({"created": created, "count": len(created)})


def _read_features() -> tuple[dict[int, dict | UpsertItem], dict[int, dict]]:
    """The import's valid Features read as location inputs (as upsert items
    with ``upsert=true``), and the errors of the others, by index."""
    query = load_query()
    name_property = query["name_property"]
    read, envelope = (
        (_read_upsert_feature, _import_upsert_envelope)
        if query["upsert"]
        else (read_feature, _import_envelope)
    )
    features = load_body(schema=envelope)["features"]
    loaded, errors = {}, {}
    for index, feature in enumerate(features):
        item, item_errors = read(feature, name_property)
        if item_errors:
            errors[index] = item_errors
        else:
            loaded[index] = item
    return loaded, errors


def _read_upsert_feature(feature, name_property: str) -> tuple[UpsertItem | None, dict]:
    """A Feature read as an upsert item: the fields it gives (as PUT reads
    them) and, if it can create a location, the location it would create;
    its errors as a create count only if its externalId turns out new."""
    given, errors = read_feature(feature, name_property, partial=True)
    if errors:
        return None, errors
    if given.get("external_id") is None:
        return None, {"properties": {"externalId": ["Required with upsert=true."]}}
    new, new_errors = read_feature(feature, name_property)
    return UpsertItem(given, new, new_errors or None), {}


def _upsert_features(map_, items: dict[int, UpsertItem], errors: dict[int, dict]):
    """``import?upsert=true``: the Features upserted as the upsert does."""
    plan = UpsertPlan(map_, items, nest="properties")
    for index, item_errors in plan.errors.items():
        errors.setdefault(index, {}).update(item_errors)
    raise_item_errors(errors, "Some Features are invalid; nothing was written.", "features")
    return respond_dumped(_upserted(plan), status=200)


@bp.get("/maps/<map_id>/locations/clusters")
@operation(query=ClusterQuerySchema, response=ClustersSchema)
def list_location_clusters(map_id):
    """Get a viewport's locations, grouped in 64-pixel cells where dense.

    For drawing a map of any size: `bbox` and `zoom` are required, and every
    filter of the list applies. A cell holding two or more matching
    locations is a cluster (their count, mean position and box); a cell
    holding one gives the location itself. Counts are exact.
    """
    map_ = read_map(map_id)
    return respond_dumped(viewport_clusters(map_.id, load_query()))


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
@operation(body=LocationInputSchema(partial=True), response=LocationSchema, conflict=True)
def update_location(map_id, location_id):
    """Update a location (fields left out keep their value)."""
    map_ = owned_map(map_id)
    location = map_child(Location, map_, location_id, *LOCATION_LOADS)
    data = load_body()
    references = check_references(map_, data)
    apply_location_update(location, data, references)
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
