"""Issuing and revoking API keys, for the API and the ``mapapi`` command alike."""

from sqlalchemy import func, or_, select

from ..extensions import db
from ..http.auth import generate_secret, hash_secret
from ..http.errors import conflict, not_found, validation_error
from ..storage.models import Account, ApiKey, could_be_id
from ..timeutil import format_timestamp, utcnow

MAX_ACTIVE_KEYS = 10


def bounded_expiry(requested, given: bool, creator_expires_at):
    """The expiry of a key made with a key that expires at ``creator_expires_at``.

    A key that expires cannot make a key that outlives it: left out, the new
    key expires with its maker; null (never) or a later time is refused.
    """
    if creator_expires_at is None:
        return requested
    if not given:
        return creator_expires_at
    if requested is None or requested > creator_expires_at:
        limit = format_timestamp(creator_expires_at)
        raise validation_error(
            "The request is invalid.",
            {"expiresAt": [f"A key that expires cannot make one that outlives it: at most {limit}."]},
        )
    return requested


def issue_key(account: Account, name: str, scope: str, expires_at=None) -> ApiKey:
    """A new key for ``account``, its secret on ``.secret``; at most 10 active.

    The account's row is locked while its keys are counted (SQLite's write
    transactions are serialized anyway), so racing requests cannot pass the
    count together.
    """
    db.session.execute(
        select(Account.pk).where(Account.pk == account.pk).with_for_update(key_share=True)
    )
    now = utcnow()
    active = db.session.scalar(
        select(func.count()).where(
            ApiKey.account_id == account.id,
            ApiKey.revoked_at.is_(None),
            or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > now),
        )
    )
    if active >= MAX_ACTIVE_KEYS:
        raise conflict(f"An account holds at most {MAX_ACTIVE_KEYS} active API keys.")
    secret = generate_secret()
    key = ApiKey(
        account_id=account.id,
        name=name,
        scope=scope,
        expires_at=expires_at,
        secret_hash=hash_secret(secret),
        prefix=secret[:12],
        created_at=now,
    )
    db.session.add(key)
    db.session.flush()
    key.secret = secret
    return key


def listed_keys(account: Account):
    """Active and expired keys (never revoked ones), newest first."""
    return (
        select(ApiKey)
        .where(ApiKey.account_id == account.id, ApiKey.revoked_at.is_(None))
        .order_by(ApiKey.pk.desc())
    )


def revoke_key(key_id: str, account: Account | None = None) -> ApiKey:
    """Revoke key ``key_id`` (of ``account``, when given); revoked ones are NOT_FOUND."""
    statement = select(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
    if account is not None:
        statement = statement.where(ApiKey.account_id == account.id)
    key = could_be_id(key_id) and db.session.scalar(statement.with_for_update())
    if not key:
        raise not_found("API key")
    key.revoked_at = utcnow()
    return key
