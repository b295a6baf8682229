"""One-statement reads run on the database driver, outside the Session.

Every API request first reads its key. Through the Session that read costs
what the statement costs ten times over: the Session and its transaction,
a Connection, the pool's events, ``BEGIN``, the result machinery, and at
teardown the rollback and the checkin (about 85 µs of CPU of a 300 µs
request, measured in-process on SQLite). The checks need none of it: one
statement, one row. So a ``DriverQuery`` compiles its statement once per
dialect, checks a connection out of the same pool (its checkout events
still replace a connection the server dropped), runs the statement alone,
converts the row with the columns' own SQLAlchemy types, and gives the
connection back: about 10 µs.

On SQLite the statement is its own transaction (the driver runs in
autocommit mode, see ``database``): it never takes the write lock, so a
check never waits for a writer. On PostgreSQL the connection is switched
to autocommit for the statement, which spares the ``BEGIN`` and
``ROLLBACK`` round trips.
"""

from collections import namedtuple
from collections.abc import Callable

from sqlalchemy.exc import DBAPIError

#: Called with the SQL of each statement sent past SQLAlchemy's Connection,
#: before it runs (the tests' and the benchmark's statement counters listen
#: here as well as on the engine).
statement_listeners: list[Callable[[str], None]] = []


def announce(sql: str) -> None:
    """Tell the listeners that ``sql`` goes to the driver directly."""
    for listener in statement_listeners:
        listener(sql)


class DriverQuery:
    """A SELECT of at most one row, compiled per dialect, run on a pooled DBAPI connection."""

    def __init__(self, statement):
        self.statement = statement
        self._compiled: dict[str, _Compiled] = {}

    def one_or_none(self, engine, parameters: dict):
        """The row as a named tuple of Python values, or None; DBAPI errors raised as SQLAlchemy's."""
        compiled = self._compiled.get(engine.dialect.name)
        if compiled is None:
            compiled = self._compiled[engine.dialect.name] = _Compiled(self.statement, engine.dialect)
        sql, bound = compiled.sql, compiled.bind(parameters)
        announce(sql)
        dialect = engine.dialect
        connection = None
        try:
            connection = engine.raw_connection()
            row, description = _fetch_one(connection, sql, bound, dialect)
        except dialect.loaded_dbapi.Error as error:
            if connection is not None and dialect.is_disconnect(
                error, connection.dbapi_connection, None
            ):
                connection.invalidate(error)
            raise DBAPIError.instance(
                sql, bound, error, dialect.loaded_dbapi.Error, dialect=dialect
            ) from error
        finally:
            if connection is not None:
                connection.close()  # back to the pool
        return None if row is None else compiled.convert(row, description)


def _fetch_one(connection, sql: str, parameters, dialect):
    autocommit = dialect.name == "postgresql"
    if autocommit:
        connection.driver_connection.autocommit = True
    cursor = connection.cursor()
    try:
        cursor.execute(sql, parameters)
        return cursor.fetchone(), cursor.description
    finally:
        cursor.close()
        if autocommit:
            connection.driver_connection.autocommit = False


class _Compiled:
    """A statement's SQL for one dialect, and how its values go in and come out."""

    def __init__(self, statement, dialect):
        compiled = statement.compile(dialect=dialect)
        self.sql = compiled.string
        self.names = compiled.positiontup if compiled.positional else None
        self.binders = {
            name: bind.type.dialect_impl(dialect).bind_processor(dialect)
            for name, bind in compiled.binds.items()
        }
        self.dialect = dialect
        self.types = [column.type.dialect_impl(dialect) for column in statement.selected_columns]
        self.converters = None  # from the first result's column type codes
        self.row = namedtuple("Row", [column.key for column in statement.selected_columns])

    def bind(self, parameters: dict):
        values = {}
        for name, value in parameters.items():
            binder = self.binders.get(name)
            values[name] = value if binder is None or value is None else binder(value)
        if self.names is None:
            return values
        return tuple(values[name] for name in self.names)

    def convert(self, row, description) -> tuple:
        if self.converters is None:
            self.converters = [
                type_.result_processor(self.dialect, column[1])
                for type_, column in zip(self.types, description, strict=True)
            ]
        return self.row._make(
            value if convert is None else convert(value)
            for convert, value in zip(self.converters, row, strict=True)
        )
