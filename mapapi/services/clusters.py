"""The locations of a viewport, grouped by 64-pixel cells where they are dense.

With no filter but the box, an answer is read from the cell counts
(``storage.cells``), not from the locations: the viewport's cells at the
zoom's kept level, each taken whole when its box lies inside the asked box
and left out when it lies outside. A cell the box's edge cuts through is
replaced by its sixteen cells of the next level, and so on down to level
16, where only the locations of the cells still cut are read (through the
cell's own small box). What is read grows with the viewport's cells and
with how many non-empty cells its edges cross, not with the map.

Past zoom 16 the box is a few streets wide: its locations are grouped
themselves. So are those of a request with any other filter (``q``, a
category, tags, layers, ``externalId``, ``updatedSince``), which the cell
counts cannot answer: the matching locations of the box are grouped by
cell in SQL, at a cost that grows with the matches, as a filtered list's.
"""

from sqlalchemy import bindparam, func, literal_column, select, text

from ..contract.cluster_schemas import MAX_ITEMS
from ..extensions import db
from ..http.errors import validation_error
from ..storage.cells import DEEPEST, LEVELS, cell_of, cell_x_sql, cell_y_sql, cells_a_side
from ..storage.models import Location, LocationCell
from .location_filters import selection
from .location_reads import locations_by_pks

_cells, _locations = LocationCell.__table__, Location.__table__
# A cell's sums, as the table and every grouping here give them.
_SUMS = (
    "count", "sum_lat", "sum_lng", "min_lat", "max_lat", "min_lng", "max_lng",
)  # fmt: skip
COUNT, SUM_LAT, SUM_LNG, MIN_LAT, MAX_LAT, MIN_LNG, MAX_LNG, PK = range(8)

_lat, _lng = _locations.c.lat, _locations.c.lng
_LOCATION_SUMS = (
    func.count(), func.sum(_lat), func.sum(_lng),
    func.min(_lat), func.max(_lat), func.min(_lng), func.max(_lng), func.min(_locations.c.pk),
)  # fmt: skip
_CELL_COLUMNS = (_cells.c.x, _cells.c.y, *(_cells.c[name] for name in _SUMS))
_IN_MAP = _cells.c.map_id == bindparam("map_id")

#: The most SELECTs one UNION ALL joins (SQLite takes 500 at most). Each
#: is an index seek; SQLite would not seek for each term of an OR that
#: shares its first condition (the map), but walk the map's whole index.
#: They are written as text: compiling hundreds of SELECT constructs cost
#: more than running them.
_TERMS = 200
_CELL_SELECT = (
    f"SELECT x, y, {', '.join(_SUMS)} FROM location_cells"  # noqa: S608 (constants)
    " WHERE map_id = :map_id AND level = {level} AND y = {y} AND x BETWEEN {first} AND {last}"
)
_CUT_SELECT = (
    "SELECT {x} AS x, {y} AS y, count(*), sum(lat), sum(lng), min(lat), max(lat), min(lng),"  # noqa: S608
    " max(lng), min(pk) FROM locations WHERE map_id = :map_id"
    " AND lat BETWEEN :s{n} AND :n{n} AND lng BETWEEN :w{n} AND :e{n}"
    f" AND {cell_x_sql('lng', DEEPEST)} = {{x}} AND {cell_y_sql('lat', DEEPEST)} = {{y}}"
)
_POINT_SELECT = "SELECT pk FROM locations WHERE map_id = :map_id AND lat = :lat{n} AND lng = :lng{n}"


def viewport_clusters(map_id: str, query: dict) -> dict:
    """``{"clusters", "locations", "total"}`` of map ``map_id`` for a loaded
    ClusterQuerySchema query."""
    zoom, bbox = query["zoom"], query["bbox"]
    check_size(bbox, zoom)
    filters = {name: value for name, value in query.items() if name not in ("bbox", "zoom")}
    chosen = selection(filters)
    west, south, east, north = bbox
    boxes = [bbox] if west <= east else [(west, south, 180.0, north), (-180.0, south, east, north)]
    groups: dict[tuple[int, int], list] = {}
    for box in boxes:
        if chosen.where or zoom > DEEPEST:
            _group_locations(map_id, box, zoom, chosen, groups)
        else:
            _from_cells(map_id, box, zoom, groups)
    return _answer(map_id, groups)


def check_size(bbox: tuple, zoom: int) -> None:
    """A box that holds more than ``MAX_ITEMS`` cells at ``zoom`` could
    answer more items than that: a VALIDATION_ERROR on ``bbox``."""
    west, south, east, north = bbox
    x_west, y_north = cell_of(north, west, zoom)
    x_east, y_south = cell_of(south, east, zoom)
    columns = x_east - x_west + 1 if west <= east else cells_a_side(zoom) - x_west + x_east + 1
    if min(columns, cells_a_side(zoom)) * (y_south - y_north + 1) > MAX_ITEMS:
        raise validation_error(
            "The request is invalid.",
            {
                "bbox": [
                    f"Holds more than {MAX_ITEMS} cells of 64 pixels at this zoom: "
                    "ask for a smaller box or a lower zoom."
                ]
            },
        )


def _add(groups: dict, key: tuple[int, int], sums) -> None:
    """Add ``sums`` (a cell's or a grouping's, pk last if known) to ``groups[key]``."""
    found = groups.get(key)
    if found is None:
        groups[key] = [*sums[:7], sums[PK] if len(sums) > PK else None]
        return
    found[COUNT] += sums[COUNT]
    found[SUM_LAT] += sums[SUM_LAT]
    found[SUM_LNG] += sums[SUM_LNG]
    found[MIN_LAT] = min(found[MIN_LAT], sums[MIN_LAT])
    found[MAX_LAT] = max(found[MAX_LAT], sums[MAX_LAT])
    found[MIN_LNG] = min(found[MIN_LNG], sums[MIN_LNG])
    found[MAX_LNG] = max(found[MAX_LNG], sums[MAX_LNG])
    found[PK] = None  # two or more: a cluster


def _group_locations(map_id: str, box: tuple, zoom: int, chosen, groups: dict) -> None:
    """The locations of ``box`` that ``chosen`` selects, grouped in SQL by their cell at ``zoom``."""
    west, south, east, north = box
    x = literal_column(cell_x_sql("locations.lng", zoom)).label("x")
    y = literal_column(cell_y_sql("locations.lat", zoom)).label("y")
    statement = (
        select(x, y, *_LOCATION_SUMS)
        .where(chosen.in_map(map_id), _lat.between(south, north), _lng.between(west, east))
        .where(*chosen.where)
        .group_by(literal_column("x"), literal_column("y"))
    )
    for cell_x, cell_y, *sums in db.session.connection().execute(statement):
        _add(groups, (cell_x, cell_y), sums)


def _from_cells(map_id: str, box: tuple, zoom: int, groups: dict) -> None:
    """The locations of ``box`` (not across the antimeridian) from the cell counts."""
    connection = db.session.connection()
    level = max(LEVELS[0], zoom + zoom % 2)
    rows = connection.execute(_viewport_cells(box, level), {"map_id": map_id}).all()
    while rows:
        cut = []
        shift = level - zoom
        for x, y, *sums in rows:
            where = _where(sums, box)
            if where == "inside":
                _add(groups, (x >> shift, y >> shift), sums)
            elif where == "cut":
                cut.append((x, y, sums))
        if not cut:
            return
        if level == DEEPEST:
            _add_cut_cells(connection, map_id, box, zoom, cut, groups)
            return
        level += 2
        rows = []
        for statement in _parts(cut, level):
            rows.extend(connection.execute(statement, {"map_id": map_id}).all())


def _where(sums, box: tuple) -> str:
    """Whether the box of a cell's locations lies ``inside`` the asked box,
    ``outside`` it, or is ``cut`` by its edge."""
    west, south, east, north = box
    if sums[MAX_LAT] < south or sums[MIN_LAT] > north or sums[MAX_LNG] < west or sums[MIN_LNG] > east:
        return "outside"
    if sums[MIN_LAT] >= south and sums[MAX_LAT] <= north and sums[MIN_LNG] >= west and sums[MAX_LNG] <= east:
        return "inside"
    return "cut"


def _viewport_cells(box: tuple, level: int):
    """The cells at ``level`` of ``box``, and one more around it (a point
    on a cell's edge may round either way)."""
    west, south, east, north = box
    last = cells_a_side(level) - 1
    x_west, y_north = cell_of(north, west, level)
    x_east, y_south = cell_of(south, east, level)
    rows = list(range(max(0, y_north - 1), min(last, y_south + 1) + 1))
    return select(*_CELL_COLUMNS).where(
        _IN_MAP,
        _cells.c.level == level,
        _cells.c.y.in_(rows),
        _cells.c.x.between(max(0, x_west - 1), min(last, x_east + 1)),
    )


def _parts(cut: list, level: int):
    """Statements reading the cells at ``level`` inside the ``cut`` cells of
    the level above: each row of them a run of columns, so each is an
    index seek."""
    runs: dict[int, list[list[int]]] = {}
    for x, y, _sums in cut:
        for row in range(y * 4, y * 4 + 4):
            runs.setdefault(row, []).append([x * 4, x * 4 + 3])
    seeks = []
    for row, spans in runs.items():
        spans.sort()
        merged = [spans[0]]
        for first, last in spans[1:]:
            if first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        seeks.extend(
            _CELL_SELECT.format(level=level, y=row, first=first, last=last)
            for first, last in merged
        )
    for statement, _params in _unions(seeks, []):
        yield statement


def _unions(selects: list[str], params: list[dict]):
    """``selects`` (with their ``params``, if any) as few statements: UNION
    ALLs of at most ``_TERMS``, each with its parameters."""
    for start in range(0, len(selects), _TERMS):
        joined = " UNION ALL ".join(selects[start : start + _TERMS])
        given = {}
        for extra in params[start : start + _TERMS]:
            given.update(extra)
        yield text(joined), given


def _add_cut_cells(connection, map_id: str, box: tuple, zoom: int, cut: list, groups: dict):
    """The locations inside ``box`` of the deepest-level cells it cuts, read
    through each cell's own box and grouped by cell."""
    west, south, east, north = box
    # One aggregate row for each cell (a count of 0 when none of its
    # locations is inside the box).
    seeks, params = [], []
    for n, (cell_x, cell_y, sums) in enumerate(cut):
        seeks.append(_CUT_SELECT.format(x=cell_x, y=cell_y, n=n))
        params.append({
            f"s{n}": max(south, sums[MIN_LAT]), f"n{n}": min(north, sums[MAX_LAT]),
            f"w{n}": max(west, sums[MIN_LNG]), f"e{n}": min(east, sums[MAX_LNG]),
        })  # fmt: skip
    shift = DEEPEST - zoom
    for statement, given in _unions(seeks, params):
        for cell_x, cell_y, *sums in connection.execute(statement, {"map_id": map_id, **given}):
            if sums[COUNT]:
                _add(groups, (cell_x >> shift, cell_y >> shift), sums)


def _answer(map_id: str, groups: dict) -> dict:
    """The answer of the cells in ``groups``: clusters in row then column
    order, lone locations in creation order."""
    clusters, lone, unknown = [], [], []
    for key in sorted(groups, key=lambda cell: (cell[1], cell[0])):
        sums = groups[key]
        if sums[COUNT] > 1:
            clusters.append(_cluster(sums))
        elif sums[PK] is not None:
            lone.append(sums[PK])
        else:
            unknown.append((sums[MIN_LAT], sums[MIN_LNG]))
    lone.extend(_pks_at(map_id, unknown))
    locations = locations_by_pks(sorted(lone))
    total = len(locations) + sum(cluster["count"] for cluster in clusters)
    return {"clusters": clusters, "locations": locations, "total": total}


def _cluster(sums) -> dict:
    count = sums[COUNT]
    # A mean rounded past its box's edge is put back on it.
    lat = min(max(sums[SUM_LAT] / count, sums[MIN_LAT]), sums[MAX_LAT])
    lng = min(max(sums[SUM_LNG] / count, sums[MIN_LNG]), sums[MAX_LNG])
    return {
        "lat": lat,
        "lng": lng,
        "count": count,
        "bbox": [sums[MIN_LNG], sums[MIN_LAT], sums[MAX_LNG], sums[MAX_LAT]],
    }


def _pks_at(map_id: str, points: list[tuple[float, float]]) -> list[int]:
    """The pks of the locations at ``points``: each the only location of
    its cell in the box, so the only one of the map at that point (another
    there would share its cell)."""
    seeks = [_POINT_SELECT.format(n=n) for n in range(len(points))]
    params = [{f"lat{n}": lat, f"lng{n}": lng} for n, (lat, lng) in enumerate(points)]
    connection = db.session.connection()
    return [
        pk
        for statement, given in _unions(seeks, params)
        for pk in connection.execute(statement, {"map_id": map_id, **given}).scalars()
    ]
