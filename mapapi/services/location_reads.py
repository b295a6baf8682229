"""Locations read for a response: rows turned straight into its JSON.

A page of 100 locations with their tags and layers is the API's heaviest
read. Through the ORM it built some 400 objects and parsed every timestamp
and ``properties`` document only to write them out again. Here Core
statements return what the response shows: timestamps written by the
database as the API writes them, ``properties`` as its stored JSON text
(embedded as it is), and each layer dumped once however many of the page's
locations are on it. Columns and keys are taken from ``LocationSchema`` and
``LayerSchema``, so the output stays the one they define (a test compares
it with their dump of the same rows).
"""

from marshmallow import Schema, fields
from sqlalchemy import Row, Text, bindparam, cast, func, select

from ..extensions import db
from ..fields import Timestamp
from ..jsonprovider import RawJSON
from ..models import Layer, Location, LocationTag, location_layers
from ..pagination import PaginationSchema, page_info
from ..schemas import LayerSchema, LocationSchema
from ..serialization import compile_dumper
from ..sqlformat import api_timestamp

RELATIONS = ("tag_ids", "layers")  # the fields that are not columns of the row

_locations, _links, _layers = Location.__table__, LocationTag.__table__, Layer.__table__


def _output_columns(schema: Schema, table, skip=()) -> list:
    """``table``'s columns for ``schema``'s fields, in its order, labelled with its keys."""
    columns = []
    for name, field in schema.dump_fields.items():
        if name in skip:
            continue
        column = table.c[field.attribute or name]
        if isinstance(field, Timestamp):
            column = api_timestamp(column)
        elif isinstance(field, fields.Dict):
            column = cast(column, Text)  # the stored JSON text
        columns.append(column.label(field.data_key or name))
    return columns


_LOCATION_COLUMNS = _output_columns(LocationSchema(), _locations, skip=RELATIONS)
_LOCATION_KEYS = tuple(column.name for column in _LOCATION_COLUMNS)
_LAYER_COLUMNS = _output_columns(LayerSchema(), _layers)
_LAYER_KEYS = tuple(column.name for column in _LAYER_COLUMNS)
_LAYER_ID = _LAYER_KEYS.index("id")

# Built once: the page of 100 is the hot path.
_COUNT = select(func.count()).where(_locations.c.map_id == bindparam("map_id"))
# The page's keys first, from the (map_id, pk) index alone; only then its
# rows. Selected directly, the rows an OFFSET skips would be read and (on
# PostgreSQL) formatted too: 4x the time of page 1 at page 1000 of 100,000.
_page_keys = (
    select(_locations.c.pk)
    .where(_locations.c.map_id == bindparam("map_id"))
    .order_by(_locations.c.pk)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
    .subquery()
)
_PAGE = (
    select(_locations.c.pk, *_LOCATION_COLUMNS)
    .join_from(_locations, _page_keys, _locations.c.pk == _page_keys.c.pk)
    .order_by(_locations.c.pk)
)
_ONE = select(_locations.c.pk, *_LOCATION_COLUMNS).where(
    _locations.c.map_id == bindparam("map_id"), _locations.c.id == bindparam("location_id")
)
# The locations of a page are exactly its map's locations from its first
# pk to its last: their tags and layers are found through the same index,
# with no list of 100 ids to send.
_ON_PAGE = (
    (_locations.c.map_id == bindparam("map_id"))
    & (_locations.c.pk >= bindparam("first"))
    & (_locations.c.pk <= bindparam("last"))
)
_TAGS = (
    select(_links.c.location_id, _links.c.tag_id)
    .join_from(_locations, _links, _links.c.location_id == _locations.c.id)
    .where(_ON_PAGE)
    .order_by(_links.c.position)
)
_LAYERS = (
    select(location_layers.c.location_id, *_LAYER_COLUMNS)
    .join_from(_locations, location_layers, location_layers.c.location_id == _locations.c.id)
    .join(_layers, location_layers.c.layer_id == _layers.c.id)
    .where(_ON_PAGE)
    .order_by(_layers.c.position)
)
_dump_pagination = compile_dumper(PaginationSchema())


def location_page(map_id: str, page: int, page_size: int) -> dict:
    """``{"locations": [...], "pagination": {...}}`` of map ``map_id``, dumped."""
    connection = db.session.connection()
    total = connection.execute(_COUNT, {"map_id": map_id}).scalar_one()
    offset = (page - 1) * page_size
    rows = []
    if offset < total:  # a page past the end costs no OFFSET walk
        params = {"map_id": map_id, "limit": page_size, "offset": offset}
        rows = connection.execute(_PAGE, params).all()
    return {
        "locations": _with_relations(connection, map_id, rows),
        "pagination": _dump_pagination(page_info(total, page, page_size)),
    }


def read_location(map_id: str, location_id: str) -> dict | None:
    """Location ``location_id`` of map ``map_id``, dumped; None when there is none."""
    connection = db.session.connection()
    rows = connection.execute(_ONE, {"map_id": map_id, "location_id": location_id}).all()
    found = _with_relations(connection, map_id, rows)
    return found[0] if found else None


def _with_relations(connection, map_id: str, rows: list[Row]) -> list[dict]:
    """The locations of ``rows`` (consecutive locations of map ``map_id``, in
    ``pk`` order) as dicts, with their tag ids and layers."""
    by_id = {}
    for _pk, *values in rows:
        location = dict(zip(_LOCATION_KEYS, values, strict=True))
        location["properties"] = RawJSON(location["properties"])
        location["tagIds"] = []
        location["layers"] = []
        by_id[location["id"]] = location
    if not by_id:
        return []
    on_page = {"map_id": map_id, "first": rows[0].pk, "last": rows[-1].pk}
    # .all(): one fetch, where iterating the result fetches row by row.
    for location_id, tag_id in connection.execute(_TAGS, on_page).all():
        by_id[location_id]["tagIds"].append(tag_id)
    layers = {}  # each layer dumped once, shared by its locations
    for location_id, *values in connection.execute(_LAYERS, on_page).all():
        layer = layers.get(values[_LAYER_ID])
        if layer is None:
            layer = layers[values[_LAYER_ID]] = dict(zip(_LAYER_KEYS, values, strict=True))
        by_id[location_id]["layers"].append(layer)
    return list(by_id.values())
