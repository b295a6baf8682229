"""The location list's filters and sorts as SQL, each served by an index.

A box reads the (map_id, lat, lng) index, ``updatedSince`` and the
``updatedAt`` sort (map_id, updated_at, pk), the ``name`` sort (map_id,
name_folded, pk); a tag, a layer or a category is looked up by its own
index on the link table or the category column. ``q`` compares the stored
lower-cased copies (``models.fold``), so that both databases answer as
Python's ``str.lower()`` does; the search indexes find the rows to compare
(``storage.search_indexes``).
"""

from dataclasses import dataclass
from operator import itemgetter

from sqlalchemy import Boolean, and_, false, or_, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from ..contract.location_query import NO_LAYER
from ..storage.models import (
    FOLDED_COLUMNS,
    Location,
    LocationTag,
    could_be_id,
    fold,
    location_layers,
)
from ..storage.search_indexes import found_by_search_index, has_trigram

_locations, _links = Location.__table__, LocationTag.__table__


@dataclass(frozen=True)
class Selection:
    """Which of a map's locations (``where``, besides the map) and in what order.

    The order is ``key`` (None: creation order alone), ascending or not,
    then creation order, which ``-createdAt`` alone reverses.
    """

    where: tuple
    key: object
    descending: bool
    #: Whether a filter has an index of its own (a category, tag or layer;
    #: q's search table on SQLite), which finds its few locations sooner
    #: than the map's index finds them among all.
    own_index: bool = False

    @property
    def is_plain(self) -> bool:
        """Every location of the map, in creation order: the list's fast path."""
        return not self.where and self.key is None and not self.descending

    def in_map(self, map_id: str):
        """The condition ``map_id`` of all the selected locations.

        SQLite, which has no statistics unless someone runs ANALYZE, would
        otherwise walk the whole map's index and test each location against
        a tag's few: 85 ms instead of 0.1 on 100,000 locations. PostgreSQL
        has statistics and chooses by itself.
        """
        condition = _locations.c.map_id == map_id
        return _likely(condition) if self.own_index else condition

    def order_by(self) -> tuple:
        pk = _locations.c.pk
        if self.key is None:
            return (pk.desc() if self.descending else pk,)
        return (self.key.desc() if self.descending else self.key, pk)

    def sort_columns(self) -> tuple:
        """The columns ``in_order`` sorts rows by: the pk, then the sort key if any."""
        pk = _locations.c.pk
        return (pk,) if self.key is None else (pk, self.key)

    def in_order(self, rows: list) -> list:
        """``rows`` of ``sort_columns`` in this order, as ``order_by`` sorts
        them in the database: texts by code point there (collation "C" on
        PostgreSQL, BINARY on SQLite) as in Python."""
        by_pk = sorted(rows, key=itemgetter(0), reverse=self.key is None and self.descending)
        if self.key is None:
            return by_pk
        # Stable, even reversed: ties on the key stay in ascending pk order.
        return sorted(by_pk, key=itemgetter(1), reverse=self.descending)

    def after(self, key_value, pk_value):
        """The locations after the one whose sort key is ``key_value`` and pk
        ``pk_value``, in this order: a keyset page's condition."""
        pk = _locations.c.pk
        if self.key is None:
            return pk < pk_value if self.descending else pk > pk_value
        # The bound on the key alone lets the database seek in the sort's
        # index; ties on it then continue by pk.
        if self.descending:
            return and_(self.key <= key_value, or_(self.key < key_value, pk > pk_value))
        return and_(self.key >= key_value, or_(self.key > key_value, pk > pk_value))


_SORT_KEYS = {
    "createdAt": None,
    "updatedAt": _locations.c.updated_at,
    "name": _locations.c.name_folded,
}


def selection(query: dict, *, search_index: bool = True) -> Selection:
    """The Selection of a loaded LocationFilterSchema query.

    ``search_index=False`` answers ``q`` by testing the map's rows without
    the search table: for a walk of the whole map in keyset pages (the
    export), which reads each row once that way, where the search table
    would find every match again for each page.
    """
    sort = query.get("sort", "createdAt")
    searched = search_index and "q" in query and has_trigram(fold(query["q"]))
    return Selection(
        where=tuple(_conditions(query, searched)),
        key=_SORT_KEYS[sort.removeprefix("-")],
        descending=sort.startswith("-"),
        own_index=searched
        or any(name in query for name in ("category_id", "tag_ids"))
        # ``none`` alone has no index of its own: the map's finds its locations.
        or any(layer_id != NO_LAYER for layer_id in query.get("layer_ids", ())),
    )


def _conditions(query: dict, searched: bool):
    c = _locations.c
    if "bbox" in query:
        west, south, east, north = query["bbox"]
        yield c.lat.between(south, north)
        if west <= east:
            yield c.lng.between(west, east)
        else:  # across the antimeridian
            yield or_(c.lng >= west, c.lng <= east)
    if "q" in query:
        folded = fold(query["q"])
        pattern = "%" + _escape_like(folded) + "%"
        exact = or_(*(c[column].like(pattern, escape="\\") for column in FOLDED_COLUMNS))
        yield found_by_search_index(exact, folded) if searched else exact
    if "category_id" in query:
        yield _id_matches(c.category_id, query["category_id"])
    for tag_id in dict.fromkeys(query.get("tag_ids", ())):
        yield _linked(_links, _links.c.tag_id, tag_id)
    if "layer_ids" in query:
        yield _on_layers(query["layer_ids"])
    if "updated_since" in query:
        yield c.updated_at >= query["updated_since"]
    if "external_ids" in query:
        yield c.external_id.in_(query["external_ids"])


def _id_matches(column, value: str):
    # A value that cannot be an id matches nothing, without sending it to
    # the database (which may not even take it: U+0000).
    return column == value if could_be_id(value) else false()


def _linked(table, column, value: str):
    """Locations that ``table`` links to ``value`` through ``column``."""
    return _locations.c.id.in_(select(table.c.location_id).where(_id_matches(column, value)))


def _on_layers(layer_ids: list[str]):
    """Locations on any of ``layer_ids``; ``none`` among them: also those on no layer."""
    layers = location_layers.c.layer_id
    named = [layer_id for layer_id in dict.fromkeys(layer_ids) if could_be_id(layer_id)]
    either = []
    if named:
        linked = select(location_layers.c.location_id).where(layers.in_(named))
        either.append(_locations.c.id.in_(linked))
    if NO_LAYER in layer_ids:
        on_any = select(location_layers.c.location_id).where(
            location_layers.c.location_id == _locations.c.id
        )
        either.append(~on_any.exists())
    return or_(*either) if either else false()


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class _likely(FunctionElement):
    """A condition the planner should expect to hold for most rows, so that
    it looks for a more selective index: SQLite's ``likely()``; elsewhere
    the condition itself."""

    type = Boolean()
    inherit_cache = True
    name = "likely"


@compiles(_likely)
def _plain(element, compiler, **kw):
    return compiler.process(element.clauses, **kw)


@compiles(_likely, "sqlite")
def _sqlite_likely(element, compiler, **kw):
    return f"likely({compiler.process(element.clauses, **kw)})"
