"""Locations: creating (one or a bulk), updating, and their memberships.

A location may only point at the category, tags and layers of its own
map; an id from anywhere else is a VALIDATION_ERROR naming the field. The
checks for a whole bulk cost two queries at most (categories and tags,
then layers).
"""

from operator import attrgetter

from sqlalchemy import bindparam, delete, insert, literal, select, union_all, update
from sqlalchemy.orm import selectinload

from ..extensions import db
from ..http.errors import not_found, validation_error
from ..storage.models import (
    FOLDED_COLUMNS,
    Category,
    Layer,
    Location,
    LocationTag,
    Map,
    Tag,
    could_be_id,
    location_layers,
    new_id,
)
from ..timeutil import utcnow
from . import journal
from .changes import apply_changes, stamp
from .location_reads import read_location
from .ownership import MapRow

#: What a dumped location needs, loaded in one statement per relation.
LOCATION_LOADS = (selectinload(Location.tag_links), selectinload(Location.layers))

_locations = Location.__table__
_INSERT_LOCATION = insert(_locations)
# On SQLite a bulk is one INSERT of many rows, not one statement per row:
# FTS5 writes the search table's new rows to disk once per statement
# (storage.search_indexes), 5 ms more for a bulk of 100 row by row.
# RETURNING, though nothing reads it, makes SQLAlchemy send it so
# ("insertmanyvalues"); on PostgreSQL the plain executemany was faster.
_INSERT_LOCATIONS_AT_ONCE = _INSERT_LOCATION.returning(_locations.c.pk)
_INSERT_TAG_LINK = insert(LocationTag.__table__)
# The lower-cased copies are left out: the column defaults write them.
_LOCATION_COLUMNS = tuple(
    column.name
    for column in _locations.columns
    if column.name != "pk" and column.name not in FOLDED_COLUMNS
)
# A location and its layer ids, one row per layer (one row with no layer id
# when it is on none): it exists, and what its memberships are, at once.
_LOCATION_LAYER_IDS = (
    select(_locations.c.pk, location_layers.c.layer_id)
    .select_from(
        _locations.outerjoin(location_layers, location_layers.c.location_id == _locations.c.id)
    )
    .where(_locations.c.map_id == bindparam("map_id"), _locations.c.id == bindparam("location_id"))
)
_DELETE_MEMBERSHIPS = delete(location_layers).where(
    location_layers.c.location_id == bindparam("location_id"),
    location_layers.c.layer_id.in_(bindparam("layer_ids", expanding=True)),
)
_INSERT_MEMBERSHIP = insert(location_layers)
_LAYER_IDS_IN_MAP = select(Layer.__table__.c.id).where(
    Layer.__table__.c.map_id == bindparam("map_id"),
    Layer.__table__.c.id.in_(bindparam("ids", expanding=True)),
)
# The categories and the tags named, looked up in one statement: (kind, id).
_CATEGORY_AND_TAG_IDS = union_all(
    *(
        select(literal(kind).label("kind"), model.__table__.c.id).where(
            model.__table__.c.map_id == bindparam("map_id"),
            model.__table__.c.id.in_(bindparam(f"{kind}_ids", expanding=True)),
        )
        for kind, model in (("category", Category), ("tag", Tag))
    )
)
_by_position = attrgetter("position")
_TOUCH_LOCATION = (
    update(_locations)
    .where(_locations.c.id == bindparam("location_id"))
    .values(updated_at=bindparam("now"))
)


def location_row(location: dict) -> dict:
    """The ``locations`` row of a created location (every column but ``pk``),
    so that all the rows of an executemany have the same keys."""
    return {name: location.get(name) for name in _LOCATION_COLUMNS}


class References:
    """The categories, tags and layers that location items name, looked up
    on their map at once, whatever the number of items: one query for the
    categories and tags, one for the layers, each only if some are named.
    The layers are kept, to show in the locations' ``layers``."""

    def __init__(self, map_: Map | MapRow, items: list[dict]):
        self.categories, self.tags = categories_and_tags(
            map_,
            {item["category_id"] for item in items if item.get("category_id")},
            {tag_id for item in items for tag_id in item.get("tag_ids", ())},
        )
        self.layers = layers_by_id(map_, {i for item in items for i in item.get("layer_ids", ())})

    def errors(self, items: list[dict]) -> dict[int, dict]:
        """Field errors, by item index, for references outside the map."""
        errors = {}
        for index, item in enumerate(items):
            item_errors = {}
            category_id = item.get("category_id")
            if category_id is not None and category_id not in self.categories:
                item_errors["categoryId"] = ["Not a category of this map."]
            unknown_tags = [t for t in item.get("tag_ids", ()) if t not in self.tags]
            if unknown_tags:
                item_errors["tagIds"] = [f"Not a tag of this map: {t}" for t in unknown_tags]
            unknown_layers = unknown_layer_errors(item.get("layer_ids", ()), self.layers)
            if unknown_layers:
                item_errors["layerIds"] = unknown_layers
            if item_errors:
                errors[index] = item_errors
        return errors

    def layers_of(self, layer_ids) -> list[Layer]:
        """The layers ``layer_ids`` name, ordered by ``order``, as a location shows them."""
        return sorted((self.layers[layer_id] for layer_id in layer_ids), key=_by_position)


def check_references(map_: Map | MapRow, data: dict) -> References:
    """The references of one item; VALIDATION_ERROR naming the fields that
    point outside the map."""
    references = References(map_, [data])
    errors = references.errors([data])
    if errors:
        raise validation_error("The request is invalid.", errors[0])
    return references


def repeated_external_ids(items: dict[int, dict]) -> dict[int, dict]:
    """Field errors, by index, for items whose ``externalId`` an earlier item
    of the same body has: the later one is at fault."""
    first_index, errors = {}, {}
    for index, item in items.items():
        external_id = item.get("external_id")
        if external_id is None:
            continue
        if external_id in first_index:
            errors[index] = {
                "externalId": [
                    f"Given twice in this request (also item {first_index[external_id]})."
                ]
            }
        else:
            first_index[external_id] = index
    return errors


def create_locations(map_: Map | MapRow, items: list[dict], references: References) -> list[dict]:
    """Insert ``items`` (already validated, their references checked) in
    order; the created locations, as dicts ready to dump with LocationSchema.

    Core, not ORM: a bulk of 100 is one INSERT statement per table written
    (locations, tag links, layer memberships) with nothing to track
    afterwards. The rows' ``pk``s follow the input order, which is the
    locations' order in every list.
    """
    if not items:
        return []
    now = utcnow()
    created, links, memberships = [], [], []
    for item in items:
        tag_ids = item.pop("tag_ids", [])
        layer_ids = item.pop("layer_ids", [])
        location = {
            **item,
            "id": new_id(),
            "map_id": map_.id,
            "created_at": now,
            "updated_at": now,
        }
        links.extend(tag_links(location["id"], tag_ids))
        memberships.extend({"location_id": location["id"], "layer_id": i} for i in layer_ids)
        created.append(location)
        location["tag_ids"], location["layers"] = tag_ids, references.layers_of(layer_ids)
    connection = db.session.connection()
    insert_rows = _INSERT_LOCATIONS_AT_ONCE if connection.dialect.name == "sqlite" else _INSERT_LOCATION
    connection.execute(insert_rows, [location_row(location) for location in created])
    if links:
        connection.execute(_INSERT_TAG_LINK, links)
    if memberships:
        connection.execute(_INSERT_MEMBERSHIP, memberships)
    for location in created:
        journal.created("location", location, map_.id)
    return created


def tag_links(location_id: str, tag_ids: list[str]) -> list[dict]:
    """The ``location_tags`` rows of a location's tags, in the order given."""
    return [
        {"location_id": location_id, "tag_id": tag_id, "position": position}
        for position, tag_id in enumerate(tag_ids)
    ]


def apply_location_update(location: Location, data: dict, references: References) -> None:
    """Apply a partial update: ``tag_ids`` replaces the tags, in the order
    given; ``layer_ids`` replaces the set of layers."""
    tag_ids = data.pop("tag_ids", None)
    layer_ids = data.pop("layer_ids", None)
    changed = apply_changes(location, data)
    if tag_ids is not None and tag_ids != location.tag_ids:
        existing = {link.tag_id: link for link in location.tag_links}
        links = []
        for position, tag_id in enumerate(tag_ids):
            link = existing.pop(tag_id, None) or LocationTag(tag_id=tag_id)
            link.position = position
            links.append(link)
        location.tag_links = links
        changed = _stamp_once(location, changed)
    if layer_ids is not None and set(layer_ids) != {layer.id for layer in location.layers}:
        location.layers = references.layers_of(layer_ids)
        _stamp_once(location, changed)


def _stamp_once(location: Location, stamped: bool) -> bool:
    """Stamp ``updated_at`` (and note the change) unless this update has already; it has now."""
    if not stamped:
        stamp(location)
    return True


def location_layer_ids(map_: Map, location_id: str) -> set[str]:
    """The ids of the layers location ``location_id`` of ``map_`` is on;
    NOT_FOUND when ``map_`` has no such location."""
    rows = could_be_id(location_id) and (
        db.session.connection()
        .execute(_LOCATION_LAYER_IDS, {"map_id": map_.id, "location_id": location_id})
        .all()
    )
    if not rows:
        raise not_found("Location")
    return {row.layer_id for row in rows if row.layer_id is not None}


def replace_layers(map_: Map, location_id: str, current: set[str], layer_ids: list[str]) -> dict:
    """Make ``layer_ids`` the whole set of layers of the location, which is
    on ``current`` now: only the memberships that change are written, and
    ``updated_at`` moves only when the set does. The location, dumped.

    Core statements on the membership table: the ORM would load the
    location, its tags and its layers as objects only to compute this
    difference at flush.
    """
    found = existing_layer_ids(map_, set(layer_ids))
    unknown = unknown_layer_errors(layer_ids, found)
    if unknown:
        raise validation_error("The request is invalid.", {"layerIds": unknown})
    removed, added = current - found, found - current
    connection = db.session.connection()
    if removed:
        connection.execute(
            _DELETE_MEMBERSHIPS, {"location_id": location_id, "layer_ids": list(removed)}
        )
    if added:
        connection.execute(
            _INSERT_MEMBERSHIP,
            [{"location_id": location_id, "layer_id": layer_id} for layer_id in added],
        )
    if removed or added:
        connection.execute(_TOUCH_LOCATION, {"location_id": location_id, "now": utcnow()})
    location = read_location(map_.id, location_id)
    if removed or added:
        journal.updated_body("location", location, map_.id)
    return location


def touch_locations(where, map_id: str, now=None) -> None:
    """Stamp ``updated_at`` (``now``, by default the present) on the
    locations of map ``map_id`` matching ``where``: they changed."""
    touched = db.session.execute(
        update(_locations)
        .where(_locations.c.map_id == map_id, where)
        .values(updated_at=now or utcnow())
        .returning(_locations.c.pk, _locations.c.id)
    ).all()
    journal.touched("location", [row.id for row in sorted(touched)], map_id)


def unknown_layer_errors(layer_ids, found) -> list[str]:
    """The membership operation's rule: every id must be a layer of the map
    (``found``: those that are); a message for each that is not."""
    return [
        f"Not a layer of this map: {layer_id}" for layer_id in layer_ids if layer_id not in found
    ]


def layers_by_id(map_: Map | MapRow, ids: set[str]) -> dict[str, Layer]:
    """The layers of ``map_`` among ``ids``, by id."""
    ids = [value for value in ids if could_be_id(value)]
    if not ids:
        return {}
    layers = db.session.scalars(select(Layer).where(Layer.map_id == map_.id, Layer.id.in_(ids)))
    return {layer.id: layer for layer in layers}


def remove_location(location: Location) -> None:
    """Delete a location (its tag links and memberships go with it)."""
    journal.deleted("location", location.id, location.map_id)
    db.session.execute(delete(_locations).where(_locations.c.pk == location.pk))


def existing_layer_ids(map_: Map | MapRow, ids: set[str]) -> set[str]:
    """Which of ``ids`` are layers of ``map_``."""
    ids = [value for value in ids if could_be_id(value)]
    if not ids:
        return set()
    return set(
        db.session.connection().scalars(_LAYER_IDS_IN_MAP, {"map_id": map_.id, "ids": ids})
    )


def categories_and_tags(map_: Map | MapRow, category_ids: set[str], tag_ids: set[str]):
    """Which of ``category_ids`` are categories of ``map_``, and which of
    ``tag_ids`` its tags: two sets, read in one statement.

    A single create names a category and tags more often than not; one
    statement, not one per kind, is a round trip less while the map's lock
    is held.
    """
    named = {
        "category_ids": [value for value in category_ids if could_be_id(value)],
        "tag_ids": [value for value in tag_ids if could_be_id(value)],
    }
    found = {"category": set(), "tag": set()}
    if any(named.values()):
        rows = db.session.connection().execute(_CATEGORY_AND_TAG_IDS, {"map_id": map_.id, **named})
        for kind, found_id in rows:
            found[kind].add(found_id)
    return found["category"], found["tag"]
