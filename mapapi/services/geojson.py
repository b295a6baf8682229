"""Locations as GeoJSON Features, written by the database: the export's
streamed FeatureCollection and the pages of ``/ogcapi``'s items. The list's
pages of locations (``location_reads``) are written with the same
functions (``members``, ``array_in_order``, ``documents_page``) in the
API's Location shape.

Each Feature's JSON text is built by the database in the statement that
selects it (SQLite's ``json_object``, PostgreSQL's ``json_build_object``),
tag ids and layer ids in their order included, so a page is one statement
and Python only joins the texts. Built per row in Python, a page of 1,000
cost several times the statement itself.

The export reads the map in keyset pages of ``EXPORT_CHUNK`` locations and
writes each page out before reading the next, so its memory does not grow
with the map and the first bytes leave before the last rows are read. Each
page continues after the last location of the one before in the sort's
order, from the sort's index, so a deep page costs what the first does.
Exporting 100,000 locations (72 MB) added 19 MB to the server's resident
memory with pages of 200, 26 MB with pages of 500 (measured with
``mapapi serve`` on SQLite).
"""

from collections.abc import Iterator

from sqlalchemy import Text, bindparam, cast, func, literal_column, select

from ..extensions import db
from ..storage.models import Layer, Location, LocationTag, location_layers
from ..storage.sqlformat import (
    api_timestamp,
    json_array,
    json_array_agg,
    json_document,
    json_float,
    json_object,
    json_text_object,
    json_texts_agg,
)
from .location_filters import Selection

EXPORT_CHUNK = 200

_locations, _layers, _links = Location.__table__, Layer.__table__, LocationTag.__table__
_c = _locations.c


def array_in_order(column, where, order_by, aggregate=json_array_agg):
    """A scalar subquery: the JSON array of ``column``'s values that ``where``
    selects, in the order ``order_by`` gives (correlated to the location);
    ``aggregate=json_texts_agg`` for values that are JSON texts already."""
    ordered = select(column.label("value")).where(where).order_by(order_by)
    ordered = ordered.correlate(_locations).subquery()
    return json_document(select(aggregate(ordered.c.value)).scalar_subquery())


def members(*pairs, joined=False):
    """``json_object`` of ``(key, value)`` pairs; keys written into the SQL.
    ``joined``: ``json_text_object``, whose documents inside are not parsed again."""
    kind = json_text_object if joined else json_object
    return kind(*(part for key, value in pairs for part in (literal_column(f"'{key}'"), value)))


def _constant(text: str):
    """A constant JSON string (``text`` holds no quote)."""
    return json_document(literal_column(f"'\"{text}\"'"))


TAG_IDS = array_in_order(
    _links.c.tag_id, _links.c.location_id == _c.id, _links.c.position
)
_LAYER_IDS = array_in_order(
    location_layers.c.layer_id,
    (location_layers.c.location_id == _c.id)
    & (_layers.c.id == location_layers.c.layer_id),
    _layers.c.position,
)
#: A location as the export's Feature (contract section 9), as JSON text.
FEATURE = cast(
    members(
        ("type", _constant("Feature")),
        ("id", _c.id),
        (
            "geometry",
            members(
                ("type", _constant("Point")),
                ("coordinates", json_array(json_float(_c.lng), json_float(_c.lat))),
            ),
        ),
        (
            "properties",
            members(
                ("name", _c.name),
                ("description", _c.description),
                ("address", _c.address),
                ("categoryId", _c.category_id),
                ("tagIds", TAG_IDS),
                ("layerIds", _LAYER_IDS),
                ("properties", json_document(_c.properties)),
                ("externalId", _c.external_id),
                ("createdAt", api_timestamp(_c.created_at)),
                ("updatedAt", api_timestamp(_c.updated_at)),
            ),
        ),
    ),
    Text,
).label("feature")


def feature_rows(map_id: str, chosen: Selection, limit: int, after=None) -> list:
    """Up to ``limit`` rows ``(pk, sort_key, feature)`` of the locations of
    map ``map_id`` that ``chosen`` selects, in its order, after the location
    ``after`` (its ``(sort_key, pk)``) if given: a keyset page, whose cost
    does not grow with its depth.

    The page's keys are chosen first, from the indexes alone; only then are
    their Features written. Selected at once, a box of 4,000 locations had
    all 4,000 written before the sort kept 1,000 (a quarter of a second).
    """
    sort_key = _c.pk if chosen.key is None else chosen.key
    keys = (
        select(_c.pk.label("key_pk"), sort_key.label("sort_key"))
        .where(chosen.in_map(map_id), *chosen.where)
        .order_by(*chosen.order_by())
        .limit(limit)
    )
    if after is not None:
        keys = keys.where(chosen.after(*after))
    keys = keys.subquery()
    page = select(_c.pk, keys.c.sort_key, FEATURE).join_from(keys, _locations, _c.pk == keys.c.key_pk)
    return chosen.in_order(db.session.connection().execute(page).all())


def documents_page(where: tuple, order_by: tuple, shape, exact):
    """A statement answering one row: the JSON array's text of ``shape`` (a
    location's document, as ``FEATURE`` is) for the locations ``where``
    selects in the order ``order_by`` gives, ``limit`` of them after the
    first ``offset`` (bound parameters), built by the database; and whether
    ``exact`` (1 or 0) holds for each of them (NULL for none).

    The page's keys first, from the order's index alone, and only then the
    documents of those: the rows an OFFSET skips are never formatted.
    """
    keys = (
        select(_c.pk).where(*where).order_by(*order_by)
        .limit(bindparam("limit")).offset(bindparam("offset")).subquery()
    )  # fmt: skip
    documents = (
        select(shape.label("document"), exact.label("exact"))
        .join_from(_locations, keys, _c.pk == keys.c.pk)
        .order_by(*order_by)
        .subquery()
    )
    return select(json_texts_agg(documents.c.document), func.min(documents.c.exact))


def count_features(map_id: str, chosen: Selection) -> int:
    """How many locations of map ``map_id`` ``chosen`` selects."""
    counted = select(func.count()).where(chosen.in_map(map_id), *chosen.where)
    return db.session.connection().execute(counted).scalar_one()


def feature_of(map_id: str, location_id: str) -> str | None:
    """Location ``location_id`` of map ``map_id`` as its Feature's JSON text; None if none."""
    found = select(FEATURE).where(_c.map_id == map_id, _c.id == location_id)
    return db.session.connection().execute(found).scalar_one_or_none()


def export_features(map_id: str, chosen: Selection) -> Iterator[bytes]:
    """The FeatureCollection of the locations of map ``map_id`` that
    ``chosen`` selects, in its order, as chunks of JSON text."""
    yield b'{"type":"FeatureCollection","features":['
    after, separator = None, b""
    while True:
        rows = feature_rows(map_id, chosen, EXPORT_CHUNK, after)
        if rows:
            yield separator + ",".join(row.feature for row in rows).encode()
            separator = b","
        if len(rows) < EXPORT_CHUNK:
            break
        after = (rows[-1].sort_key, rows[-1].pk)
    yield b"]}\n"
