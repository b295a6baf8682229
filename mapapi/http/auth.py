"""API keys: secrets and their hashes, and the checks every API request passes.

Authentication is split in two hooks so that the rate limiter can run
between them, as the contract's order wants: ``identify`` resolves the key
and records the first check that fails without raising; the limiter then
counts the request against the account (or the client address); ``enforce``
finally raises the recorded 401 or 403.
"""

import binascii
import hashlib
import secrets
from datetime import datetime, timedelta
from typing import NamedTuple

from flask import g, request
from sqlalchemy import bindparam, or_, select, update

from ..extensions import db
from ..oauth import grants as oauth_grants
from ..oauth.discovery import resource_metadata_url
from ..oauth.storage import ACCESS_PREFIX
from ..services.ownership import remember_map, with_map
from ..storage.database import IF_FREE, WRITE_METHODS, WriterBusy
from ..storage.driver import DriverQuery
from ..storage.models import Account, ApiKey, could_be_id, has_expired, has_pro
from ..timeutil import utcnow
from .errors import APIError
from .refused_keys import refused_keys

API_PREFIX = "/api/v1"
MCP_PATH = "/mcp"
#: The WSGI environ's entry set on a tool call's API request, made in-process
#: for ``/mcp``: where an OAuth access token is good (a client cannot set it).
VIA_MCP = "mapapi.via_mcp"
#: The one path under the API that needs no key: its description.
OPENAPI_PATH = API_PREFIX + "/openapi.json"
SECRET_PREFIX = "mk_live_"  # noqa: S105 - the public prefix of every secret, not one
#: OGC API - Features (contract section 14): keys as GIS tools send them.
OGC_PREFIX = "/ogcapi"
#: The paths under it that need no key: landing page, conformance, API definition.
OGC_PUBLIC_PATHS = frozenset(
    {OGC_PREFIX, OGC_PREFIX + "/", OGC_PREFIX + "/conformance", OGC_PREFIX + "/api"}
)
LAST_USED_RESOLUTION = timedelta(minutes=1)
#: RFC 6750: what a 401 asks for; ``error="invalid_token"`` when a key was sent but is bad.
CHALLENGE = 'Bearer realm="mapapi"'
SEND_A_KEY = "`Authorization: Bearer <key>`"
#: What a 401 for the key that was sent says, by its code.
KEY_REFUSALS = {
    "INVALID_API_KEY": "The API key is not valid (malformed, unknown or revoked)",
    "API_KEY_EXPIRED": "This API key has expired",
}


class Caller(NamedTuple):
    """The account whose key made the request: what the views need of it."""

    pk: int
    id: str
    #: When the request's key expires (None: never); a key it makes may not outlive it.
    key_expires_at: datetime | None = None
    #: The key's scope (``READ_ONLY`` or ``READ_WRITE``): what /ogcapi's ``Allow`` lists.
    scope: str | None = None


# Built once, in Core, and run on the driver (storage.driver): every API
# request runs it.
_keys, _accounts = ApiKey.__table__, Account.__table__
_KEY_COLUMNS = (
    select(
        _keys.c.pk,
        _keys.c.scope,
        _keys.c.expires_at,
        _keys.c.revoked_at,
        _keys.c.last_used_at,
        _accounts.c.pk.label("account_pk"),
        _accounts.c.id.label("account_id"),
        _accounts.c.plan,
        _accounts.c.plan_until,
    )
    .join_from(_keys, _accounts, _keys.c.account_id == _accounts.c.id)
    .where(_keys.c.secret_hash == bindparam("secret_hash"))
)
_KEY_BY_HASH = DriverQuery(_KEY_COLUMNS)
# GET /maps/<map_id> reads the caller's map with the key, and answers from
# that one statement's snapshot (services.ownership remember_map, read_map).
_KEY_AND_MAP = DriverQuery(with_map(_KEY_COLUMNS, _accounts.c.id))
#: The one view that answers from the map its checks read.
MAP_READ_ENDPOINT = "maps.get_map"
# The key's row unless another transaction has it locked (SKIP LOCKED;
# SQLite has no row locks, and SQLAlchemy writes no FOR UPDATE there).
_RECORD_USE = (
    update(_keys)
    .where(
        _keys.c.pk.in_(
            select(_keys.c.pk)
            .where(
                _keys.c.pk == bindparam("key_pk"),
                or_(
                    _keys.c.last_used_at.is_(None),
                    _keys.c.last_used_at < bindparam("stale"),
                ),
            )
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
    )
    .values(last_used_at=bindparam("now"))
)


def generate_secret() -> str:
    """``mk_live_`` and 43 URL-safe characters (256 random bits)."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def is_api_request() -> bool:
    return _is_api_path(request.path)


def _is_api_path(path: str) -> bool:
    return path == API_PREFIX or path.startswith(API_PREFIX + "/") or is_ogc_path(path)


def is_ogc_path(path: str) -> bool:
    return path == OGC_PREFIX or path.startswith(OGC_PREFIX + "/")


def identify() -> None:
    """Resolve the request's key into ``g`` and note the first failing check."""
    g.account = g.auth_error = None
    current = request._get_current_object()  # one context lookup, not one per use
    if (
        not _is_api_path(current.path)
        or current.path == OPENAPI_PATH
        or current.path in OGC_PUBLIC_PATHS
    ):
        return
    check_key(current, writes=current.method in WRITE_METHODS)


def check_key(current, *, writes: bool) -> None:
    """Resolve the key of the request ``current`` into ``g.account``, or note
    in ``g.auth_error`` why it is refused (401, then plan, then scope:
    ``writes`` says whether the request writes, which a READ_ONLY key may not).

    On ``/mcp`` (and a tool call's API request) an OAuth access token is
    taken as a key of its grant's account with the grant's scope; anywhere
    else it is an unknown key.
    """
    g.via_mcp = via_mcp = current.path == MCP_PATH or VIA_MCP in current.environ
    header = current.headers.get("Authorization", "").strip()
    if not header:
        g.auth_error = _unauthorized("MISSING_API_KEY", f"An API key is required: send it as {SEND_A_KEY}.")
        return
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() == "basic" and is_ogc_path(current.path):
        scheme, token = "bearer", basic_key(token)
    if scheme.lower() != "bearer" or not token:
        g.auth_error = _refused_key("INVALID_API_KEY")
        return
    secret_hash = hash_secret(token)
    if token.startswith(ACCESS_PREFIX):
        _check_access_token(secret_hash, writes=writes, good_here=via_mcp)
        return
    refused = refused_keys()
    code = refused.code(secret_hash)
    if code is not None:
        g.auth_error = _refused_key(code)
        return
    map_id = _path_map_id(current)
    key = (_KEY_AND_MAP if map_id else _KEY_BY_HASH).one_or_none(
        db.engine, {"secret_hash": secret_hash, "map_id": map_id}
    )
    now = utcnow()
    if key is None or key.revoked_at is not None:
        code = "INVALID_API_KEY"
    elif has_expired(key.expires_at, now):
        code = "API_KEY_EXPIRED"
    if code is not None:
        refused.add(secret_hash, code)  # for good: see http.refused_keys
        g.auth_error = _refused_key(code)
        return
    g.account = Caller(key.account_pk, key.account_id, key.expires_at, key.scope)
    if map_id:
        remember_map(map_id, key)
    _record_use(key, now)
    if not has_pro(key.plan, key.plan_until, now):
        g.auth_error = APIError(
            403, "PRO_SUBSCRIPTION_REQUIRED", "The API needs an active Pro plan."
        )
    elif key.scope == "READ_ONLY" and writes:
        g.auth_error = APIError(403, "INSUFFICIENT_SCOPE", "This API key is read-only.")


def _check_access_token(token_hash: str, *, writes: bool, good_here: bool) -> None:
    """``check_key`` for an OAuth access token (good on ``/mcp`` only)."""
    access = oauth_grants.access_of(token_hash) if good_here else None
    now = utcnow()
    if access is None or access.revoked_at is not None or access.expires_at <= now:
        g.auth_error = _refused_key("INVALID_API_KEY")
        return
    g.account = Caller(access.account_pk, access.account_id, None)
    g.grant_writes = access.writes
    if oauth_grants.use_is_stale(access, now):
        try:  # as a key's lastUsedAt: never waits for another writer
            db.session.connection(execution_options={"write_lock": IF_FREE})
            oauth_grants.record_use(access, now)
            db.session.commit()
        except WriterBusy:
            db.session.rollback()
    if not has_pro(access.plan, access.plan_until, now):
        g.auth_error = APIError(403, "PRO_SUBSCRIPTION_REQUIRED", "The API needs an active Pro plan.")
    elif writes and not access.writes:
        g.auth_error = APIError(403, "INSUFFICIENT_SCOPE", "This access token may only read.")


def key_holder(secret: str) -> tuple[Caller, str]:
    """The account and scope of the API key ``secret``, checked as the API
    checks a key (unknown or revoked, expired, plan); raises the refusal."""
    secret = secret.strip()
    key = None
    if secret.startswith(SECRET_PREFIX):
        key = _KEY_BY_HASH.one_or_none(db.engine, {"secret_hash": hash_secret(secret), "map_id": None})
    now = utcnow()
    if key is None or key.revoked_at is not None:
        raise _refused_key("INVALID_API_KEY")
    if has_expired(key.expires_at, now):
        raise _refused_key("API_KEY_EXPIRED")
    if not has_pro(key.plan, key.plan_until, now):
        raise APIError(403, "PRO_SUBSCRIPTION_REQUIRED", "The API needs an active Pro plan.")
    return Caller(key.account_pk, key.account_id, key.expires_at), key.scope


def refusal() -> APIError | None:
    """The refusal of the first check ``identify`` found failing, if any."""
    return g.get("auth_error")


def basic_key(credentials: str) -> str:
    """The key in HTTP Basic ``credentials``: GIS tools put it as the user
    name or as the password, the other half anything or empty. The half that
    looks like a key wins; else the user name, if any; "" when unreadable."""
    try:
        decoded = binascii.a2b_base64(credentials.encode("ascii"), strict_mode=True)
        user, _, password = decoded.decode("utf-8").partition(":")
    except (binascii.Error, UnicodeError, ValueError):
        return ""
    for half in (user, password):
        if half.startswith(SECRET_PREFIX):
            return half
    return user or password


def _path_map_id(current) -> str | None:
    """The map of a ``GET /maps/<map_id>``, when it can be an id."""
    if current.endpoint != MAP_READ_ENDPOINT:
        return None
    map_id = current.view_args.get("map_id")
    return map_id if could_be_id(map_id) else None


def _refused_key(code: str) -> APIError:
    return _unauthorized(code, f"{KEY_REFUSALS[code]}: send a current key as {SEND_A_KEY}.")


def _unauthorized(code: str, message: str) -> APIError:
    challenge = CHALLENGE
    if g.get("via_mcp"):
        metadata = resource_metadata_url()
        if metadata is not None:
            challenge += f', resource_metadata="{metadata}"'
    if code != "MISSING_API_KEY":
        challenge += ', error="invalid_token"'
    if is_ogc_path(request.path):  # GIS tools send keys by Basic authentication too
        challenge += ', Basic realm="mapapi"'
    return APIError(401, code, message, headers={"WWW-Authenticate": challenge})


def _record_use(key, now) -> None:
    """Write ``lastUsedAt`` at most once a minute, so reads stay reads.

    The write gets a short transaction of its own that takes the write lock
    up front (SQLite). It never waits: while another transaction holds
    SQLite's write lock, or the key's row (PostgreSQL), it is left for a
    later request, since the request may yet be refused, and a refusal
    waits for no writer.
    """
    if key.last_used_at is not None and now - key.last_used_at < LAST_USED_RESOLUTION:
        return
    try:
        db.session.connection(execution_options={"write_lock": IF_FREE})
        db.session.execute(
            _RECORD_USE,
            {"key_pk": key.pk, "now": now, "stale": now - LAST_USED_RESOLUTION},
        )
        db.session.commit()
    except WriterBusy:
        db.session.rollback()
