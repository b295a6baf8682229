"""Part 4: creating, replacing, changing and deleting locations as Features.

Each write goes through the services ``/api/v1`` uses (validation, events
and webhooks, the map's lock), so the two surfaces cannot drift. A Feature
is read as the import reads one. ``If-Match`` is compared with the
Feature's ETag in the write's transaction, after the map is locked: of two
editors sending the same one, one wins.
"""

import orjson
from flask import Blueprint, g, request

from ..contract.geojson import read_feature
from ..extensions import db
from ..http.errors import APIError, not_found, settled, validation_error
from ..http.payload import json_body
from ..services.geojson import feature_of
from ..services.locations import (
    LOCATION_LOADS,
    References,
    apply_location_update,
    create_locations,
    remove_location,
)
from ..services.ownership import locked_map_row, map_child, owned_map, read_map
from ..storage.models import Location, could_be_id
from .answers import GEOJSON, JSON, answer, feature_etag, url, with_links
from .items import item_links

bp = Blueprint("ogcapi_edits", __name__)

MERGE_PATCH = "application/merge-patch+json"
#: A Feature's members a GET answers that a write ignores (GET-modify-PUT works).
READ_ONLY_MEMBERS = ("links",)
READ_ONLY_ALLOW = "GET, HEAD, OPTIONS"
ALLOW = {
    "items": "GET, HEAD, OPTIONS, POST",
    "item": "DELETE, GET, HEAD, OPTIONS, PATCH, PUT",
}


@bp.post("/collections/<map_id>/items")
def create_item(map_id):
    """Create a location from a Feature (201, its URL in Location)."""
    read = settled(lambda: _read_feature(json_body((GEOJSON, JSON))))
    map_ = locked_map_row(map_id)
    data = read()
    references = _references(map_, data)
    (location,) = create_locations(map_, [data], references)
    db.session.commit()
    response = _feature_answer(map_, location["id"], 201)
    response.headers["Location"] = url(f"/collections/{map_.id}/items/{location['id']}")
    return response


@bp.put("/collections/<map_id>/items/<location_id>")
def replace_item(map_id, location_id):
    """Replace a location: what the Feature leaves out takes its default."""
    map_, location = _locked_location(map_id, location_id)
    data = _read_feature(json_body((GEOJSON, JSON)))
    apply_location_update(location, data, _references(map_, data))
    db.session.commit()
    return _feature_answer(map_, location.id, 200)


@bp.patch("/collections/<map_id>/items/<location_id>")
def update_item(map_id, location_id):
    """Change a location by a JSON Merge Patch of its Feature (RFC 7396)."""
    map_, location = _locked_location(map_id, location_id)
    patch = json_body((MERGE_PATCH, JSON))
    current = orjson.loads(feature_of(map_.id, location.id))
    data = _read_feature(merge_patch(current, patch))
    apply_location_update(location, data, _references(map_, data))
    db.session.commit()
    return _feature_answer(map_, location.id, 200)


@bp.delete("/collections/<map_id>/items/<location_id>")
def delete_item(map_id, location_id):
    """Delete a location (204)."""
    _map, location = _locked_location(map_id, location_id)
    remove_location(location)
    db.session.commit()
    return answer(b"", JSON, 204)


@bp.route("/collections/<map_id>/items", methods=["OPTIONS"])
def items_options(map_id):
    """The methods this key may use on the items: Allow."""
    read_map(map_id)
    return _allow("items")


@bp.route("/collections/<map_id>/items/<location_id>", methods=["OPTIONS"])
def item_options(map_id, location_id):
    """The methods this key may use on the item: Allow."""
    map_ = read_map(map_id)
    if not (could_be_id(location_id) and feature_of(map_.id, location_id)):
        raise not_found("Location")
    return _allow("item")


def _allow(where: str):
    response = answer(b"", JSON, 204)
    response.headers.pop("Content-Type", None)
    response.headers["Allow"] = (
        ALLOW[where] if g.account.scope == "READ_WRITE" else READ_ONLY_ALLOW
    )
    return response


def merge_patch(target, patch):
    """RFC 7396: ``patch`` applied to ``target``; ``null`` removes a member."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _read_feature(feature: dict) -> dict:
    """A Feature read as a location create (every field it leaves out at its default)."""
    feature = {
        key: value for key, value in feature.items() if key not in READ_ONLY_MEMBERS
    }
    data, errors = read_feature(feature, "name")
    if errors:
        raise validation_error("The Feature is invalid.", errors)
    return data


def _references(map_, data: dict) -> References:
    """The category, tags and layers the Feature names; VALIDATION_ERROR for
    any not of this map, keyed as the Feature is shaped."""
    references = References(map_, [data])
    errors = references.errors([data])
    if errors:
        raise validation_error("The Feature is invalid.", {"properties": errors[0]})
    return references


def _locked_location(map_id: str, location_id: str) -> tuple:
    """The caller's map, locked, and its location, after ``If-Match`` holds."""
    map_ = owned_map(map_id)
    location = map_child(Location, map_, location_id, *LOCATION_LOADS)
    if request.headers.get("If-Match", "").strip():
        etag = feature_etag(feature_of(map_.id, location.id)).strip('"')
        if not request.if_match.contains(etag):
            raise APIError(
                412,
                "PRECONDITION_FAILED",
                "The location has changed since the If-Match ETag was read; read it again.",
            )
    return map_, location


def _feature_answer(map_, location_id: str, status: int):
    """The location as its Feature, with its links and ETag."""
    feature = feature_of(map_.id, location_id)
    return answer(
        with_links(feature, item_links(map_, location_id)),
        GEOJSON,
        status,
        {"ETag": feature_etag(feature)},
    )
