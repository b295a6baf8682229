"""Per-zoom cell counts of each map's locations, kept in step by triggers.

A clusters answer (``services.clusters``) groups a viewport's locations
by cells of 64 x 64 pixels of the web map (EPSG:3857, tiles of 256 pixels):
at zoom ``z`` the world is ``2 ** (z + 2)`` cells wide and high. Counting
the locations of a viewport at each request would cost as much as the map
is dense; ``location_cells`` holds, for each map and each of ``LEVELS``,
every non-empty cell's count, the sums of its locations' ``lat`` and
``lng`` (for their mean) and their box (min and max of each), so an answer
reads about as many rows as its viewport has cells, whatever the map holds.

Only even zooms up to 16 are kept: an odd zoom reads the cells of the next
even one, four to a cell, and a zoom past 16 shows a box small enough to
group its locations themselves. Each location then costs eight rows, not
twenty-three, and a million-location map some 2.5 million rows.

The cell of a location is computed in SQL by ``cell_x``/``cell_y`` (both
databases call the same C library for ``ln``, ``tan`` and ``cos``), at
level 16; a coarser level's cell is that one shifted right, which is exact
(a product by a power of two is exact in floating point), so every level
and every query put a location in the same cell.

Triggers on ``locations`` keep the table exact in the writer's own
transaction: on INSERT they add each new location to its cells, on DELETE
they take it away and, where it held a box's edge, compute that box again
(at level 16 from the cell's remaining locations, above from the level
below: sixteen rows), on an UPDATE that moves a location both. PostgreSQL
runs them once per statement over its transition tables (a bulk insert of
a million rows is then one grouped upsert, not a million), SQLite once per
row. Writers to one map are already serialized (the map's row lock, or
SQLite's single writer), so two writers never update the same cells in
opposite orders. The deletes that cascade from a map are skipped: its
cells go with it (``ON DELETE CASCADE``).

``create_all`` makes the triggers after the tables (``_after_create``) each
time it runs, so they are made only where missing; the migration that added
the table makes them and fills the table from the rows there (``fill_cells``).
"""

import math

from sqlalchemy import event, text

from ..extensions import db

#: The zooms whose cells are kept, and the deepest of them.
LEVELS = (2, 4, 6, 8, 10, 12, 14, 16)
DEEPEST = LEVELS[-1]
#: Tiles of 256 pixels, cells of 64: 4 x 4 cells a tile, 2 ** (zoom + 2) cells a side.
CELL_BITS_OVER_ZOOM = 2
CELL_PIXELS = 64
#: Web mercator's latitude limit, as the contract clamps it.
MAX_LAT = 85.05112878
# Just below the limit (85.0511287798...): at or past this the cell is the
# first or the last row, whatever the rounding of ln(tan + sec) there.
_EDGE_LAT = 85.05112877

TABLE = "location_cells"
_AGGREGATES = ("count", "sum_lat", "sum_lng", "min_lat", "max_lat", "min_lng", "max_lng")


def cells_a_side(zoom: int) -> int:
    return 1 << (zoom + CELL_BITS_OVER_ZOOM)


def cell_x_sql(lng: str, zoom: int) -> str:
    """The SQL of the cell column at ``zoom`` of the longitude ``lng`` (an SQL expression)."""
    n = cells_a_side(zoom)
    return f"(CASE WHEN {lng} >= 180 THEN {n - 1} ELSE CAST(floor(({lng} + 180.0) / 360.0 * {n}) AS INTEGER) END)"


def cell_y_sql(lat: str, zoom: int) -> str:
    """The SQL of the cell row at ``zoom`` of the latitude ``lat`` (row 0 is the north)."""
    n = cells_a_side(zoom)
    # A latitude below 1e-300 is the equator's row anyway; PostgreSQL refuses
    # to round a product to zero ("value out of range: underflow").
    phi = f"((CASE WHEN abs({lat}) < 1e-300 THEN 0.0 ELSE {lat} END) * pi() / 180.0)"
    mercator = f"(1.0 - ln(tan({phi}) + 1.0 / cos({phi})) / pi()) / 2.0"
    return (
        f"(CASE WHEN {lat} >= {_EDGE_LAT} THEN 0 WHEN {lat} <= -{_EDGE_LAT} THEN {n - 1}"
        f" ELSE CAST(floor({mercator} * {n}) AS INTEGER) END)"
    )


def cell_of(lat: float, lng: float, zoom: int) -> tuple[int, int]:
    """``(x, y)``: the cell at ``zoom`` of a point, as ``cell_x_sql`` and ``cell_y_sql`` compute it."""
    n = cells_a_side(zoom)
    x = n - 1 if lng >= 180 else math.floor((lng + 180.0) / 360.0 * n)
    if lat >= _EDGE_LAT:
        return x, 0
    if lat <= -_EDGE_LAT:
        return x, n - 1
    phi = lat * math.pi / 180.0
    return x, math.floor((1.0 - math.log(math.tan(phi) + 1.0 / math.cos(phi)) / math.pi) / 2.0 * n)


class _Dialect:
    """What differs between the two databases' SQL here."""

    def __init__(self, name: str):
        self.least, self.greatest = ("LEAST", "GREATEST") if name == "postgresql" else ("min", "max")


def _levels() -> str:
    return " UNION ALL ".join(f"SELECT {level} AS level" for level in LEVELS)


def _grouped(source: str, levels: str | None = None) -> str:
    """The cells of the locations of ``source`` (rows of map_id, lat, lng)
    at each of ``levels`` (an SQL relation of ``level``; all by default),
    with their aggregates."""
    shift = f"({DEEPEST} - l.level)"
    return (
        f"SELECT s.map_id AS map_id, l.level AS level, s.cx >> {shift} AS x, s.cy >> {shift} AS y,"  # noqa: S608 (constants)
        " count(*) AS count, sum(s.lat) AS sum_lat, sum(s.lng) AS sum_lng,"
        " min(s.lat) AS min_lat, max(s.lat) AS max_lat, min(s.lng) AS min_lng, max(s.lng) AS max_lng"
        f" FROM (SELECT map_id, lat, lng, {cell_x_sql('lng', DEEPEST)} AS cx,"
        f" {cell_y_sql('lat', DEEPEST)} AS cy FROM {source} AS located) AS s"
        f" CROSS JOIN ({levels or _levels()}) AS l"
        f" GROUP BY s.map_id, l.level, s.cx >> {shift}, s.cy >> {shift}"
    )


def add_sql(source: str, dialect: _Dialect) -> str:
    """Add the locations of ``source`` to their cells."""
    t = TABLE
    return (
        f"INSERT INTO {t} (map_id, level, x, y, {', '.join(_AGGREGATES)})"  # noqa: S608 (constants)
        f" SELECT * FROM ({_grouped(source)}) AS added WHERE true"
        " ON CONFLICT (map_id, level, y, x) DO UPDATE SET"
        f" count = {t}.count + excluded.count,"
        f" sum_lat = {t}.sum_lat + excluded.sum_lat, sum_lng = {t}.sum_lng + excluded.sum_lng,"
        f" min_lat = {dialect.least}({t}.min_lat, excluded.min_lat),"
        f" max_lat = {dialect.greatest}({t}.max_lat, excluded.max_lat),"
        f" min_lng = {dialect.least}({t}.min_lng, excluded.min_lng),"
        f" max_lng = {dialect.greatest}({t}.max_lng, excluded.max_lng)"
    )


def _same_cell(alias: str) -> str:
    t = TABLE
    return (
        f"{t}.map_id = {alias}.map_id AND {t}.level = {alias}.level"
        f" AND {t}.y = {alias}.y AND {t}.x = {alias}.x"
    )


def remove_sql(source: str) -> list[str]:
    """Take the locations of ``source`` away from their cells: the statements, in order."""
    t = TABLE
    statements = [
        f"UPDATE {t} SET count = {t}.count - g.count,"  # noqa: S608 (constants)
        f" sum_lat = {t}.sum_lat - g.sum_lat, sum_lng = {t}.sum_lng - g.sum_lng"
        f" FROM ({_grouped(source)}) AS g WHERE {_same_cell('g')}",
        f"DELETE FROM {t} WHERE count <= 0 AND (map_id, level, y, x) IN"  # noqa: S608 (constants)
        f" (SELECT map_id, level, y, x FROM ({_grouped(source)}) AS g)",
    ]
    # The boxes whose edge a removed location held, the deepest level first:
    # each level's box is made from the one below it.
    for level in reversed(LEVELS):
        statements.append(
            f"UPDATE {t} SET (min_lat, max_lat, min_lng, max_lng) = ({_box_of_parts(level)})"  # noqa: S608
            f" FROM ({_grouped(source, f'SELECT {level} AS level')}) AS g"
            f" WHERE {_same_cell('g')} AND (g.min_lat <= {t}.min_lat OR g.max_lat >= {t}.max_lat"
            f" OR g.min_lng <= {t}.min_lng OR g.max_lng >= {t}.max_lng)"
        )
    return statements


def _box_of_parts(level: int) -> str:
    """The box of cell ``location_cells`` at ``level`` from what it holds:
    at the deepest level its locations (inside its old box), above it the
    sixteen cells of the level below."""
    t = TABLE
    if level == DEEPEST:
        return (
            "SELECT min(c.lat), max(c.lat), min(c.lng), max(c.lng) FROM locations AS c"  # noqa: S608
            f" WHERE c.map_id = {t}.map_id AND c.lat BETWEEN {t}.min_lat AND {t}.max_lat"
            f" AND c.lng BETWEEN {t}.min_lng AND {t}.max_lng"
            f" AND {cell_x_sql('c.lng', level)} = {t}.x AND {cell_y_sql('c.lat', level)} = {t}.y"
        )
    rows = ", ".join(f"{t}.y * 4 + {offset}" for offset in range(4))
    return (
        "SELECT min(c.min_lat), max(c.max_lat), min(c.min_lng), max(c.max_lng)"  # noqa: S608
        f" FROM {t} AS c WHERE c.map_id = {t}.map_id AND c.level = {level + 2}"
        f" AND c.y IN ({rows}) AND c.x BETWEEN {t}.x * 4 AND {t}.x * 4 + 3"
    )


def _sqlite_triggers() -> list[str]:
    dialect = _Dialect("sqlite")
    new = "(SELECT new.map_id AS map_id, new.lat AS lat, new.lng AS lng)"
    old = "(SELECT old.map_id AS map_id, old.lat AS lat, old.lng AS lng)"
    removed = "; ".join(remove_sql(old))
    return [
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_insert AFTER INSERT ON locations BEGIN {add_sql(new, dialect)}; END",
        # A map's delete cascades to its locations after its own row is gone:
        # its cells go with it.
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_delete AFTER DELETE ON locations"  # noqa: S608 (constants)
        f" WHEN EXISTS (SELECT 1 FROM maps WHERE maps.id = old.map_id) BEGIN {removed}; END",
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_update AFTER UPDATE OF lat, lng ON locations"
        " WHEN old.lat IS NOT new.lat OR old.lng IS NOT new.lng"
        f" BEGIN {removed}; {add_sql(new, dialect)}; END",
    ]


def _postgresql_triggers() -> list[str]:
    dialect = _Dialect("postgresql")
    # Rows of a map being deleted are left out: its cells go with it.
    gone = (
        "(SELECT o.map_id, o.lat, o.lng FROM old_rows AS o"
        " WHERE EXISTS (SELECT 1 FROM maps WHERE maps.id = o.map_id))"
    )
    moved = (
        "(SELECT {side}.map_id, {side}.lat, {side}.lng FROM old_rows AS o"
        " JOIN new_rows AS n ON n.pk = o.pk WHERE o.lat <> n.lat OR o.lng <> n.lng)"
    )

    def function(name: str, body: list[str]) -> str:
        statements = "".join(f"{statement};\n" for statement in body)
        return (
            f"CREATE OR REPLACE FUNCTION {TABLE}_{name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            f"BEGIN\n{statements}RETURN NULL;\nEND $$"
        )

    def trigger(name: str, event_: str, tables: str) -> list[str]:
        return [
            f"DROP TRIGGER IF EXISTS {TABLE}_{name} ON locations",
            f"CREATE TRIGGER {TABLE}_{name} AFTER {event_} ON locations"
            f" REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_{name}()",
        ]

    return [
        function("insert", [add_sql("new_rows", dialect)]),
        function("delete", remove_sql(gone)),
        function(
            "update",
            [*remove_sql(moved.format(side="o")), add_sql(moved.format(side="n"), dialect)],
        ),
        *trigger("insert", "INSERT", "NEW TABLE AS new_rows"),
        *trigger("delete", "DELETE", "OLD TABLE AS old_rows"),
        *trigger("update", "UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    ]


def trigger_ddl(dialect_name: str) -> list[str]:
    """The statements that make the triggers on ``dialect_name``."""
    return _postgresql_triggers() if dialect_name == "postgresql" else _sqlite_triggers()


def create_cell_triggers(connection) -> None:
    for statement in trigger_ddl(connection.dialect.name):
        connection.execute(text(statement))


def fill_cells(connection, map_id: str | None = None) -> None:
    """Count the cells of the locations there (of map ``map_id``, or of
    every map) again from the start: for the migration that made the table,
    and for a load that wrote its rows with the triggers off."""
    where, params = ("WHERE map_id = :map_id", {"map_id": map_id}) if map_id else ("", {})
    connection.execute(text(f"DELETE FROM {TABLE} {where}"), params)  # noqa: S608 (constants)
    source = f"(SELECT map_id, lat, lng FROM locations {where})"  # noqa: S608 (constants)
    columns = ", ".join(_AGGREGATES)
    connection.execute(
        text(f"INSERT INTO {TABLE} (map_id, level, x, y, {columns}) {_grouped(source)}"),  # noqa: S608
        params,
    )


@event.listens_for(db.metadata, "after_create")
def _after_create(_metadata, connection, **_kwargs) -> None:
    create_cell_triggers(connection)
