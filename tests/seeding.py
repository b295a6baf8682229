"""Big maps made fast: one INSERT ... SELECT of ``count`` locations, not the API.

The locations are spread as a real map's are: nine in ten around one of
``CITIES`` (a spread of a few kilometres to a few tens, denser at the
centre), one in ten anywhere between 60° S and 70° N, each place a pure function of its number,
so a map of 10,000 and one of 1,000,000 have the same distribution. Every
trigger of ``locations`` runs (the cell counts, SQLite's search table).
Used by the browser tests and the benchmarks.
"""

from datetime import datetime

from sqlalchemy import text

from mapapi.storage.cells import TABLE, create_cell_triggers, fill_cells

#: (lat, lng, spread in degrees)
CITIES = (
    (48.8566, 2.3522, 0.08), (51.5074, -0.1278, 0.1), (40.4168, -3.7038, 0.06),
    (52.52, 13.405, 0.07), (41.9028, 12.4964, 0.05), (59.3293, 18.0686, 0.05),
    (40.7128, -74.006, 0.12), (34.0522, -118.2437, 0.2), (41.8781, -87.6298, 0.1),
    (19.4326, -99.1332, 0.12), (-23.5505, -46.6333, 0.15), (-34.6037, -58.3816, 0.1),
    (35.6762, 139.6503, 0.15), (37.5665, 126.978, 0.1), (31.2304, 121.4737, 0.15),
    (28.6139, 77.209, 0.12), (1.3521, 103.8198, 0.05), (-33.8688, 151.2093, 0.1),
    (-36.8485, 174.7633, 0.06), (-18.1416, 178.4419, 0.03), (30.0444, 31.2357, 0.08),
    (-1.2921, 36.8219, 0.06), (6.5244, 3.3792, 0.08), (55.7558, 37.6173, 0.1),
)  # fmt: skip

_SIDE = len(CITIES)


def _hash(seed: str) -> str:
    """A number in [0, 1) from ``seed`` (an SQL expression): the same on both databases."""
    return f"(abs(sin({seed}) * 43758.5453) - floor(abs(sin({seed}) * 43758.5453)))"


def _spread_select(dialect: str) -> str:
    numbers = (
        "SELECT generate_series(CAST(:first AS INTEGER), CAST(:last AS INTEGER)) AS i"
        if dialect == "postgresql"
        else "WITH RECURSIVE n(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM n WHERE i < :last)"
        " SELECT i FROM n"
    )
    cities = " UNION ALL ".join(
        f"SELECT {index} AS c, {lat} AS clat, {lng} AS clng, {spread} AS spread"
        for index, (lat, lng, spread) in enumerate(CITIES)
    )
    real = "CAST(i AS DOUBLE PRECISION)" if dialect == "postgresql" else "CAST(i AS REAL)"
    u = [
        _hash(f"({real} * {factor}.9898 + {offset})")
        for factor, offset in ((12, 1), (78, 2), (39, 3), (93, 4), (17, 5))
    ]
    noise = f"{u[0]} < 0.1"
    # Around a city: the sum of two uniform numbers, a triangle, in each direction.
    lat = f"CASE WHEN {noise} THEN {u[1]} * 130 - 60 ELSE clat + ({u[1]} + {u[2]} - 1) * spread END"
    lng = f"CASE WHEN {noise} THEN {u[3]} * 360 - 180 ELSE clng + ({u[3]} + {u[4]} - 1) * spread * 1.5 END"
    ident = (
        "substr(:map_id, 1, 8) || lpad(CAST(i AS TEXT), 14, '0')"
        if dialect == "postgresql"
        else "substr(:map_id, 1, 8) || printf('%014d', i)"
    )
    properties = "'{\"n\": ' || i || '}'"
    if dialect == "postgresql":
        properties = f"CAST({properties} AS JSON)"
    return (
        f"SELECT {ident}, :map_id, 'Place ' || i, {lat}, {lng}, '', '', "  # noqa: S608 (constants)
        f"{properties}, 'place ' || i, '', '', :now, :now"
        f" FROM ({numbers}) AS numbers JOIN ({cities}) AS cities ON cities.c = i % {_SIDE}"
    )


def seed_spread(
    connection, map_id: str, count: int, first: int = 1, *, counted_after: bool = False
) -> None:
    """Add locations ``first`` .. ``first + count - 1`` to map ``map_id``, in one statement.

    ``counted_after``: with the cell triggers off, the map's cells counted
    again at the end (a million rows load in a fraction of the time on
    SQLite, whose triggers run once a row); in the same transaction.
    """
    if counted_after:
        _drop_cell_triggers(connection)
    statement = (
        "INSERT INTO locations (id, map_id, name, lat, lng, description, address, properties,"
        " name_folded, description_folded, address_folded, created_at, updated_at) "
        + _spread_select(connection.dialect.name)
    )
    connection.execute(
        text(statement),
        {"map_id": map_id, "first": first, "last": first + count - 1, "now": datetime(2026, 12, 1)},
    )
    if counted_after:
        fill_cells(connection, map_id)
        create_cell_triggers(connection)


def _drop_cell_triggers(connection) -> None:
    on = " ON locations" if connection.dialect.name == "postgresql" else ""
    for name in ("insert", "update", "delete"):
        connection.execute(text(f"DROP TRIGGER IF EXISTS {TABLE}_{name}{on}"))
