"""``mapapi grants``: the OAuth grants of an account, listed and revoked."""

import click

from ..extensions import db
from ..oauth.grants import listed_grants, revoke_grant
from ..services import accounts as account_service
from ..timeutil import format_timestamp
from .common import echo_line, operator_command


@click.group("grants")
def grants_group():
    """List and revoke the assistants and apps connected with OAuth."""


@grants_group.command("list")
@click.argument("email")
@operator_command
def list_grants(email):
    """One line per grant: id, client name, client id, redirect host, scope, created, last used."""
    account = account_service.account_by_email(email)
    for grant in db.session.scalars(listed_grants(account.id)):
        echo_line(
            grant.id, grant.client.name, grant.client.client_id, grant.redirect_host, grant.scope,
            format_timestamp(grant.created_at), format_timestamp(grant.last_used_at) or "-",
        )  # fmt: skip


@grants_group.command("revoke")
@click.argument("grant_id")
@operator_command
def revoke(grant_id):
    """Revoke a grant and every token it issued, as DELETE /grants/:grantId does."""
    revoke_grant(grant_id)
