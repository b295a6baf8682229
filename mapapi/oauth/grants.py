"""Grants as the account sees them: listed, revoked, and an access token
resolved into the grant it acts for."""

from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.orm import joinedload

from ..extensions import db
from ..http.errors import not_found
from ..storage.driver import DriverQuery
from ..storage.models import Account, could_be_id
from ..timeutil import utcnow
from .storage import WRITE, OAuthCode, OAuthGrant, OAuthToken

LAST_USED_RESOLUTION = timedelta(minutes=1)


class Access(NamedTuple):
    """What an access token acts as: its grant's account, with its scope."""

    grant_pk: int
    account_pk: int
    account_id: str
    plan: str
    plan_until: datetime | None
    writes: bool
    expires_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None


_tokens, _grants, _accounts = OAuthToken.__table__, OAuthGrant.__table__, Account.__table__
# Built once, in Core, and run on the driver (storage.driver), as an API
# key's lookup is: every /mcp request with a token runs it.
_ACCESS = DriverQuery(
    select(
        _grants.c.pk.label("grant_pk"),
        _accounts.c.pk.label("account_pk"),
        _accounts.c.id.label("account_id"),
        _accounts.c.plan,
        _accounts.c.plan_until,
        _grants.c.scope,
        _tokens.c.expires_at,
        _grants.c.revoked_at,
        _grants.c.last_used_at,
    )
    .join_from(_tokens, _grants, _tokens.c.grant_pk == _grants.c.pk)
    .join(_accounts, _accounts.c.id == _grants.c.account_id)
    .where(_tokens.c.token_hash == bindparam("token_hash"), _tokens.c.kind == bindparam("kind"))
)


def access_of(token_hash: str) -> Access | None:
    """The grant an access token (by its hash) acts for, if the token exists."""
    row = _ACCESS.one_or_none(db.engine, {"token_hash": token_hash, "kind": "access"})
    if row is None:
        return None
    return Access(
        row.grant_pk, row.account_pk, row.account_id, row.plan, row.plan_until,
        WRITE in row.scope.split(), row.expires_at, row.revoked_at, row.last_used_at,
    )  # fmt: skip


def use_is_stale(access: Access, now: datetime) -> bool:
    """Whether the grant's ``lastUsedAt`` is due again (it is written at most once a minute)."""
    return access.last_used_at is None or now - access.last_used_at >= LAST_USED_RESOLUTION


def record_use(access: Access, now: datetime) -> None:
    db.session.execute(update(OAuthGrant).where(OAuthGrant.pk == access.grant_pk).values(last_used_at=now))


def revoke(grant: OAuthGrant, now: datetime) -> None:
    """The grant and every code and token it issued, at once (the caller commits)."""
    db.session.execute(
        update(OAuthGrant).where(OAuthGrant.pk == grant.pk, OAuthGrant.revoked_at.is_(None)).values(revoked_at=now)
    )
    db.session.execute(delete(OAuthToken).where(OAuthToken.grant_pk == grant.pk))
    db.session.execute(delete(OAuthCode).where(OAuthCode.grant_pk == grant.pk))


def listed_grants(account_id: str):
    """The account's grants not revoked, oldest first, each with its client."""
    return (
        select(OAuthGrant)
        .options(joinedload(OAuthGrant.client))
        .where(OAuthGrant.account_id == account_id, OAuthGrant.revoked_at.is_(None))
        .order_by(OAuthGrant.pk)
    )


def grant_of(grant_id: str, account_id: str | None = None) -> OAuthGrant:
    """The grant ``grant_id`` (of ``account_id`` when given), not revoked; NOT_FOUND otherwise."""
    if not could_be_id(grant_id):
        raise not_found("Grant")
    query = select(OAuthGrant).where(OAuthGrant.id == grant_id, OAuthGrant.revoked_at.is_(None))
    if account_id is not None:
        query = query.where(OAuthGrant.account_id == account_id)
    grant = db.session.scalar(query.with_for_update())
    if grant is None:
        raise not_found("Grant")
    return grant


def revoke_grant(grant_id: str, account_id: str | None = None) -> OAuthGrant:
    """Revoke a grant (the caller commits)."""
    grant = grant_of(grant_id, account_id)
    revoke(grant, utcnow())
    return grant
