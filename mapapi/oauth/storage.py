"""OAuth's tables: clients, the grants people approved, and their codes and
tokens, every secret stored as its SHA-256 only.

A grant belongs to an account (the person who approved it proved it with
one of its keys, which is not kept); its codes and tokens go with it, and
revoking it revokes them all at once (``revoked_at``: every lookup of a
token joins its grant).
"""

import hashlib
import secrets
from datetime import datetime
from urllib.parse import urlsplit

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ..extensions import db
from ..storage.models import Account, new_id
from ..timeutil import utcnow

HASH_LENGTH = 64
#: What an access token and a refresh token start with (an API key: ``mk_live_``).
ACCESS_PREFIX = "mat_"
REFRESH_PREFIX = "mrt_"
READ = "mapapi:read"
WRITE = "mapapi:write"
#: The scopes a grant can hold, as the token endpoint names them.
SCOPES = (READ, WRITE)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def new_secret(prefix: str) -> str:
    """``prefix`` and 43 URL-safe characters (256 random bits)."""
    return prefix + secrets.token_urlsafe(32)


def _pk() -> Mapped[int]:
    return mapped_column(Integer, primary_key=True, autoincrement=True)


class OAuthClient(db.Model):
    """A client known by registering (RFC 7591) or by its metadata document."""

    __tablename__ = "oauth_clients"

    pk: Mapped[int] = _pk()
    #: Ours for a registered client; the document's URL for the other kind.
    client_id: Mapped[str] = mapped_column(Text, unique=True, nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    redirect_uris: Mapped[list] = mapped_column(JSON, nullable=False)
    from_document: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    #: When a grant of it last got a token (a registered client unused for 30 days is forgotten).
    last_used_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow, index=True)


class OAuthGrant(db.Model):
    """One client's access to one account, as the person approved it."""

    __tablename__ = "oauth_grants"

    pk: Mapped[int] = _pk()
    id: Mapped[str] = mapped_column(String(22), unique=True, nullable=False, default=new_id)
    account_id: Mapped[str] = mapped_column(
        String(22), ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False, index=True
    )
    client_pk: Mapped[int] = mapped_column(
        Integer, ForeignKey("oauth_clients.pk", ondelete="CASCADE"), nullable=False, index=True
    )
    scope: Mapped[str] = mapped_column(String(40), nullable=False)
    redirect_uri: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)

    client: Mapped[OAuthClient] = relationship(lazy="raise_on_sql")
    account: Mapped[Account] = relationship(lazy="raise_on_sql")

    @property
    def redirect_host(self) -> str:
        """Where its answers go, as ``host[:port]``."""
        parts = urlsplit(self.redirect_uri)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        return f"{host}:{parts.port}" if parts.port else host


class OAuthCode(db.Model):
    """An authorization code: good once, for 60 s, for its client and redirect URI."""

    __tablename__ = "oauth_codes"

    pk: Mapped[int] = _pk()
    grant_pk: Mapped[int] = mapped_column(
        Integer, ForeignKey("oauth_grants.pk", ondelete="CASCADE"), nullable=False, index=True
    )
    code_hash: Mapped[str] = mapped_column(String(HASH_LENGTH), unique=True, nullable=False)
    #: As the authorization request sent it (None: left out, the client's only one).
    redirect_uri: Mapped[str | None] = mapped_column(Text)
    code_challenge: Mapped[str] = mapped_column(Text, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    used_at: Mapped[datetime | None] = mapped_column(DateTime)


class OAuthToken(db.Model):
    """An access token or a refresh token of a grant."""

    __tablename__ = "oauth_tokens"

    pk: Mapped[int] = _pk()
    grant_pk: Mapped[int] = mapped_column(
        Integer, ForeignKey("oauth_grants.pk", ondelete="CASCADE"), nullable=False, index=True
    )
    kind: Mapped[str] = mapped_column(String(7), nullable=False)  # "access" or "refresh"
    token_hash: Mapped[str] = mapped_column(String(HASH_LENGTH), unique=True, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    #: A refresh token's one use (it rotates); used again, the grant is revoked.
    used_at: Mapped[datetime | None] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)


class OAuthFormToken(db.Model):
    """The approval form's one-time token, bound to the browser that got the
    form (a cookie's hash) and to the authorization request it shows."""

    __tablename__ = "oauth_form_tokens"

    pk: Mapped[int] = _pk()
    token_hash: Mapped[str] = mapped_column(String(HASH_LENGTH), unique=True, nullable=False)
    browser_hash: Mapped[str] = mapped_column(String(HASH_LENGTH), nullable=False)
    request_hash: Mapped[str] = mapped_column(String(HASH_LENGTH), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, index=True)
