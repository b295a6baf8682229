"""``mapapi keys``: create, list and revoke API keys."""

import click

from ..contract.scopes import SCOPES
from ..extensions import db
from ..services import accounts as account_service
from ..services.keys import issue_key, listed_keys, revoke_key
from ..timeutil import format_timestamp, utcnow
from .common import echo_line, operator_command, parse_moment


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
