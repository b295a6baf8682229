"""Accounts, which only the operator makes, and the first-run bootstrap."""

from sqlalchemy import select

from ..extensions import db
from ..http.errors import APIError, conflict, not_found
from ..storage.models import Account
from .keys import issue_key

PLANS = ("pro", "free")
BOOTSTRAP_EMAIL = "local@localhost"


def create_account(email: str, plan: str = "pro", until=None) -> Account:
    email = email.strip()
    if "@" not in email or any(c.isspace() or c == "\x00" for c in email):
        raise APIError(400, "VALIDATION_ERROR", f"Not an email address: {email!r}.")
    _check_plan(plan)
    if db.session.scalar(select(Account.pk).where(Account.email == email)) is not None:
        raise conflict(f"An account with the email {email} already exists.")
    account = Account(email=email, plan=plan, plan_until=until)
    db.session.add(account)
    db.session.flush()
    return account


def account_by_email(email: str) -> Account:
    account = db.session.scalar(select(Account).where(Account.email == email.strip()))
    if account is None:
        raise not_found(f"Account {email}")
    return account


def set_plan(email: str, plan: str, until=None) -> Account:
    _check_plan(plan)
    account = account_by_email(email)
    account.plan, account.plan_until = plan, until
    return account


def all_accounts():
    return db.session.scalars(select(Account).order_by(Account.pk)).all()


def bootstrap() -> str | None:
    """On a database with no accounts: a pro account and the secret of its key."""
    if db.session.scalar(select(Account.pk).limit(1)) is not None:
        return None
    account = create_account(BOOTSTRAP_EMAIL, "pro")
    return issue_key(account, "bootstrap", "READ_WRITE").secret


def _check_plan(plan: str) -> None:
    if plan not in PLANS:
        raise APIError(400, "VALIDATION_ERROR", f"The plan must be one of: {', '.join(PLANS)}.")
