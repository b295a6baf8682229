"""Locations read for a response: rows turned straight into its JSON.

A page of the list is one JSON value the database writes
(``LOCATION_DOCUMENT``, through the export's functions in ``geojson.py``):
Python only puts it in the envelope. Where the database cannot write a
coordinate exactly as the API's encoder does (below 0.0001, where both
write an exponent), that page is read as rows and dumped here, below.

A page of 100 locations with their tags and layers is the API's heaviest
read. Through the ORM it built some 400 objects and parsed every timestamp
and ``properties`` document only to write them out again. Here Core
statements return what the response shows: timestamps written by the
database as the API writes them, ``properties`` as its stored JSON text
(embedded as it is), each location's tag and layer ids aggregated into its
own row, and each layer of the page read and dumped once. On SQLite each
statement answers with a single row, the JSON text of all its rows: every
row fetched there releases and retakes the GIL, which under a threaded
server's load costs more than the row itself. Columns and keys are taken
from ``LocationSchema`` and ``LayerSchema``, so the output stays the one
they define (a test compares it with their dump of the same rows).
"""

from operator import itemgetter

import orjson
from marshmallow import Schema, fields
from sqlalchemy import Float, String, Text, bindparam, cast, func, literal_column, select

from ..contract.fields import IDS_MAX, Timestamp
from ..contract.jsonprovider import RawJSON
from ..contract.pagination import PaginationSchema, page_info
from ..contract.schemas import LayerSchema, LocationSchema
from ..contract.serialization import compile_dumper
from ..extensions import db
from ..storage.models import Layer, Location, LocationTag, location_layers
from ..storage.sqlformat import (
    api_float,
    api_float_written,
    api_timestamp,
    exact_float,
    json_bool,
    json_document,
    json_rows,
    json_texts_agg,
)
from .geojson import TAG_IDS, array_in_order, documents_page, members
from .location_filters import Selection

_RELATIONS = ("tag_ids", "layers")  # the fields that are not columns of the row
# A tag's position (below IDS_MAX) plus this has as many digits as this.
_POSITION_OFFSET = 10 ** len(str(IDS_MAX))
_POSITION_DIGITS = len(str(_POSITION_OFFSET))

_locations, _links, _layers = Location.__table__, LocationTag.__table__, Layer.__table__


class _Output:
    """``table``'s columns for ``schema``'s fields, in its order, and what
    turns their values into the fields' output, read as rows or as JSON
    (``_rows``)."""

    def __init__(self, schema: Schema, table, skip=()):
        self.columns, self.keys, self.conversions = [], [], []
        #: ``(key, value)``: the members of the same output as JSON written by
        #: the database (``geojson.members``), and whether it writes each of
        #: them exactly as the API's encoder does (1 or 0, ``api_float_written``).
        self.members, self.exact = [], literal_column("1")
        for name, field in schema.dump_fields.items():
            if name in skip:
                continue
            key, stored = field.data_key or name, table.c[field.attribute or name]
            column, member = stored, stored
            if isinstance(field, Timestamp):
                column = member = api_timestamp(stored)
            elif isinstance(field, fields.Dict):
                column = cast(stored, Text)  # the stored JSON text
                member = json_document(stored)
                self.conversions.append((key, RawJSON))
            elif isinstance(field, fields.Float):  # text in SQLite's JSON
                member = api_float(stored)
                self.exact = self.exact * api_float_written(stored)
                self.conversions.append((key, float))
            elif isinstance(field, fields.Boolean):  # 0 and 1 in SQLite's JSON
                member = json_bool(stored)
                self.conversions.append((key, bool))
            self.columns.append(column.label(key))
            self.keys.append(key)
            self.members.append((key, member))

    def dump(self, values) -> dict:
        dumped = dict(zip(self.keys, values, strict=True))
        for key, convert in self.conversions:
            value = dumped[key]
            if value is not None:
                dumped[key] = convert(value)
        return dumped


_LOCATION = _Output(LocationSchema(), _locations, skip=_RELATIONS)
_LAYER = _Output(LayerSchema(), _layers)
_LAYER_ID = _LAYER.keys.index("id")

# The documents of the map's layers (``map_id``), each written once for a
# page, not once for each of its locations (half the page's time on SQLite).
_LAYER_DOCUMENTS = (
    select(_layers.c.id, _layers.c.position, members(*_LAYER.members, joined=True).label("document"))
    .where(_layers.c.map_id == bindparam("map_id"))
    .cte("layer_documents")
    .prefix_with("MATERIALIZED")
)
#: A location of map ``map_id`` as the API shows it (``LocationSchema``), as
#: the JSON text the database writes, its tag ids and its layers (by their
#: order) included: the shape of the export's ``FEATURE``, through the same
#: functions.
LOCATION_DOCUMENT = members(
    *_LOCATION.members,
    ("tagIds", TAG_IDS),
    (
        "layers",
        array_in_order(
            _LAYER_DOCUMENTS.c.document,
            (location_layers.c.location_id == _locations.c.id)
            & (_LAYER_DOCUMENTS.c.id == location_layers.c.layer_id),
            _LAYER_DOCUMENTS.c.position,
            json_texts_agg,
        ),
    ),
    joined=True,
)
# A page of the map's locations in creation order, as one JSON value.
_PAGE_DOCUMENTS = documents_page(
    (_locations.c.map_id == bindparam("map_id"),), (_locations.c.pk,),
    LOCATION_DOCUMENT, _LOCATION.exact,
)  # fmt: skip
# Locations by their keys, as JSON texts, for a filtered page's few.
_DOCUMENTS_BY_PKS = select(_locations.c.pk, LOCATION_DOCUMENT, _LOCATION.exact).where(
    _locations.c.pk.in_(bindparam("pks", expanding=True))
)

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
# Each location's tags as "1001b,1000a,..." (each its position plus
# _POSITION_OFFSET, so that the texts sort as the positions do, then its
# id), and its layer ids as "id,...": in no particular order (SQLite 3.40
# cannot order inside an aggregate), put in order in Python. Ids never
# hold ",".
TAG_LINKS = (
    select(
        func.aggregate_strings(
            cast(_links.c.position + _POSITION_OFFSET, String) + _links.c.tag_id, ","
        )
    )
    .where(_links.c.location_id == _locations.c.id)
    .scalar_subquery()
)
LAYER_IDS = (
    select(func.aggregate_strings(location_layers.c.layer_id, ","))
    .where(location_layers.c.location_id == _locations.c.id)
    .scalar_subquery()
)
_ROW = (_locations.c.pk, TAG_LINKS, LAYER_IDS, *_LOCATION.columns)
_PAGE = (
    select(*_ROW)
    .join_from(_locations, _page_keys, _locations.c.pk == _page_keys.c.pk)
    .order_by(_locations.c.pk)
)
_ONE = select(*_ROW).where(
    _locations.c.map_id == bindparam("map_id"), _locations.c.id == bindparam("location_id")
)
# Locations named by id, any of a map's.
# Found by their ids, each through its unique index: the map is checked on
# the rows found, through an expression no index serves (``|| ''``), or
# SQLite's planner, knowing no better, walks the map's whole (map_id, pk)
# index (60 ms for an upsert's read-back in a 100,000-location map).
# read_locations gives them in the order asked.
_SOME = select(*_ROW).where(
    _locations.c.id.in_(bindparam("location_ids", expanding=True)),
    (_locations.c.map_id + "") == bindparam("map_id"),
)
# The locations of a page are exactly its map's locations from its first
# pk to its last: their layers are found through the same index.
_LAYERS = select(*_LAYER.columns).where(
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
# Other sets of locations: the layers their rows name.
_LAYERS_BY_ID = select(*_LAYER.columns).where(
    _layers.c.id.in_(bindparam("layer_ids", expanding=True))
)


# A filtered or sorted page: its keys first (from the filter's index), then
# its rows and their layers by those keys.
_BY_PKS = (
    select(*_ROW)
    .where(_locations.c.pk.in_(bindparam("pks", expanding=True)))
    .order_by(_locations.c.pk)
)
_LAYERS_BY_PKS = select(*_LAYER.columns).where(
    _layers.c.id.in_(
        select(location_layers.c.layer_id)
        .join_from(_locations, location_layers, location_layers.c.location_id == _locations.c.id)
        .where(_locations.c.pk.in_(bindparam("pks", expanding=True)))
    )
)


def _as_json(statement):
    """``statement`` answered in one row, the JSON text of its rows (SQLite)."""
    rows = statement.subquery()
    return select(json_rows(*(exact_float(c) if isinstance(c.type, Float) else c for c in rows.c)))


_AS_JSON = {
    statement: _as_json(statement)
    for statement in (
        _PAGE,
        _ONE,
        _SOME,
        _LAYERS,
        _LAYERS_BY_ID,
        _BY_PKS,
        _LAYERS_BY_PKS,
    )
}
_dump_pagination = compile_dumper(PaginationSchema())
#: The most locations a filtered page reads the keys of in one statement.
_FEW = 500
_by_first = itemgetter(0)
_by_order = itemgetter("order")


def location_page(map_id: str, page: int, page_size: int, chosen: Selection | None = None) -> dict:
    """``{"locations": [...], "pagination": {...}}`` of map ``map_id``, dumped:
    the locations ``chosen`` selects, in its order (all, by creation, if None)."""
    if chosen is not None and not chosen.is_plain:
        return _selected_page(map_id, page, page_size, chosen)
    connection = db.session.connection()
    total = connection.execute(_COUNT, {"map_id": map_id}).scalar_one()
    offset = (page - 1) * page_size
    locations = []
    if offset < total:  # a page past the end costs no OFFSET walk
        params = {"map_id": map_id, "limit": page_size, "offset": offset}
        text, exact = connection.execute(_PAGE_DOCUMENTS, params).one()
        if exact:
            locations = RawJSON(text)
        else:
            locations = _with_relations(connection, map_id, _rows(connection, _PAGE, params))
    return {
        "locations": locations,
        "pagination": _dump_pagination(page_info(total, page, page_size)),
    }


def _selected_page(map_id: str, page: int, page_size: int, chosen: Selection) -> dict:
    """A page of the locations ``chosen`` selects: the page's keys in order,
    then their rows and layers by key.

    A filter mostly selects a few locations, found by an index of their
    own (a tag's, a box's, q's trigrams). Their keys, at most ``_FEW`` and
    in no order, are read in one statement, then counted and put in order
    here: a count and then an ordered page would find them twice (on
    PostgreSQL, a q of an address spent 1.7 ms in its trigram indexes each
    time). Of a larger selection, the database counts the rows and reads
    the page in order; reading its first ``_FEW`` keys was wasted.
    """
    connection = db.session.connection()
    where = (chosen.in_map(map_id), *chosen.where)
    offset = (page - 1) * page_size
    few = connection.execute(select(*chosen.sort_columns()).where(*where).limit(_FEW + 1)).all()
    if len(few) <= _FEW:
        total = len(few)
        pks = [row[0] for row in chosen.in_order(few)[offset : offset + page_size]]
        return {
            "locations": _documents_by_pks(connection, map_id, pks),
            "pagination": _dump_pagination(page_info(total, page, page_size)),
        }
    total = connection.execute(select(func.count()).where(*where)).scalar_one()
    locations = []
    if offset < total:  # a page past the end costs no OFFSET walk
        params = {"map_id": map_id, "limit": page_size, "offset": offset}
        statement = documents_page(where, chosen.order_by(), LOCATION_DOCUMENT, _LOCATION.exact)
        text, exact = connection.execute(statement, params).one()
        locations = RawJSON(text)
        if not exact:
            keys = select(_locations.c.pk).where(*where).order_by(*chosen.order_by())
            locations = locations_by_pks(
                connection.scalars(keys.limit(page_size).offset(offset)).all()
            )
    return {
        "locations": locations,
        "pagination": _dump_pagination(page_info(total, page, page_size)),
    }


def _documents_by_pks(connection, map_id: str, pks: list[int]):
    """The locations whose ``pk`` are ``pks``, in that order, as one JSON
    value written by the database (dumped here if it cannot write one exactly)."""
    if not pks:
        return []
    rows = connection.execute(_DOCUMENTS_BY_PKS, {"map_id": map_id, "pks": pks}).all()
    if not all(exact for _pk, _document, exact in rows):
        return locations_by_pks(pks)
    documents = {pk: document for pk, document, _exact in rows}
    return RawJSON("[" + ",".join(documents[pk] for pk in pks) + "]")


def locations_by_pks(pks: list[int]) -> list[dict]:
    """The locations whose ``pk`` are ``pks``, dumped, in that order: two
    statements for any number of them."""
    if not pks:
        return []
    connection = db.session.connection()
    position = {pk: index for index, pk in enumerate(pks)}
    rows = sorted(_rows(connection, _BY_PKS, {"pks": pks}), key=lambda row: position[row[0]])
    return _with_layers(rows, _rows(connection, _LAYERS_BY_PKS, {"pks": pks}))


def read_location(map_id: str, location_id: str) -> dict | None:
    """Location ``location_id`` of map ``map_id``, dumped; None when there is none."""
    connection = db.session.connection()
    params = {"map_id": map_id, "location_id": location_id}
    found = _with_relations(connection, map_id, _rows(connection, _ONE, params))
    return found[0] if found else None


def read_locations(map_id: str, location_ids: list[str]) -> list[dict]:
    """Locations ``location_ids`` of map ``map_id``, dumped, in that order
    (those that exist): two statements for any number of them."""
    if not location_ids:
        return []
    connection = db.session.connection()
    rows = _rows(connection, _SOME, {"map_id": map_id, "location_ids": location_ids})
    by_id = {location["id"]: location for location in _with_named_layers(connection, rows)}
    return [by_id[location_id] for location_id in location_ids if location_id in by_id]


def _rows(connection, statement, params: dict) -> list:
    """``statement``'s rows, in its order if it has one.

    On SQLite they come as one row of JSON text, as the module says, in no
    guaranteed order; sorting them by their first column restores it, as
    every ordered statement here is ordered by that column.
    """
    if connection.dialect.name != "sqlite":
        return connection.execute(statement, params).all()
    rows = orjson.loads(connection.execute(_AS_JSON[statement], params).scalar_one())
    rows.sort(key=_by_first)
    return rows


def _with_relations(connection, map_id: str, rows: list) -> list[dict]:
    """The locations of ``rows`` (locations of map ``map_id``, in ``pk``
    order) as dicts, with their tag ids and layers (read for every location
    of the map from the first row's to the last's)."""
    if not rows:
        return []
    on_page = {"map_id": map_id, "first": rows[0][0], "last": rows[-1][0]}
    return _with_layers(rows, _rows(connection, _LAYERS, on_page))


def _with_named_layers(connection, rows: list) -> list[dict]:
    """The locations of ``rows`` (any of a map's) as dicts, with their tag
    ids and the layers their rows name, read by id."""
    layer_ids = {
        layer_id for _pk, _tags, ids, *_values in rows if ids for layer_id in ids.split(",")
    }
    layer_rows = []
    if layer_ids:
        layer_rows = _rows(connection, _LAYERS_BY_ID, {"layer_ids": sorted(layer_ids)})
    return _with_layers(rows, layer_rows)


def _with_layers(rows: list, layer_rows: list) -> list[dict]:
    """The locations of ``rows``, in their order, as dicts with their tag ids
    and their layers, from ``layer_rows`` (every layer any of them is on)."""
    layers = {  # each layer dumped once, shared by its locations
        values[_LAYER_ID]: _LAYER.dump(values) for values in layer_rows
    }
    locations = []
    for _pk, tag_links, layer_ids, *values in rows:
        location = _LOCATION.dump(values)
        location["tagIds"] = tag_ids(tag_links)
        location["layers"] = sorted(
            (layers[layer_id] for layer_id in layer_ids.split(",")) if layer_ids else (),
            key=_by_order,
        )
        locations.append(location)
    return locations


def tag_ids(tag_links: str | None) -> list[str]:
    """``"1001b,1000a"`` -> ``["a", "b"]``: the tag ids in the order the client gave."""
    if not tag_links:
        return []
    return [link[_POSITION_DIGITS:] for link in sorted(tag_links.split(","))]
