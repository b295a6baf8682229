"""CQL2 filters (OGC API - Features Part 3) as SQL conditions on locations.

The ``cql2`` library parses the text and the JSON encodings into one JSON
syntax tree; this module translates that tree, and refuses whatever it does
not build: Basic CQL2 on the queryables (comparisons, AND, OR, NOT,
IS NULL, string and timestamp literals), LIKE, BETWEEN and IN, all
case-sensitive, and ``S_INTERSECTS(geometry, <BBOX, POLYGON or POINT>)``.
A location's geometry is its point; a polygon is tested in SQL by the
crossing count of a ray (even-odd, so holes work), its edges included.
"""

import json
import math
from functools import reduce
from operator import add

import cql2
from sqlalchemy import and_, bindparam, case, literal, not_, or_

from ..services.location_filters import selection
from ..storage.models import Location
from ..storage.sqlformat import code_point_order, like_exactly
from ..timeutil import parse_timestamp

LANGUAGES = ("cql2-text", "cql2-json")
GEOMETRY = "geometry"
#: The most positions a polygon of ``S_INTERSECTS`` may have.
POLYGON_MAX_POSITIONS = 500

_c = Location.__table__.c
#: The queryables but the geometry: their kind and column.
PROPERTIES = {
    "name": ("string", _c.name),
    "description": ("string", _c.description),
    "address": ("string", _c.address),
    "externalId": ("string", _c.external_id),
    "categoryId": ("string", _c.category_id),
    "createdAt": ("timestamp", _c.created_at),
    "updatedAt": ("timestamp", _c.updated_at),
}
_COMPARISONS = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
}
#: ``literal op property`` read as ``property flipped-op literal``.
_FLIPPED = {"=": "=", "<>": "<>", "<": ">", ">": "<", "<=": ">=", ">=": "<="}


class FilterError(ValueError):
    """A filter that cannot be read or uses what is not built."""


def parse(text: str, language: str):
    """The syntax tree of ``text`` in ``language`` (one of LANGUAGES)."""
    try:
        if language == "cql2-json":
            json.loads(text)  # the library's own message for bad JSON is obscure
            return cql2.parse_json(text).to_json()
        return cql2.parse_text(text).to_json()
    except ValueError as error:  # json's and cql2's errors
        raise FilterError(f"Cannot be read as {language}: {error}") from None
    except Exception as error:  # noqa: BLE001 - cql2's own exception types
        raise FilterError(f"Cannot be read as {language}: {error}") from None


def condition(tree):
    """The SQL condition of a CQL2 syntax tree."""
    if not isinstance(tree, dict) or "op" not in tree:
        raise FilterError(
            "Must be a condition (a comparison, LIKE, IN, ... ), not a value."
        )
    op, args = tree["op"], tree.get("args")
    if not isinstance(args, list):
        raise FilterError(f"{op}: its arguments must be a list.")
    if op in ("and", "or"):
        if len(args) < 2:
            raise FilterError(f"{op.upper()} needs two conditions or more.")
        return (and_ if op == "and" else or_)(*(condition(arg) for arg in args))
    if op == "not":
        _arity(op, args, 1)
        return not_(condition(args[0]))
    if op in _COMPARISONS:
        return _comparison(op, args)
    if op == "like":
        return _like(args)
    if op == "between":
        _arity("BETWEEN", args, 3)
        kind, column = _property(args[0])
        return column.between(_literal(kind, args[1]), _literal(kind, args[2]))
    if op == "in":
        _arity("IN", args, 2)
        kind, column = _property(args[0])
        if not isinstance(args[1], list) or not args[1]:
            raise FilterError("IN needs a list of one value or more.")
        return column.in_([_literal(kind, value) for value in args[1]])
    if op == "isNull":
        _arity("IS NULL", args, 1)
        return _property(args[0])[1].is_(None)
    if op == "s_intersects":
        return _intersects(args)
    raise FilterError(f"The operator {op!r} is not supported here.")


def _arity(name: str, args: list, count: int) -> None:
    if len(args) != count:
        raise FilterError(f"{name} takes {count} argument(s).")


def _is_property(value) -> bool:
    return isinstance(value, dict) and set(value) == {"property"}


def _property(value) -> tuple[str, object]:
    """``(kind, column)`` of a queryable named by ``value``."""
    if not _is_property(value):
        raise FilterError("Expected a property (one of the queryables) here.")
    name = value["property"]
    if name not in PROPERTIES:
        known = ", ".join([*PROPERTIES, GEOMETRY])
        raise FilterError(f"Unknown property {name!r}: the queryables are {known}.")
    kind, column = PROPERTIES[name]
    return kind, code_point_order(column) if kind == "string" else column


def _literal(kind: str, value):
    """A literal compared with a property of ``kind``."""
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "timestamp":
        if isinstance(value, dict) and set(value) == {"timestamp"}:
            value = value["timestamp"]
        if isinstance(value, str):
            try:
                return parse_timestamp(value)
            except ValueError:
                raise FilterError(f"Not a valid timestamp: {value!r}.") from None
    raise FilterError(f"A {kind} property is compared with a {kind} literal only.")


def _comparison(op: str, args: list):
    _arity(op, args, 2)
    left, right = args
    if not _is_property(left) and _is_property(right):
        op, left, right = _FLIPPED[op], right, left
    kind, column = _property(left)
    if right is None:
        raise FilterError("Compare with null by IS NULL.")
    return _COMPARISONS[op](column, _literal(kind, right))


def _like(args: list):
    _arity("LIKE", args, 2)
    kind, column = _property(args[0])
    pattern = args[1]
    if kind != "string" or not isinstance(pattern, str):
        raise FilterError("LIKE compares a string property with a string pattern.")
    glob, like = [], []
    escaped = False
    for character in pattern:
        if escaped:
            escaped = False
        elif character == "\\":
            escaped = True
            continue
        elif character in "%_":
            glob.append("*" if character == "%" else "?")
            like.append(character)
            continue
        glob.append(f"[{character}]" if character in "*?[" else character)
        like.append("\\" + character if character in "%_\\" else character)
    if escaped:
        raise FilterError("A LIKE pattern may not end with its escape character \\.")
    return like_exactly(
        column, bindparam(None, "".join(glob)), bindparam(None, "".join(like))
    )


# --- S_INTERSECTS ------------------------------------------------------------------


def _intersects(args: list):
    _arity("S_INTERSECTS", args, 2)
    first, second = args
    if not (_is_property(first) and first["property"] == GEOMETRY):
        first, second = second, first
    if not (_is_property(first) and first["property"] == GEOMETRY):
        raise FilterError(
            "S_INTERSECTS compares the property geometry with a geometry."
        )
    if isinstance(second, dict) and set(second) == {"bbox"}:
        return in_box(_numbers(second["bbox"]))
    if isinstance(second, dict) and second.get("type") == "Polygon":
        return _in_polygon(second.get("coordinates"))
    if isinstance(second, dict) and second.get("type") == "Point":
        x, y = _position(second.get("coordinates"))
        return and_(_c.lng == x, _c.lat == y)
    raise FilterError("S_INTERSECTS takes a BBOX, a POLYGON or a POINT.")


def _numbers(values) -> list[float]:
    if not isinstance(values, list) or not all(_is_number(value) for value in values):
        raise FilterError("A BBOX and positions hold finite numbers only.")
    return [float(value) for value in values]


def _is_number(value) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def _position(values) -> tuple[float, float]:
    numbers = _numbers(values)
    if len(numbers) not in (2, 3):
        raise FilterError("A position is [longitude, latitude].")
    return numbers[0], numbers[1]


def in_box(numbers: list[float]):
    """Locations in a box ``[w, s, e, n]`` (or six numbers, heights ignored),
    edges included; ``w > e`` crosses the antimeridian: the list's own
    ``bbox`` condition."""
    if len(numbers) == 6:
        numbers = [numbers[0], numbers[1], numbers[3], numbers[4]]
    if len(numbers) != 4:
        raise FilterError("A BBOX has 4 numbers (or 6 with heights).")
    if numbers[1] > numbers[3]:
        raise FilterError("A BBOX's south must not be greater than its north.")
    return and_(*selection({"bbox": tuple(numbers)}).where)


def _in_polygon(coordinates):
    """Locations inside a polygon (holes excluded) or on its edges."""
    if not isinstance(coordinates, list) or not coordinates:
        raise FilterError("A POLYGON has one ring or more.")
    rings = [[_position(position) for position in ring] for ring in _rings(coordinates)]
    if sum(len(ring) for ring in rings) > POLYGON_MAX_POSITIONS:
        raise FilterError(
            f"A POLYGON may have at most {POLYGON_MAX_POSITIONS} positions here."
        )
    edges = [
        (ring[index], ring[(index + 1) % len(ring)])
        for ring in rings
        for index in range(len(ring))
        if ring[index] != ring[(index + 1) % len(ring)]
    ]
    if len(rings[0]) < 3 or not edges:
        raise FilterError("A POLYGON's ring needs three positions or more.")
    xs, ys = [x for x, _ in rings[0]], [y for _, y in rings[0]]
    crossings = _sum([_crossing(*edge) for edge in edges if edge[0][1] != edge[1][1]])
    on_edges = _sum([_on_edge(*edge) for edge in edges])
    return and_(
        _c.lat.between(min(ys), max(ys)),
        _c.lng.between(min(xs), max(xs)),
        or_(on_edges > 0, crossings % 2 == 1)
        if crossings is not None
        else on_edges > 0,
    )


def _rings(coordinates) -> list:
    if not all(isinstance(ring, list) for ring in coordinates):
        raise FilterError("A POLYGON's rings are lists of positions.")
    return coordinates


def _crossing(start, end):
    """1 when a ray from the location towards +longitude crosses this edge."""
    (x1, y1), (x2, y2) = start, end
    slope = (x2 - x1) / (y2 - y1)
    return case(
        (
            and_(
                _c.lat >= min(y1, y2),
                _c.lat < max(y1, y2),
                _c.lng < literal(x1) + (_c.lat - literal(y1)) * literal(slope),
            ),
            1,
        ),
        else_=0,
    )


def _on_edge(start, end):
    """1 when the location lies on this edge."""
    (x1, y1), (x2, y2) = start, end
    on_line = (_c.lng - literal(x1)) * literal(y2 - y1) == (
        _c.lat - literal(y1)
    ) * literal(x2 - x1)
    return case(
        (
            and_(
                _c.lng.between(min(x1, x2), max(x1, x2)),
                _c.lat.between(min(y1, y2), max(y1, y2)),
                on_line,
            ),
            1,
        ),
        else_=0,
    )


def _sum(terms: list):
    """The sum of ``terms`` as a balanced tree: SQLite limits an expression's depth."""
    if not terms:
        return None
    while len(terms) > 1:
        terms = [
            reduce(add, terms[index : index + 2]) for index in range(0, len(terms), 2)
        ]
    return terms[0]
