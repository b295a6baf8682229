"""The collections: each map of the key's account, and what a filter may name."""

from flask import Blueprint, g
from sqlalchemy import func, select

from ..extensions import db
from ..services.ownership import read_map
from ..storage.models import Location, Map
from ..timeutil import format_timestamp
from .answers import GEOJSON, JSON, SCHEMA_JSON, answer, check_format, link, url

bp = Blueprint("ogcapi_collections", __name__)

CRS84 = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"
GREGORIAN = "http://www.opengis.net/def/uom/ISO-8601/0/Gregorian"
WORLD = [-180.0, -90.0, 180.0, 90.0]

_maps, _locations = Map.__table__, Location.__table__
_c = _locations.c
_EXTENT = select(
    _c.map_id,
    func.min(_c.lng),
    func.min(_c.lat),
    func.max(_c.lng),
    func.max(_c.lat),
    func.min(_c.created_at),
    func.max(_c.updated_at),
).group_by(_c.map_id)


def _extents(map_ids: list[str]) -> dict[str, tuple]:
    """Each map's (bbox, oldest createdAt, newest updatedAt), of those with locations."""
    rows = db.session.connection().execute(_EXTENT.where(_c.map_id.in_(map_ids))).all()
    return {row[0]: (list(row[1:5]), row[5], row[6]) for row in rows}


def _collection(map_, extent) -> dict:
    bbox, oldest, newest = extent or (WORLD, None, None)
    base = f"/collections/{map_.id}"
    return {
        "id": map_.id,
        "title": map_.title,
        "description": map_.description,
        "itemType": "feature",
        "crs": [CRS84],
        "storageCrs": CRS84,
        "extent": {
            "spatial": {"bbox": [bbox], "crs": CRS84},
            "temporal": {
                "interval": [[format_timestamp(oldest), format_timestamp(newest)]],
                "trs": GREGORIAN,
            },
        },
        "links": [
            link(url(base), "self", JSON, map_.title),
            link(url(base + "/items"), "items", GEOJSON, "Its locations"),
            link(
                url(base + "/queryables"),
                "http://www.opengis.net/def/rel/ogc/1.0/queryables",
                SCHEMA_JSON,
                "What a filter may name",
            ),
        ],
    }


@bp.get("/collections")
def list_collections():
    """Every map of the key's account, in creation order."""
    check_format("json")
    maps = (
        db.session.connection()
        .execute(
            select(_maps).where(_maps.c.account_id == g.account.id).order_by(_maps.c.pk)
        )
        .all()
    )
    extents = _extents([map_.id for map_ in maps]) if maps else {}
    return answer(
        {
            "collections": [_collection(map_, extents.get(map_.id)) for map_ in maps],
            "links": [link(url("/collections"), "self", JSON, "The maps")],
        }
    )


@bp.get("/collections/<map_id>")
def get_collection(map_id):
    """One map as a collection."""
    map_ = read_map(map_id)
    check_format("json")
    return answer(_collection(map_, _extents([map_.id]).get(map_.id)))


@bp.get("/collections/<map_id>/queryables")
def get_queryables(map_id):
    """The properties a filter may name, as a JSON Schema."""
    map_ = read_map(map_id)
    check_format("json")
    text = {"type": "string"}
    moment = {"type": "string", "format": "date-time"}
    return answer(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": url(f"/collections/{map_.id}/queryables"),
            "type": "object",
            "title": map_.title,
            "properties": {
                "geometry": {
                    "title": "The location's point",
                    "format": "geometry-point",
                    "x-ogc-role": "primary-geometry",
                },
                "name": {**text, "title": "Name"},
                "description": {**text, "title": "Description"},
                "address": {**text, "title": "Address"},
                "externalId": {**text, "title": "Its id in your own system"},
                "categoryId": {
                    "type": ["string", "null"],
                    "title": "Its category's id",
                },
                "createdAt": {**moment, "title": "Created at"},
                "updatedAt": {**moment, "title": "Last changed at"},
            },
            "additionalProperties": False,
        },
        SCHEMA_JSON,
    )
