"""``mapapi accounts``: create and list accounts, change their plans."""

import click

from ..services import accounts as account_service
from ..timeutil import format_timestamp
from .common import echo_line, operator_command, parse_moment


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
