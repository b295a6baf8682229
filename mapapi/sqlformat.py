"""Values the database hands back already written as the API writes them."""

from sqlalchemy import String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class api_timestamp(FunctionElement):  # noqa: N801 - used like a SQL function
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
