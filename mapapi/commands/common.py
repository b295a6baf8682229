"""What the ``mapapi`` commands share: opening the database, one-line
errors, tab-separated output, dates on the command line, listening addresses."""

import os
import socket
from contextlib import contextmanager
from functools import wraps

import click
from flask import current_app
from flask.cli import with_appcontext
from sqlalchemy.exc import DBAPIError, IntegrityError

from .refusals import SettingRefused
from ..config import without_password
from ..extensions import db
from ..http.errors import APIError
from ..printable import printable
from ..storage.failed_statements import first_line
from ..timeutil import parse_timestamp, utcnow


def open_database(*, create: bool = False) -> None:
    """Connect once before the command does anything; refuse in one line if that fails.

    Only ``serve`` and ``db upgrade`` (``create=True``) may make a new SQLite
    file (and its folder): any other command run from the wrong folder would
    otherwise leave an empty database there and report that it has no schema.
    """
    url = db.engine.url
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        path = os.path.abspath(url.database)
        if create:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            except OSError as error:
                raise SettingRefused(
                    f"MAPAPI_DATABASE_URL: cannot create the folder of {path}: {error.strerror}."
                ) from None
        elif not os.path.exists(path):
            raise click.ClickException(
                f"There is no database file {path}: create it with `mapapi db upgrade` "
                "(or `mapapi serve`), or set MAPAPI_DATABASE_URL or MAPAPI_INSTANCE_PATH "
                "to where it is."
            )
    try:
        with db.engine.connect():
            pass
    except DBAPIError as error:
        raise SettingRefused(_cannot_reach(shown_database(), error)) from None


def _cannot_reach(shown_url: str, error: DBAPIError) -> str:
    return f"MAPAPI_DATABASE_URL: the database {shown_url} cannot be reached: {first_line(error.orig)}"


def database_unreachable(url: str) -> str | None:
    """Why the database at ``url`` cannot be reached, or None; it writes
    nothing (a SQLite file that does not exist yet is not made: ``serve``
    and ``db upgrade`` will make it)."""
    from sqlalchemy import create_engine, make_url

    from ..config import engine_options

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database or parsed.database == ":memory:" or not os.path.exists(parsed.database):
            return None
    engine = create_engine(url, connect_args=engine_options(url, 1).get("connect_args", {}))
    try:
        with engine.connect():
            return None
    except DBAPIError as error:
        return _cannot_reach(without_password(url), error)
    finally:
        engine.dispose()


def storage_unreachable(uri: str) -> str | None:
    """Why the rate-limit storage at ``uri`` cannot be reached, or None (as the
    service opens it, with the same time-outs)."""
    if uri.startswith("memory://"):
        return None
    from limits.errors import StorageError
    from limits.storage import storage_from_string

    from ..config import defaults

    options = defaults("")["RATELIMIT_STORAGE_OPTIONS"]
    try:
        reachable = storage_from_string(uri, **options).check()
    except (StorageError, OSError) as error:
        reachable, why = False, f": {first_line(error)}"
    else:
        why = ""
    if reachable:
        return None
    return (
        f"MAPAPI_RATELIMIT_STORAGE_URI: the rate-limit storage {without_password(uri)} "
        f"cannot be reached{why}"
    )


def shown_database() -> str:
    """The database's URL as the settings give it, its password hidden."""
    return without_password(current_app.config["SQLALCHEMY_DATABASE_URI"])


def operator_command(function):
    """Commit on success; turn our errors into one line on stderr and exit 1."""

    @wraps(function)
    @with_appcontext
    def run(*args, **kwargs):
        open_database()
        try:
            result = function(*args, **kwargs)
            db.session.commit()
            return result
        except APIError as error:
            db.session.rollback()
            raise click.ClickException(error.message) from None
        except IntegrityError:
            db.session.rollback()
            raise click.ClickException("That conflicts with existing data.") from None
        except DBAPIError as error:
            db.session.rollback()
            raise click.ClickException(database_failure(error)) from None

    return run


def database_failure(error: DBAPIError) -> str:
    """One line for a statement the database refused.

    The driver's own first line only: SQLAlchemy's text adds the statement
    and its parameters, which may hold a key's hash.
    """
    line = first_line(error.orig)
    if _is_missing_table(error):
        return f"The database has no schema ({line}): run `mapapi db upgrade` first."
    return f"Database error: {line}"


def _is_missing_table(error: DBAPIError) -> bool:
    # PostgreSQL's SQLSTATE undefined_table; SQLite has only the message.
    sqlstate = getattr(error.orig, "sqlstate", None)
    return sqlstate == "42P01" or str(error.orig).startswith("no such table")


@contextmanager
def startup_errors():
    """A schema out of date or a database that refuses: one line, exit 1."""
    try:
        yield
    except RuntimeError as error:
        raise click.ClickException(str(error)) from None
    except DBAPIError as error:
        raise click.ClickException(database_failure(error)) from None


def echo_line(*fields: str) -> None:
    """One line of tab-separated fields on stdout.

    A key's name may hold any character: those that would end the line or
    the field (control characters, Unicode's line separators) are written
    as Python escapes, ``\\n`` or ``\\u2028``, and a backslash as two.
    """
    click.echo("\t".join(printable(field, backslash=True) for field in fields))


def parse_moment(value: str | None, option: str, *, future: bool = True):
    """``--until`` and ``--expires-at``: an ISO 8601 date-time in the future."""
    if value is None:
        return None
    try:
        moment = parse_timestamp(value)
    except ValueError:
        raise click.ClickException(f"{option} is not an ISO 8601 date-time: {value!r}.") from None
    if future and moment <= utcnow():
        raise click.ClickException(f"{option} must be in the future.")
    return moment


def check_address(host: str, port: int, host_setting: str, port_setting: str = "") -> None:
    """Refuse, before anything starts, an address a server could not listen on.

    The settings name where the host and the port came from (an option, a
    variable); the port's is the host's unless given.
    """
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise SettingRefused(
            f"{host_setting}: {host!r} is not an address to listen on ({error.strerror})."
        ) from None
    for family, kind, protocol, _name, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            # As waitress binds: a port left in TIME_WAIT is free, a listening one is not.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as error:
                raise SettingRefused(
                    f"{port_setting or host_setting}: cannot listen on {host}:{port} "
                    f"({error.strerror})."
                ) from None
