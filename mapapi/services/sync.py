"""Keeping a map in step with another system: upsert by ``externalId``, bulk delete.

Both cost a fixed number of statements per request, whatever the number of
items: each kind of read and each kind of write is one statement for the
whole request (an ``IN`` list, or an executemany), never one per item.

Every location they create, update or delete is noted in the journal
(``journal.py``), which records its event when the request commits; an
item that changes nothing is not, so a rerun of the same input records
nothing.
"""

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from sqlalchemy import ARRAY, bindparam, delete, func, insert, select, update

from ..contract.schemas import LocationSchema
from ..contract.serialization import compile_dumper
from ..extensions import db
from ..storage.models import (
    Location,
    LocationTag,
    Map,
    could_be_id,
    folded_copies,
    location_layers,
)
from ..timeutil import utcnow
from . import journal
from .changes import same_value
from .location_reads import LAYER_IDS, TAG_LINKS, read_locations, tag_ids
from .locations import References, create_locations, repeated_external_ids, tag_links

_locations = Location.__table__
_links = LocationTag.__table__

#: What an update may change, beside the tags and the layers: every column
#: written by an upsert's UPDATE, so that its rows have the same keys.
_COLUMNS = ("name", "lat", "lng", "description", "address", "category_id", "properties")



def _one_of(dialect: str, column, name: str):
    """``column`` is one of the list bound as ``name`` (up to 1000 values).

    On PostgreSQL the list goes as one array, unnested in a subquery, which
    the planner hashes: a list of 1000 parameters, ``IN ($1, ..., $1000)``, is
    compared value by value with every row of a sequential scan, and the
    planner picks one for a map loaded moments ago, before ANALYZE has seen
    its rows. The 51st upsert of 1000 into a new map took 1.7 s, the 54th
    2.6 s, then 0.06 s once autovacuum had analyzed the table; unnested, each
    stays near the first's (measured in-process, docs/decisions.md).
    """
    if dialect == "postgresql":
        return column.in_(select(func.unnest(bindparam(name, type_=ARRAY(column.type)))))
    return column.in_(bindparam(name, expanding=True))


def _by_dialect(build) -> dict:
    """``build(one_of)`` for each database, ``one_of(column, name)`` being ``_one_of``'s."""
    return {dialect: build(partial(_one_of, dialect)) for dialect in ("sqlite", "postgresql")}


_CURRENT = _by_dialect(
    lambda one_of: select(
        _locations.c.id,
        TAG_LINKS.label("tag_links"),
        LAYER_IDS.label("layer_ids"),
        _locations.c.external_id,
        *(_locations.c[name] for name in _COLUMNS),
    ).where(
        _locations.c.map_id == bindparam("map_id"),
        one_of(_locations.c.external_id, "external_ids"),
    )
)
_UPDATE = update(_locations).where(_locations.c.id == bindparam("location_id"))
_DELETE_TAG_LINKS = _by_dialect(
    lambda one_of: delete(_links).where(one_of(_links.c.location_id, "location_ids"))
)
_INSERT_TAG_LINKS = insert(_links)
_DELETE_MEMBERSHIPS = _by_dialect(
    lambda one_of: delete(location_layers).where(
        one_of(location_layers.c.location_id, "location_ids")
    )
)
_INSERT_MEMBERSHIPS = insert(location_layers)
_dump_location = compile_dumper(LocationSchema())
#: The locations of a map that a bulk delete's names name, by the kind of name.
_NAMED = {
    by: _by_dialect(
        lambda one_of, column=column: select(column, _locations.c.id).where(
            _locations.c.map_id == bindparam("map_id"), one_of(column, "names")
        )
    )
    for by, column in (("ids", _locations.c.id), ("external_ids", _locations.c.external_id))
}
_DELETE = _by_dialect(
    lambda one_of: delete(_locations).where(
        _locations.c.map_id == bindparam("map_id"), one_of(_locations.c.id, "location_ids")
    )
)


class UpsertItem(NamedTuple):
    """One upsert item, read both ways, since only the database says which
    applies: ``fields``, the fields it gives (as PUT reads them), always;
    ``new``, the whole location it would create (as create reads it, with
    defaults), or None when it cannot create one, for ``new_errors``."""

    fields: dict
    new: dict | None
    new_errors: dict | None = None


@dataclass
class UpsertOutcome:
    locations: list[dict]
    created: int = 0
    updated: int = 0
    unchanged: int = 0


@dataclass
class _Update:
    """A matched item: the location as it is (``current``) and what the
    item gives (``fields``)."""

    current: dict
    fields: dict

    def columns(self) -> dict:
        """The columns this item changes, by name."""
        return {
            name: value
            for name, value in self.fields.items()
            if name in _COLUMNS and not same_value(self.current[name], value)
        }

    def new_tag_ids(self) -> list[str] | None:
        tag_ids = self.fields.get("tag_ids")
        return None if tag_ids is None or tag_ids == self.current["tag_ids"] else tag_ids

    def new_layer_ids(self) -> list[str] | None:
        layer_ids = self.fields.get("layer_ids")
        if layer_ids is None or set(layer_ids) == self.current["layer_ids"]:
            return None
        return layer_ids


class UpsertPlan:
    """An upsert checked against the map: which items create, which update,
    and the field errors (by item index) that only the database can tell.
    ``apply`` writes it, when there are no errors."""

    def __init__(self, map_: Map, items: dict[int, UpsertItem], nest: str | None = None):
        """``nest``: the key under which an item keeps its fields, in the
        errors found here (``"properties"`` for a GeoJSON Feature)."""
        self.map = map_
        self.errors = {
            index: _nested(item_errors, nest)
            for index, item_errors in repeated_external_ids(
                {i: item.fields for i, item in items.items()}
            ).items()
        }
        current = _current_locations(map_, [item.fields["external_id"] for item in items.values()])
        #: index -> the data a create takes, or an _Update, in input order.
        self.steps: dict[int, dict | _Update] = {}
        for index, item in items.items():
            if index in self.errors:
                continue
            existing = current.get(item.fields["external_id"])
            if existing is not None:
                self.steps[index] = _Update(existing, item.fields)
            elif item.new is None:
                self.errors[index] = item.new_errors
            else:
                self.steps[index] = item.new
        given = [step.fields if isinstance(step, _Update) else step for step in self.steps.values()]
        self.references = References(map_, given)
        indexes = list(self.steps)
        for position, item_errors in self.references.errors(given).items():
            self.errors[indexes[position]] = _nested(item_errors, nest)

    def apply(self) -> UpsertOutcome:
        creates = {i: step for i, step in self.steps.items() if not isinstance(step, _Update)}
        updates = {i: step for i, step in self.steps.items() if isinstance(step, _Update)}
        created = create_locations(self.map, list(creates.values()), self.references)
        changed = _write_updates(list(updates.values()))
        # The created are shown as the bulk shows them, from what was
        # inserted; the others as they are now, read back in one go.
        shown = dict(zip(creates, map(_dump_location, created), strict=True))
        matched = read_locations(self.map.id, [step.current["id"] for step in updates.values()])
        shown.update(zip(updates, matched, strict=True))
        outcome = UpsertOutcome([shown[index] for index in sorted(shown)])
        for index, location in zip(sorted(shown), outcome.locations, strict=True):
            if index in creates:  # noted by create_locations
                outcome.created += 1
            elif location["id"] in changed:
                outcome.updated += 1
                journal.updated_body("location", location, self.map.id)
            else:
                outcome.unchanged += 1
        return outcome


def _nested(errors: dict, key: str | None) -> dict:
    return {key: errors} if key else errors


def _current_locations(map_: Map, external_ids: list[str]) -> dict[str, dict]:
    """The map's locations that have one of ``external_ids``, by it: their
    columns, tag ids (in order) and layer ids (a set). One statement."""
    if not external_ids:
        return {}
    connection = db.session.connection()
    rows = connection.execute(
        _CURRENT[connection.dialect.name], {"map_id": map_.id, "external_ids": external_ids}
    )
    current = {}
    for row in rows.mappings():
        location = dict(row)
        location["tag_ids"] = tag_ids(location.pop("tag_links"))
        layer_ids = location.pop("layer_ids")
        location["layer_ids"] = set(layer_ids.split(",")) if layer_ids else set()
        current[location["external_id"]] = location
    return current


def _write_updates(updates: list[_Update]) -> set[str]:
    """Write what the matched items change; the ids of the locations that
    changed (the others keep their ``updatedAt``)."""
    now = utcnow()
    rows, tags_replaced, links, layers_replaced, memberships = [], [], [], [], []
    for step in updates:
        location_id = step.current["id"]
        columns, tag_ids, layer_ids = step.columns(), step.new_tag_ids(), step.new_layer_ids()
        if tag_ids is not None:
            tags_replaced.append(location_id)
            links.extend(tag_links(location_id, tag_ids))
        if layer_ids is not None:
            layers_replaced.append(location_id)
            memberships.extend({"location_id": location_id, "layer_id": i} for i in layer_ids)
        if columns or tag_ids is not None or layer_ids is not None:
            values = {name: columns.get(name, step.current[name]) for name in _COLUMNS}
            rows.append(
                {**values, **folded_copies(values), "updated_at": now, "location_id": location_id}
            )
    connection = db.session.connection()
    dialect = connection.dialect.name
    if rows:
        connection.execute(_UPDATE, rows)
    if tags_replaced:
        connection.execute(_DELETE_TAG_LINKS[dialect], {"location_ids": tags_replaced})
    if links:
        connection.execute(_INSERT_TAG_LINKS, links)
    if layers_replaced:
        connection.execute(_DELETE_MEMBERSHIPS[dialect], {"location_ids": layers_replaced})
    if memberships:
        connection.execute(_INSERT_MEMBERSHIPS, memberships)
    return {row["location_id"] for row in rows}


def delete_locations(map_: Map, by: str, names: list[str]) -> list[str]:
    """Delete the locations of ``map_`` that ``names`` name, ``by`` ``"ids"``
    or ``"external_ids"``: each once, in the order first given; a name that
    matches nothing is skipped; the ids deleted. Two statements."""
    names = list(dict.fromkeys(names))
    if by == "ids":
        names = [name for name in names if could_be_id(name)]
    found = {}
    connection = db.session.connection()
    dialect = connection.dialect.name
    if names:
        rows = connection.execute(_NAMED[by][dialect], {"map_id": map_.id, "names": names})
        found = {name: location_id for name, location_id in rows}
    deleted = [found[name] for name in names if name in found]
    if deleted:
        connection.execute(_DELETE[dialect], {"map_id": map_.id, "location_ids": deleted})
    for location_id in deleted:
        journal.deleted("location", location_id, map_.id)
    return deleted
