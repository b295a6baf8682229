"""Values the database hands back already written as text: timestamps as
the API writes them and, on SQLite, floats and whole result sets as JSON."""

from sqlalchemy import Boolean, Integer, String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class api_timestamp(FunctionElement):
    """A timestamp column as ``2026-11-21T09:30:00.000Z``, formatted by the
    database: no datetime object is built only to be written out again.

    Timestamps are stored cut to whole milliseconds (``timeutil.utcnow``),
    so both formats below show them exactly.
    """

    type = String()
    inherit_cache = True
    name = "api_timestamp"


@compiles(api_timestamp, "sqlite")
def _sqlite(element, compiler, **kw):
    # %f is seconds with milliseconds: "SS.SSS".
    return f"strftime('%Y-%m-%dT%H:%M:%fZ', {compiler.process(element.clauses, **kw)})"


@compiles(api_timestamp, "postgresql")
def _postgresql(element, compiler, **kw):
    column = compiler.process(element.clauses, **kw)
    return f"""to_char({column}, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""


class exact_float(FunctionElement):
    """SQLite: a float column as the text of its exact value (``float(text)``
    gives back the very float stored), for ``json_rows``.

    SQLite's own text for a REAL (``CAST``, ``json_array``) has 15 digits
    and loses the rest. 17 digits from its ``printf`` read back exactly for
    coordinates (checked on 300,000 random doubles of magnitude 180 and
    below, subnormals included); above about 1e150 the last digit is
    sometimes off.
    """

    type = String()
    inherit_cache = True
    name = "exact_float"


@compiles(exact_float, "sqlite")
def _sqlite_float(element, compiler, **kw):
    column = compiler.process(element.clauses, **kw)
    return f"iif({column} IS NULL, NULL, printf('%!.17g', {column}))"


class json_rows(FunctionElement):
    """SQLite: an aggregate, the selected rows as the text of one JSON array,
    each row an array of its values (``[]`` for no rows), in no guaranteed
    order. Select ``exact_float`` of a float: its JSON number is rounded.
    """

    type = String()
    inherit_cache = True
    name = "json_rows"


@compiles(json_rows, "sqlite")
def _sqlite_rows(element, compiler, **kw):
    return f"json_group_array(json_array({compiler.process(element.clauses, **kw)}))"


# --- JSON documents written by the database (a GeoJSON Feature) -------------------
#
# SQLite's JSON functions write compact JSON; PostgreSQL's ``json_build_object``
# writes ``{"a" : 1}`` and ``json_agg`` ``[1, 2]``. On PostgreSQL the
# documents are therefore put together as text: each value by ``to_json``,
# the members and items joined without spaces, as SQLite writes them.


class json_object(FunctionElement):
    """A JSON object of alternating keys (``literal_column("'key'")``) and values."""

    type = String()
    inherit_cache = True
    name = "json_object"


@compiles(json_object)
def _json_object(element, compiler, **kw):
    return f"json_object({compiler.process(element.clauses, **kw)})"


@compiles(json_object, "postgresql")
def _pg_json_object(element, compiler, **kw):
    parts = list(element.clauses)
    members = [
        f"""'"{key.name.strip("'")}":' || {_pg_json_text(value, compiler, **kw)}"""
        for key, value in zip(parts[::2], parts[1::2], strict=True)
    ]
    return "('{' || " + " || ',' || ".join(members) + " || '}')"


class json_text_object(FunctionElement):
    """``json_object`` put together as text on both databases: on SQLite too,
    each member's text is joined as it is, so a document inside (a stored
    ``properties``, a subquery's array) is not parsed again to be embedded."""

    type = String()
    inherit_cache = True
    name = "json_text_object"


@compiles(json_text_object)
def _json_text_object(element, compiler, **kw):
    return _joined_members(element, _sqlite_json_text, compiler, **kw)


@compiles(json_text_object, "postgresql")
def _pg_json_text_object(element, compiler, **kw):
    return _joined_members(element, _pg_json_text, compiler, **kw)


def _joined_members(element, text_of, compiler, **kw) -> str:
    parts = list(element.clauses)
    members = [
        f"""'"{key.name.strip("'")}":' || {text_of(value, compiler, **kw)}"""
        for key, value in zip(parts[::2], parts[1::2], strict=True)
    ]
    return "('{' || " + " || ',' || ".join(members) + " || '}')"


class json_array(FunctionElement):
    """A JSON array of its arguments."""

    type = String()
    inherit_cache = True
    name = "json_array"


@compiles(json_array)
def _json_array(element, compiler, **kw):
    return f"json_array({compiler.process(element.clauses, **kw)})"


@compiles(json_array, "postgresql")
def _pg_json_array(element, compiler, **kw):
    items = [_pg_json_text(value, compiler, **kw) for value in element.clauses]
    return "('[' || " + " || ',' || ".join(items) + " || ']')"


class json_array_agg(FunctionElement):
    """An aggregate: its values as a JSON array, in the order the rows come
    (``[]`` for none); fed from an ordered subquery, both databases keep
    that order."""

    type = String()
    inherit_cache = True
    name = "json_array_agg"


@compiles(json_array_agg)
def _json_group_array(element, compiler, **kw):
    return f"json_group_array({compiler.process(element.clauses, **kw)})"


@compiles(json_array_agg, "postgresql")
def _pg_json_array_agg(element, compiler, **kw):
    (value,) = element.clauses
    items = f"string_agg({_pg_json_text(value, compiler, **kw)}, ',')"
    return f"coalesce('[' || {items} || ']', '[]')"


class json_float(FunctionElement):
    """A float column as a JSON number that reads back as the very float
    stored. PostgreSQL writes the shortest such text itself; SQLite's JSON
    functions write 15 digits, so the number is written by ``printf``: 15
    digits when they read back exactly (most coordinates: ``2.3``, not
    ``2.2999999999999998``), else 17 (see ``exact_float``)."""

    type = String()
    inherit_cache = True
    name = "json_float"


@compiles(json_float, "postgresql")
def _pg_json_float(element, compiler, **kw):
    return f"to_json({compiler.process(element.clauses, **kw)})::text"


@compiles(json_float, "sqlite")
def _sqlite_json_float(element, compiler, **kw):
    column = compiler.process(element.clauses, **kw)
    # The REAL itself where 15 digits read back exactly: the JSON functions
    # write it with those 15 (no second printf, no text to parse again).
    return (
        f"CASE WHEN CAST(printf('%!.15g', {column}) AS REAL) = {column} THEN {column} "
        f"ELSE json(printf('%!.17g', {column})) END"
    )


class json_document(FunctionElement):
    """JSON text (a stored column, a constant, a subquery's document),
    embedded as JSON, not as a string."""

    type = String()
    inherit_cache = True
    name = "json_document"


@compiles(json_document, "postgresql")
def _pg_json_document(element, compiler, **kw):
    return f"({compiler.process(element.clauses, **kw)})::text"


@compiles(json_document, "sqlite")
def _sqlite_json_document(element, compiler, json_unwrapped=False, **kw):
    return _json_of(compiler.process(element.clauses, **kw), json_unwrapped)


def _json_of(text: str, unwrapped: bool) -> str:
    """SQLite: ``json(text)``, embedded by its JSON functions as JSON; or the
    text itself, for ``json_text_object`` to join."""
    return text if unwrapped else f"json({text})"


class json_texts_agg(FunctionElement):
    """An aggregate: JSON texts (documents built by the database) joined into
    one JSON array's text, in the order the rows come (``[]`` for none),
    without parsing them again; fed from an ordered subquery, as
    ``json_array_agg``."""

    type = String()
    inherit_cache = True
    name = "json_texts_agg"


@compiles(json_texts_agg)
def _json_texts_agg(element, compiler, **kw):
    return f"coalesce('[' || group_concat({compiler.process(element.clauses, **kw)}, ',') || ']', '[]')"


@compiles(json_texts_agg, "postgresql")
def _pg_json_texts_agg(element, compiler, **kw):
    return (
        f"coalesce('[' || string_agg({compiler.process(element.clauses, **kw)}, ',') || ']', '[]')"
    )


class json_bool(FunctionElement):
    """A boolean column as JSON ``true`` or ``false`` (SQLite holds 1 and 0)."""

    type = String()
    inherit_cache = True
    name = "json_bool"


@compiles(json_bool)
def _json_bool(element, compiler, json_unwrapped=False, **kw):
    column = compiler.process(element.clauses, **kw)
    return _json_of(f"(CASE WHEN {column} THEN 'true' ELSE 'false' END)", json_unwrapped)


@compiles(json_bool, "postgresql")
def _pg_json_bool(element, compiler, **kw):
    return f"(CASE WHEN {compiler.process(element.clauses, **kw)} THEN 'true' ELSE 'false' END)"


# The range where both databases write a float without an exponent, as
# orjson does: there the shortest digits that read back are the same text.
_PLAIN_FLOAT = "({c} = 0 OR (abs({c}) >= 0.0001 AND abs({c}) < 1e15))"


class api_float(FunctionElement):
    """A float column as the JSON number the API's encoder (orjson) writes
    for it: the shortest digits that read back as the very float stored,
    with ``.0`` when whole; exact where ``api_float_written`` holds (no
    exponent: coordinates, which are at most 180, unless below 0.0001).
    SQLite's ``printf`` is asked for 15, then 16, then 17 digits (see
    ``exact_float`` for how far 17 are exact)."""

    type = String()
    inherit_cache = True
    name = "api_float"


@compiles(api_float, "sqlite")
def _sqlite_api_float(element, compiler, json_unwrapped=False, **kw):
    column = compiler.process(element.clauses, **kw)
    digits = [f"printf('%!.{n}g', {column})" for n in (15, 16)]
    text = (
        f"(CASE WHEN CAST({digits[0]} AS REAL) = {column} THEN {digits[0]} "
        f"WHEN CAST({digits[1]} AS REAL) = {column} THEN {digits[1]} "
        f"ELSE printf('%!.17g', {column}) END)"
    )
    return _json_of(text, json_unwrapped)


@compiles(api_float, "postgresql")
def _pg_api_float(element, compiler, **kw):
    text = f"({compiler.process(element.clauses, **kw)})::text"
    return f"(CASE WHEN strpos({text}, '.') = 0 THEN {text} || '.0' ELSE {text} END)"


class api_float_written(FunctionElement):
    """Whether ``api_float`` writes the column exactly as the API's encoder: 1 or 0."""

    type = Integer()
    inherit_cache = True
    name = "api_float_written"


@compiles(api_float_written)
def _api_float_written(element, compiler, **kw):
    condition = _PLAIN_FLOAT.format(c=compiler.process(element.clauses, **kw))
    return f"(CASE WHEN {condition} THEN 1 ELSE 0 END)"


_JSON_TEXTS = (
    json_object, json_text_object, json_array, json_array_agg, json_float, json_document,
    json_texts_agg, json_bool, api_float,
)  # fmt: skip


def _pg_json_text(value, compiler, **kw) -> str:
    """PostgreSQL: ``value`` as JSON text; a document built here is already."""
    compiled = compiler.process(value, **kw)
    if isinstance(value, _JSON_TEXTS):
        return compiled
    return f"coalesce(to_json({compiled})::text, 'null')"


def _sqlite_json_text(value, compiler, **kw) -> str:
    """SQLite: ``value`` as JSON text to join: a document's own text, not
    parsed again by ``json()``; any other value by ``json_quote``."""
    if isinstance(value, json_document | json_bool | api_float):
        return compiler.process(value, json_unwrapped=True, **kw)
    compiled = compiler.process(value, **kw)
    if isinstance(value, _JSON_TEXTS):
        return compiled
    return f"json_quote({compiled})"


# --- comparisons as CQL2 means them: case-sensitive, by code point ---------------


class code_point_order(FunctionElement):
    """A text column compared by code point: ``COLLATE "C"`` on PostgreSQL
    (whose default collation may follow a language's rules); SQLite's
    BINARY collation is already."""

    type = String()
    inherit_cache = True
    name = "code_point_order"


@compiles(code_point_order)
def _code_point_order(element, compiler, **kw):
    return compiler.process(element.clauses, **kw)


@compiles(code_point_order, "postgresql")
def _pg_code_point_order(element, compiler, **kw):
    return f'({compiler.process(element.clauses, **kw)}) COLLATE "C"'


class like_exactly(FunctionElement):
    """``column LIKE pattern``, case-sensitive on both databases: SQLite's
    LIKE ignores the case of ASCII letters, so there it is ``GLOB``.

    Arguments: the column, the pattern for GLOB, the pattern for LIKE (with
    ``\\`` as its escape character).
    """

    type = Boolean()
    inherit_cache = True
    name = "like_exactly"


@compiles(like_exactly)
def _like_exactly(element, compiler, **kw):
    column, _glob, like = element.clauses
    return f"{compiler.process(column, **kw)} LIKE {compiler.process(like, **kw)} ESCAPE '\\'"


@compiles(like_exactly, "sqlite")
def _sqlite_glob(element, compiler, **kw):
    column, glob, _like = element.clauses
    return f"{compiler.process(column, **kw)} GLOB {compiler.process(glob, **kw)}"
