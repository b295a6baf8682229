"""What a log line says about a statement the database refused: the
statement's kind and table and the error, never a parameter.

A database error's own text is no such line: SQLAlchemy's quotes the
statement (and, unless the engine hides them, its parameters), and drivers
quote values in their messages (PostgreSQL's ``DETAIL: Key (key_hash)=(…)
already exists``, ``invalid input syntax for type integer: "…"``). So:

- PostgreSQL's errors are named by their SQLSTATE, their condition and the
  constraint at fault, and their message is added only for the classes
  whose messages never hold a value (a lost connection, a deadlock, a lock
  time-out, an administrator's command, the server out of resources);
- SQLite's messages name tables, columns and constraints, never a value:
  their first line is kept;
- an error with neither (a connection the driver lost) is described by
  its first line, which names no row.
"""

import re

from sqlalchemy.exc import StatementError

#: PostgreSQL error classes whose messages hold no value of a row:
#: connection exception, transaction rollback, insufficient resources,
#: object not in prerequisite state (a lock not available), operator
#: intervention.
_PLAIN_CLASSES = frozenset({"08", "40", "53", "55", "57"})
_WRITE = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+\"?(\w+)", re.IGNORECASE)
_READ = re.compile(r"\bFROM\s+\"?(\w+)", re.IGNORECASE)


def describe(error: StatementError) -> str:
    """``INSERT on webhooks failed: LockNotAvailable (SQLSTATE 55P03): …``"""
    return f"{_statement(error.statement or '')} failed: {_reason(error.orig)}"


def _statement(sql: str) -> str:
    written = _WRITE.search(sql)
    if written:
        return f"{written.group(1).split()[0].upper()} on {written.group(2)}"
    read = _READ.search(sql)
    if read:
        return f"SELECT on {read.group(1)}"
    words = sql.split(None, 1)
    return words[0].upper() if words else "a statement"


def _reason(orig: BaseException | None) -> str:
    if orig is None:
        return "no reason given"
    name = type(orig).__name__
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate:
        reason = f"{name} (SQLSTATE {sqlstate})"
        constraint = getattr(getattr(orig, "diag", None), "constraint_name", None)
        if constraint:
            reason += f" on {constraint}"
        if sqlstate[:2] in _PLAIN_CLASSES:
            reason += f": {first_line(orig)}"
        return reason
    if _is_driver_error(orig):
        return f"{name}: {first_line(orig)}"
    return name  # not the database's: its text may hold a parameter (a type's error)


def _is_driver_error(error: BaseException) -> bool:
    """An error of a DB-API driver (PEP 249 names its base class ``Error``)."""
    return any(
        kind.__name__ == "Error" and kind.__module__.split(".")[0] in ("sqlite3", "psycopg")
        for kind in type(error).__mro__
    )


def first_line(error: BaseException) -> str:
    return str(error).strip().partition("\n")[0]
