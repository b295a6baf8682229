"""Locations read for a response: rows turned straight into its JSON.

A page of 100 locations with their tags and layers is the API's heaviest
read. Through the ORM it built some 400 objects and parsed every timestamp
and ``properties`` document only to write them out again. Here Core
statements return what the response shows: timestamps written by the
database as the API writes them, ``properties`` as its stored JSON text
(embedded as it is), each location's tag and layer ids aggregated into its
own row, and each layer of the page read and dumped once. That is one row
per location and one per layer: on SQLite every row fetched releases and
retakes the GIL, which under a threaded server's load costs more than the
row itself. Columns and keys are taken from ``LocationSchema`` and
``LayerSchema``, so the output stays the one they define (a test compares
it with their dump of the same rows).
"""

from operator import itemgetter

from marshmallow import Schema, fields
from sqlalchemy import Row, String, Text, bindparam, cast, func, literal_column, select

from ..extensions import db
from ..fields import Timestamp
from ..jsonprovider import RawJSON
from ..models import Layer, Location, LocationTag, location_layers
from ..pagination import PaginationSchema, page_info
from ..schemas import LayerSchema, LocationSchema
from ..serialization import compile_dumper
from ..sqlformat import api_timestamp

_RELATIONS = ("tag_ids", "layers")  # the fields that are not columns of the row

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


_LOCATION_COLUMNS = _output_columns(LocationSchema(), _locations, skip=_RELATIONS)
_LOCATION_KEYS = tuple(column.name for column in _LOCATION_COLUMNS)
_LAYER_COLUMNS = _output_columns(LayerSchema(), _layers)
_LAYER_KEYS = tuple(column.name for column in _LAYER_COLUMNS)
_LAYER_ID = _LAYER_KEYS.index("id")

# Built once: the page of 100 is the hot path.
_COUNT = select(func.count()).where(_locations.c.map_id == bindparam("map_id"))
# The page's keys first, from the (map_id, pk) index alone; only then its
# rows. Selected directly, the rows an OFFSET skips would be read and (on
# PostgreSQL) formatted too: page 1000 of 100,000 took 2.6 times page 1.
_page_keys = (
    select(_locations.c.pk)
    .where(_locations.c.map_id == bindparam("map_id"))
    .order_by(_locations.c.pk)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
    .subquery()
)
# Each location's tags as "position tag_id,...", and its layer ids as
# "id,...": in no particular order (SQLite 3.40 cannot order inside an
# aggregate), put in order in Python. Ids never hold " " or ",".
_TAG_LINKS = (
    select(
        func.aggregate_strings(
            cast(_links.c.position, String) + literal_column("' '") + _links.c.tag_id, ","
        )
    )
    .where(_links.c.location_id == _locations.c.id)
    .scalar_subquery()
)
_LAYER_IDS = (
    select(func.aggregate_strings(location_layers.c.layer_id, ","))
    .where(location_layers.c.location_id == _locations.c.id)
    .scalar_subquery()
)
_ROW = (_locations.c.pk, _TAG_LINKS, _LAYER_IDS, *_LOCATION_COLUMNS)
_PAGE = (
    select(*_ROW)
    .join_from(_locations, _page_keys, _locations.c.pk == _page_keys.c.pk)
    .order_by(_locations.c.pk)
)
_ONE = select(*_ROW).where(
    _locations.c.map_id == bindparam("map_id"), _locations.c.id == bindparam("location_id")
)
# The locations of a page are exactly its map's locations from its first
# pk to its last: their layers are found through the same index.
_LAYERS = select(*_LAYER_COLUMNS).where(
    _layers.c.id.in_(
        select(location_layers.c.layer_id)
        .join_from(_locations, location_layers, location_layers.c.location_id == _locations.c.id)
        .where(
            _locations.c.map_id == bindparam("map_id"),
            _locations.c.pk >= bindparam("first"),
            _locations.c.pk <= bindparam("last"),
        )
    )
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
    if not rows:
        return []
    on_page = {"map_id": map_id, "first": rows[0].pk, "last": rows[-1].pk}
    layers = {  # each layer dumped once, shared by its locations
        values[_LAYER_ID]: dict(zip(_LAYER_KEYS, values, strict=True))
        for values in connection.execute(_LAYERS, on_page).all()
    }
    locations = []
    for _pk, tag_links, layer_ids, *values in rows:
        location = dict(zip(_LOCATION_KEYS, values, strict=True))
        location["properties"] = RawJSON(location["properties"])
        location["tagIds"] = _tag_ids(tag_links)
        location["layers"] = sorted(
            (layers[layer_id] for layer_id in layer_ids.split(",")) if layer_ids else (),
            key=_by_order,
        )
        locations.append(location)
    return locations


def _tag_ids(tag_links: str | None) -> list[str]:
    """``"1 b,0 a"`` -> ``["a", "b"]``: the tag ids in the order the client gave."""
    if not tag_links:
        return []
    links = (link.split(" ") for link in tag_links.split(","))
    return [tag_id for _, tag_id in sorted((int(position), tag_id) for position, tag_id in links)]


_by_order = itemgetter("order")
