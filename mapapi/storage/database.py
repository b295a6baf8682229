"""Database engine setup: SQLite made safe for a threaded server, and
connections the database dropped replaced before use."""

import select
import sqlite3
import threading
import weakref

from flask import has_request_context, request
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError

from .driver import announce


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BUSY_TIMEOUT_SECONDS = 5
#: ``write_lock`` execution option: take the write lock only if no one holds it.
IF_FREE = "if free"


class WriterBusy(Exception):
    """Another transaction holds SQLite's write lock, and this one would not wait."""


def configure_engine(engine) -> None:
    """Tune SQLite for many threads; check a server's connections before use.

    An SQLite file is never "dropped", so its connections need no check.
    """
    if engine.dialect.name == "sqlite":
        writers = WriterQueue()
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", writers.begin)
        event.listen(engine, "commit", writers.end)
        event.listen(engine, "rollback", writers.end)
        # A safety net: a connection never goes back to the pool holding it.
        event.listen(engine, "checkin", writers.end_on_checkin)
    else:
        event.listen(engine, "checkout", DroppedConnections(engine.dialect).check)


class DroppedConnections:
    """Replaces a pooled connection the server closed while it sat idle.

    The server's side of such a connection is gone (a restart, a proxy's
    idle timeout) and its socket reads as ready: the server's last message
    or the end of the stream. A healthy idle connection has nothing to
    read. So the round trip that asks the server (SQLAlchemy's
    ``pool_pre_ping`` sends it before every use: a fifth of the API's
    requests per second on PostgreSQL in the benchmark) is only paid when
    the socket has something to say. The pool replaces a connection this
    refuses and tries again.
    """

    def __init__(self, dialect):
        self.dialect = dialect

    def check(self, dbapi_connection, _record, _proxy) -> None:
        if dbapi_connection.closed or (
            _has_input(dbapi_connection.fileno()) and not self._answers(dbapi_connection)
        ):
            raise DisconnectionError("the database closed this connection")

    def _answers(self, dbapi_connection) -> bool:
        try:
            return self.dialect.do_ping(dbapi_connection)
        except self.dialect.loaded_dbapi.Error:
            return False


def _has_input(fd: int) -> bool:
    """Whether the socket ``fd`` can be read without waiting (data, end or error)."""
    if not hasattr(select, "poll"):  # Windows: no poll(), so always ask the server
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class WriterQueue:
    """Write transactions of one process wait their turn on a lock.

    SQLite allows one writer at a time. Left to itself, a writer that finds
    the database locked sleeps and retries (the busy timeout), so under many
    concurrent writes some wait seconds and a few give up with "database is
    locked". Queued on a lock here, each starts as soon as the previous one
    ends. Other processes on the same file still meet the busy timeout.
    """

    def __init__(self):
        self._lock = threading.Lock()

    def begin(self, connection) -> None:
        # A writing transaction takes SQLite's write lock up front: a
        # deferred one that read first could not upgrade once another writer
        # had committed, and would fail instead of waiting its turn.
        wanted = wants_write_lock(connection)
        if not wanted:
            _run_on_driver(connection, "BEGIN")
        elif wanted == IF_FREE:
            self._begin_if_free(connection)
        else:
            if self._lock.acquire(timeout=BUSY_TIMEOUT_SECONDS):
                connection.info["holds_writer_lock"] = True
            self._begin_immediate(connection)

    def _begin_if_free(self, connection) -> None:
        if not self._lock.acquire(blocking=False):
            raise WriterBusy
        connection.info["holds_writer_lock"] = True
        connection.exec_driver_sql("PRAGMA busy_timeout=0")  # nor behind another process
        try:
            self._begin_immediate(connection)
        except OperationalError:
            raise WriterBusy from None
        finally:
            connection.exec_driver_sql(f"PRAGMA busy_timeout={BUSY_TIMEOUT_SECONDS * 1000}")

    def _begin_immediate(self, connection) -> None:
        try:
            _run_on_driver(connection, "BEGIN IMMEDIATE")
        except BaseException:
            self.end(connection)
            raise

    def end(self, connection) -> None:
        self._release(connection.info)

    def end_on_checkin(self, _dbapi_connection, record) -> None:
        self._release(record.info)

    def _release(self, info: dict) -> None:
        # Connection.info is its pool record's info, so both ends see the flag.
        if info.pop("holds_writer_lock", False):
            self._lock.release()


def _run_on_driver(connection, sql: str) -> None:
    """``sql`` straight to sqlite3: a BEGIN needs none of the statement
    machinery of ``exec_driver_sql`` (a sixth of a small request's SQL
    cost); an error still reaches the app as SQLAlchemy's."""
    announce(sql)
    try:
        connection.connection.driver_connection.execute(sql)
    except sqlite3.Error as error:
        raise DBAPIError.instance(sql, None, error, sqlite3.Error) from error


def _sqlite_on_connect(dbapi_connection, _record) -> None:
    # The driver's own transaction handling begins a transaction only at the
    # first write, so a request's reads are not isolated from other writers
    # and updates get lost; we issue BEGIN ourselves instead (see below).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_SECONDS * 1000}")
    # FULL: a write acknowledged to the client survives a power loss too.
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def wants_write_lock(connection) -> bool:
    """Whether a transaction beginning on ``connection`` may write."""
    explicit = connection.get_execution_options().get("write_lock")
    if explicit is not None:
        return explicit
    if has_request_context():
        return request.method in WRITE_METHODS
    return True


def reading_isolation(bind):
    """The engine a request's Session uses: ``bind``, or for a reading
    request on PostgreSQL, ``bind`` at REPEATABLE READ.

    A reading request sees one snapshot of the database from its first
    statement to its last, so that a page, its count and its layers agree.
    SQLite gives that to every transaction (``BEGIN``, WAL); PostgreSQL's
    default, READ COMMITTED, takes a new snapshot per statement, so reads
    ask for REPEATABLE READ there (which never fails a read-only
    transaction). Writes keep READ COMMITTED and lock the rows they depend
    on (``services.ownership.owned_map``).
    """
    if (
        bind.dialect.name != "postgresql"
        or not has_request_context()
        or request.method in WRITE_METHODS
    ):
        return bind
    reader = _READERS.get(bind)
    if reader is None:
        reader = _READERS[bind] = bind.execution_options(isolation_level="REPEATABLE READ")
    return reader


#: Each engine's REPEATABLE READ variant (it shares the engine's pool).
_READERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
