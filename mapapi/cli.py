"""The ``mapapi`` command: serve the API and manage accounts and keys.

Every failure is one line on stderr: exit status 2 for a setting, an option
or an address the command cannot use, or a database it cannot reach; exit
status 1 for anything else. ``keys create`` prints the secret alone on
stdout so that ``KEY=$(mapapi keys create ...)`` works.
"""

import logging
import os
import re
import signal
import socket
import sqlite3
import sys
from contextlib import contextmanager
from functools import wraps
from importlib.metadata import version

import click
from flask import current_app
from flask.cli import ScriptInfo, with_appcontext
from flask_migrate.cli import db as db_group
from sqlalchemy.exc import DBAPIError, IntegrityError

from . import server
from .config import SettingError, without_password
from .contract.schemas import SCOPES
from .delivery.addresses import warn_if_private_allowed
from .delivery.worker import DeliveryWorker, start_in_background
from .extensions import db
from .http.errors import APIError
from .log_output import log_to_stderr
from .filesync.command import sync_command
from .mcp.command import mcp_command
from .services import accounts as account_service
from .services import events as event_service
from .services.keys import issue_key, listed_keys, revoke_key
from .storage.backup import BackupError, backup_sqlite
from .storage.upgrade import apply_migrations, prepare_schema
from .timeutil import format_timestamp, parse_timestamp, utcnow

_SEPARATORS = re.compile(r"[\\\x00-\x1f\x7f-\x9f\u2028\u2029]")
log = logging.getLogger(__name__)


class SettingRefused(click.ClickException):
    """A setting, option, address or database the command cannot use: exit 2."""

    exit_code = 2


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
        raise SettingRefused(
            f"MAPAPI_DATABASE_URL: the database {url.render_as_string(hide_password=True)} "
            f"cannot be reached: {first_line(error.orig)}"
        ) from None


def first_line(error: BaseException) -> str:
    return str(error).strip().partition("\n")[0]


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


def echo_line(*fields: str) -> None:
    """One line of tab-separated fields on stdout.

    A key's name may hold any character: those that would end the line or
    the field (control characters, Unicode's line separators) are written
    as Python escapes, ``\\n`` or ``\\u2028``, and a backslash as two.
    """
    click.echo("\t".join(_SEPARATORS.sub(_escape, field) for field in fields))


def _escape(found: re.Match) -> str:
    return found.group().encode("unicode_escape").decode("ascii")


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


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="the address to listen on")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(1, 65535), help="1 to 65535"
)
@server.limit_options
@with_appcontext
def serve_command(host, port, **limits):
    """Run the API under waitress (creates the schema on an empty database)."""
    log_to_stderr()
    app = current_app._get_current_object()
    warn_if_private_allowed(app.config["WEBHOOKS_ALLOW_PRIVATE"])
    check_address(host, port)
    open_database(create=True)
    with _startup_errors():
        prepare_schema()
        if app.config["BOOTSTRAP"]:
            _bootstrap()
    db.session.remove()
    log.info(
        "mapapi %s: database %s, rate-limit storage %s",
        version("mapapi"),
        db.engine.url.render_as_string(hide_password=True),
        without_password(app.config["RATELIMIT_STORAGE_URI"]),
    )
    delivery = start_in_background(app)
    try:
        server.serve(app, host=host, port=port, limits=server.Limits(**limits))
    except OSError as error:  # taken between the check and the server's own bind
        raise SettingRefused(f"--port {port}: cannot listen on {host}: {error.strerror}.") from None
    finally:
        if delivery is not None:
            thread, stop = delivery
            stop.set()
            thread.join(timeout=DELIVERY_DRAIN_SECONDS)


#: How long a stopping process lets the webhook attempts in flight finish
#: (an attempt cut short is made again by another process, or after a restart).
DELIVERY_DRAIN_SECONDS = 15


def check_address(host: str, port: int) -> None:
    """Refuse, before anything starts, an address the server could not listen on."""
    try:
        addresses = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        raise SettingRefused(
            f"--host {host!r}: not an address to listen on ({error.strerror})."
        ) from None
    for family, kind, protocol, _name, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            # As waitress binds: a port left in TIME_WAIT is free, a listening one is not.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as error:
                raise SettingRefused(
                    f"--port {port}: cannot listen on {host}:{port} ({error.strerror})."
                ) from None


@click.command("worker")
@with_appcontext
def worker_command():
    """Deliver webhooks only (no HTTP server), until SIGTERM or SIGINT."""
    log_to_stderr()
    warn_if_private_allowed(current_app.config["WEBHOOKS_ALLOW_PRIVATE"])
    open_database()
    with _startup_errors():
        prepare_schema()
    db.session.remove()
    worker = DeliveryWorker(current_app._get_current_object())

    def request_stop(signum, _frame):
        log.info("%s: finishing the attempts in flight, then stopping", signal.Signals(signum).name)
        worker.stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    log.info("Delivering webhooks")
    worker.run()


@contextmanager
def _startup_errors():
    """A schema out of date or a database that refuses: one line, exit 1."""
    try:
        yield
    except RuntimeError as error:
        raise click.ClickException(str(error)) from None
    except DBAPIError as error:
        raise click.ClickException(database_failure(error)) from None


def _bootstrap() -> None:
    """First run: an account and one key, its secret alone on stdout."""
    try:
        secret = account_service.bootstrap()
        db.session.commit()
    except (IntegrityError, APIError) as error:
        # Another process started at the same moment and made it: its insert
        # met ours (IntegrityError), or it committed between our two reads,
        # "no account yet" and "no account with this email" (a 409).
        db.session.rollback()
        if isinstance(error, APIError) and error.status != 409:
            raise
        return
    if secret:
        click.echo(
            f"First run: created the account {account_service.BOOTSTRAP_EMAIL} and this "
            "READ_WRITE API key (shown once):",
            err=True,
        )
        click.echo(secret)
        sys.stdout.flush()


@click.group("accounts")
def accounts_group():
    """Create and list accounts, and change their plans."""


@accounts_group.command("create")
@click.argument("email")
@click.option("--plan", default="pro", show_default=True, help="pro or free")
@click.option("--until", help="ISO 8601 date-time after which the plan counts as free")
@operator_command
def create_account(email, plan, until):
    """Create an account and print its id."""
    account = account_service.create_account(email, plan, parse_moment(until, "--until"))
    click.echo(account.id)


@accounts_group.command("set-plan")
@click.argument("email")
@click.argument("plan")
@click.option("--until", help="ISO 8601 date-time after which the plan counts as free")
@operator_command
def set_plan(email, plan, until):
    """Change an account's plan (pro or free)."""
    account_service.set_plan(email, plan, parse_moment(until, "--until"))


@accounts_group.command("list")
@operator_command
def list_accounts():
    """One line per account: id, email, plan, plan end."""
    for account in account_service.all_accounts():
        echo_line(
            account.id, account.email, account.plan, format_timestamp(account.plan_until) or "-"
        )


@click.group("keys")
def keys_group():
    """Create, list and revoke API keys."""


@keys_group.command("create")
@click.argument("email")
@click.option("--name", required=True)
@click.option("--scope", default="READ_WRITE", show_default=True, help="READ_ONLY or READ_WRITE")
@click.option("--expires-at", help="ISO 8601 date-time in the future")
@operator_command
def create_key(email, name, scope, expires_at):
    """Create a key and print its secret, alone, on stdout."""
    if scope not in SCOPES:
        raise click.ClickException(f"The scope must be one of: {', '.join(SCOPES)}.")
    name = name.strip()
    if not 1 <= len(name) <= 100 or "\x00" in name:
        raise click.ClickException("The name must be 1 to 100 characters, without U+0000.")
    account = account_service.account_by_email(email)
    key = issue_key(account, name, scope, parse_moment(expires_at, "--expires-at"))
    click.echo(key.secret)


@keys_group.command("list")
@click.argument("email")
@operator_command
def list_keys(email):
    """One line per active or expired key: id, name, scope, status, prefix, expiry."""
    account = account_service.account_by_email(email)
    now = utcnow()
    for key in db.session.scalars(listed_keys(account)):
        expiry = format_timestamp(key.expires_at) or "-"
        echo_line(key.id, key.name, key.scope, key.status(now), key.prefix, expiry)


@keys_group.command("revoke")
@click.argument("key_id")
@operator_command
def revoke(key_id):
    """Revoke a key, as DELETE /keys/:keyId does."""
    revoke_key(key_id)


@click.command("upgrade")
@click.argument("revision", default="head")
@with_appcontext
def upgrade_command(revision):
    """Apply the schema migrations of this version; an existing database is upgraded in place."""
    open_database(create=True)
    try:
        apply_migrations(revision)
    except DBAPIError as error:
        raise click.ClickException(database_failure(error)) from None


@click.group("events")
def events_group():
    """The change feed's events."""


@events_group.command("sweep")
@operator_command
def sweep_events():
    """Delete the events older than MAPAPI_EVENTS_RETENTION_DAYS now.

    `mapapi serve` sweeps by itself every few minutes while it records
    events; this is for a database nobody writes to, or a cron job.
    """
    deleted = 0
    while True:
        batch = event_service.sweep()
        db.session.commit()
        deleted += batch
        if batch < event_service.SWEEP_BATCH:
            break
    click.echo(f"{deleted} events deleted")


@click.command("backup")
@click.argument("path", type=click.Path(dir_okay=False))
@with_appcontext
def backup_command(path):
    """Copy the embedded SQLite database to PATH, consistently, while it serves."""
    open_database()
    try:
        backup_sqlite(path)
    except (BackupError, sqlite3.Error) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"Backed up to {path}", err=True)


#: The operator's commands, on ``mapapi`` and on ``flask --app mapapi`` alike.
COMMANDS = (serve_command, worker_command, accounts_group, keys_group, events_group)


@click.group("db")
def operator_db_group():
    """Apply schema migrations; back up the embedded SQLite database."""


operator_db_group.add_command(upgrade_command)
operator_db_group.add_command(backup_command)


def register_commands(app) -> None:
    """``flask --app mapapi``: the operator's commands beside Flask's own.

    There ``db`` is Flask-Migrate's whole group (writing migrations too),
    with ``db backup`` added.
    """
    for command in COMMANDS:
        app.cli.add_command(command)
    db_group.add_command(backup_command)


def _create_app():
    from . import create_app

    try:
        return create_app()
    except SettingError as error:
        raise SettingRefused(str(error)) from None


class OperatorGroup(click.Group):
    """The ``mapapi`` command: the operator's commands only, on the app factory.

    Flask's development commands (``run``, ``shell``, ``routes``, writing
    migrations) stay behind ``flask --app mapapi``. A mistake on the command
    line is one line on stderr, exit 2, like a bad setting.
    """

    def make_context(self, info_name, args, parent=None, **extra):
        extra.setdefault(
            "obj",
            ScriptInfo(create_app=_create_app, set_debug_flag=False, load_dotenv_defaults=False),
        )
        return super().make_context(info_name, args, parent=parent, **extra)

    def main(self, args=None, prog_name=None, **extra):
        try:
            status = super().main(args, prog_name, standalone_mode=False, **extra)
        except click.UsageError as error:
            click.echo(f"Error: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        except click.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(status if isinstance(status, int) else 0)


@click.group("mapapi", cls=OperatorGroup)
@click.version_option(version("mapapi"), prog_name="mapapi", message="%(prog)s %(version)s")
def main():
    """Serve mapapi, deliver its webhooks, manage its accounts and API keys, serve MCP."""


for _command in (*COMMANDS, operator_db_group):
    main.add_command(_command)
# A client of a running service: it needs no app, no database.
main.add_command(mcp_command)
main.add_command(sync_command)
