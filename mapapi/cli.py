"""The ``mapapi`` command: serve the API and manage accounts and keys.

Every failure is one line on stderr and exit status 1; ``keys create``
prints the secret alone on stdout so that ``KEY=$(mapapi keys create ...)``
works.
"""

import logging
import re
import sqlite3
import sys
from functools import wraps

import click
from flask import current_app
from flask.cli import FlaskGroup, with_appcontext
from flask_migrate.cli import db as db_group
from sqlalchemy.exc import DBAPIError, IntegrityError

from . import server
from .config import bootstrap_enabled
from .contract.schemas import SCOPES
from .extensions import db
from .http.errors import APIError
from .mcp.command import mcp_command
from .services import accounts as account_service
from .services.keys import issue_key, listed_keys, revoke_key
from .storage.backup import BackupError, backup_sqlite
from .storage.upgrade import prepare_schema
from .timeutil import format_timestamp, parse_timestamp, utcnow

_SEPARATORS = re.compile(r"[\\\x00-\x1f\x7f-\x9f\u2028\u2029]")


def operator_command(function):
    """Commit on success; turn our errors into one line on stderr and exit 1."""

    @wraps(function)
    @with_appcontext
    def run(*args, **kwargs):
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
    first_line = str(error.orig).strip().partition("\n")[0]
    if _is_missing_table(error):
        return f"The database has no schema ({first_line}): run `mapapi db upgrade` first."
    return f"Database error: {first_line}"


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
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=int)
@click.option("--threads", default=8, show_default=True, type=int)
@with_appcontext
def serve_command(host, port, threads):
    """Run the API under waitress."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = current_app._get_current_object()
    try:
        prepare_schema()
        if bootstrap_enabled(app.config["BOOTSTRAP"]):
            _bootstrap()
    except RuntimeError as error:
        raise click.ClickException(str(error)) from None
    except DBAPIError as error:
        raise click.ClickException(database_failure(error)) from None
    db.session.remove()
    server.serve(app, host=host, port=port, threads=threads)


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


@click.command("backup")
@click.argument("path", type=click.Path(dir_okay=False))
@with_appcontext
def backup_command(path):
    """Copy the embedded SQLite database to PATH, consistently, while it serves."""
    try:
        backup_sqlite(path)
    except (BackupError, sqlite3.Error) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"Backed up to {path}", err=True)


COMMANDS = (serve_command, accounts_group, keys_group)


def register_commands(app) -> None:
    for command in COMMANDS:
        app.cli.add_command(command)
    # Beside Flask-Migrate's `db upgrade`: `mapapi db backup PATH`.
    db_group.add_command(backup_command)


def _create_app():
    from . import create_app

    return create_app()


main = FlaskGroup(
    name="mapapi",
    help="Serve mapapi and manage its accounts and API keys.",
    create_app=_create_app,
    add_default_commands=False,
    load_dotenv=False,
)
# A client of a running service: it needs no app, no database.
main.add_command(mcp_command)
