"""Values the database hands back already written as text: timestamps as
the API writes them and, on SQLite, floats and whole result sets as JSON."""

from sqlalchemy import String
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
