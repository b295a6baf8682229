"""API keys: secrets and their hashes, and the checks every API request passes.

Authentication is split in two hooks so that the rate limiter can run
between them, as the contract's order wants: ``identify`` resolves the key
and records the first check that fails without raising; the limiter then
counts the request against the account (or the client address); ``enforce``
finally raises the recorded 401 or 403.
"""

import hashlib
import secrets
from datetime import timedelta

from flask import g, request
from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.orm import joinedload
from sqlalchemy.orm.attributes import set_committed_value

from .database import WRITE_METHODS
from .errors import APIError
from .extensions import db
from .models import ApiKey
from .timeutil import utcnow

API_PREFIX = "/api/v1"
#: The one path under the API that needs no key: its description.
OPENAPI_PATH = API_PREFIX + "/openapi.json"
SECRET_PREFIX = "mk_live_"  # noqa: S105 - the public prefix of every secret, not one
LAST_USED_RESOLUTION = timedelta(minutes=1)

# Built once: every API request runs it.
_KEY_BY_HASH = (
    select(ApiKey)
    .options(joinedload(ApiKey.account, innerjoin=True))
    .where(ApiKey.secret_hash == bindparam("secret_hash"))
)


def generate_secret() -> str:
    """``mk_live_`` and 43 URL-safe characters (256 random bits)."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def is_api_request() -> bool:
    path = request.path
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


def identify() -> None:
    """Resolve the request's key into ``g`` and note the first failing check."""
    g.api_key = g.account = g.auth_error = None
    if not is_api_request() or request.path == OPENAPI_PATH:
        return
    header = request.headers.get("Authorization", "").strip()
    if not header:
        g.auth_error = APIError(401, "MISSING_API_KEY", "An API key is required.")
        return
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        g.auth_error = _invalid_key()
        return
    key = db.session.scalar(_KEY_BY_HASH, {"secret_hash": hash_secret(token)})
    now = utcnow()
    if key is None or key.revoked_at is not None:
        g.auth_error = _invalid_key()
        return
    if key.status(now) == "expired":
        g.auth_error = APIError(401, "API_KEY_EXPIRED", "This API key has expired.")
        return
    g.api_key, g.account = key, key.account
    _record_use(key, now)
    if not key.account.has_pro(now):
        g.auth_error = APIError(
            403, "PRO_SUBSCRIPTION_REQUIRED", "The API needs an active Pro plan."
        )
    elif key.scope == "READ_ONLY" and request.method in WRITE_METHODS:
        g.auth_error = APIError(403, "INSUFFICIENT_SCOPE", "This API key is read-only.")


def enforce() -> None:
    """Refuse the request with the check ``identify`` found failing."""
    if g.get("auth_error") is not None:
        raise g.auth_error


def _invalid_key() -> APIError:
    return APIError(401, "INVALID_API_KEY", "The API key is not valid.")


def _record_use(key: ApiKey, now) -> None:
    """Write ``lastUsedAt`` at most once a minute, so reads stay reads.

    The write gets a short transaction of its own that takes the write lock
    up front (SQLite), instead of upgrading the request's read transaction.
    """
    if key.last_used_at is not None and now - key.last_used_at < LAST_USED_RESOLUTION:
        return
    db.session.commit()
    db.session.connection(execution_options={"write_lock": True})
    db.session.execute(
        update(ApiKey)
        .where(
            ApiKey.pk == key.pk,
            or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at < now - LAST_USED_RESOLUTION),
        )
        .values(last_used_at=now)
    )
    db.session.commit()
    set_committed_value(key, "last_used_at", now)
