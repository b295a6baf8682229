"""The OAuth 2.1 protocol, by Authlib: the authorization code grant with PKCE
(S256 only), the refresh token grant, and client registration (RFC 7591),
for public clients. mapapi gives it its storage and its rules: codes good
once for 60 s, refresh tokens that rotate, reuse that revokes the grant,
every secret stored hashed.
"""

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, InvalidRequestError, grants
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint
from authlib.oauth2.rfc7591.errors import InvalidClientMetadataError
from authlib.oauth2.rfc7636 import CodeChallenge
from flask import current_app
from sqlalchemy import select, update

from ..extensions import db
from ..timeutil import utcnow
from . import grants as grant_rules
from .storage import (
    ACCESS_PREFIX,
    READ,
    REFRESH_PREFIX,
    SCOPES,
    OAuthClient,
    OAuthCode,
    OAuthGrant,
    OAuthToken,
    hash_secret,
    new_secret,
)

CODE_SECONDS = 60
REFRESH_DAYS = 30
#: A registered client whose grants got no token for this long is forgotten.
CLIENT_UNUSED_DAYS = 30
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


def is_loopback_host(host: str | None) -> bool:
    return host is not None and (host in LOOPBACK_HOSTS or host.startswith("127."))


def redirect_uri_problem(uri) -> str | None:
    """Why ``uri`` cannot be a redirect URI (https, or http on loopback), or None."""
    if not isinstance(uri, str) or not uri or any(ord(c) <= 0x20 for c in uri):
        return "must be an https URL or an http loopback URL"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises for a port that is not one
    except ValueError:
        return "must be a valid URL"
    if parts.fragment or not parts.hostname:
        return "must name a host and have no fragment"
    if parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.hostname)):
        return None
    return "must be an https URL or an http loopback URL"


def same_redirect_uri(registered: str, sent: str) -> bool:
    """Equal, except that an http loopback URI's port is not compared (RFC 8252)."""
    if registered == sent:
        return True
    a, b = urlsplit(registered), urlsplit(sent)
    try:
        return (
            a.scheme == b.scheme == "http"
            and is_loopback_host(a.hostname)
            and a.hostname == b.hostname
            and (a.path, a.query) == (b.path, b.query)
            and a.username is None
            and b.username is None
            and b.port is not None
        )
    except ValueError:
        return False


class Client(ClientMixin):
    """A stored client, as Authlib asks about it: public, code and refresh grants."""

    def __init__(self, row: OAuthClient):
        self.row = row

    def get_client_id(self):
        return self.row.client_id

    def get_default_redirect_uri(self):
        uris = self.row.redirect_uris
        return uris[0] if len(uris) == 1 else None

    def get_allowed_scope(self, scope):
        asked = (scope or "").split()
        return " ".join(name for name in SCOPES if name in asked) or READ

    def check_redirect_uri(self, redirect_uri):
        return any(same_redirect_uri(uri, redirect_uri) for uri in self.row.redirect_uris)

    def check_client_secret(self, client_secret):
        return False

    def check_endpoint_auth_method(self, method, endpoint):
        return method == "none"

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type in ("authorization_code", "refresh_token")


@dataclass
class Approval:
    """Who approved, with which scope: Authlib's "user" of a grant."""

    account_id: str
    scope: str
    grant_pk: int | None = None


@dataclass
class CodeRecord:
    grant_pk: int
    account_id: str
    scope: str
    redirect_uri: str | None
    code_challenge: str
    code_challenge_method: str = "S256"

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope


@dataclass
class RefreshRecord:
    grant_pk: int
    account_id: str
    scope: str
    client_id: str

    def check_client(self, client):
        return client.get_client_id() == self.client_id

    def get_scope(self):
        return self.scope

    def is_expired(self):
        return False  # only a current token is found

    def is_revoked(self):
        return False


def query_client(client_id):
    if not isinstance(client_id, str) or not client_id:
        return None
    row = db.session.scalar(select(OAuthClient).where(OAuthClient.client_id == client_id))
    return Client(row) if row is not None else None


class CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]

    def save_authorization_code(self, code, request):
        approval: Approval = request.user
        client = request.client.row
        payload = request.payload
        grant = OAuthGrant(
            account_id=approval.account_id,
            client_pk=client.pk,
            scope=approval.scope,
            redirect_uri=payload.redirect_uri or client.redirect_uris[0],
        )
        db.session.add(grant)
        db.session.flush()
        db.session.add(
            OAuthCode(
                grant_pk=grant.pk,
                code_hash=hash_secret(code),
                redirect_uri=payload.redirect_uri,
                code_challenge=payload.data.get("code_challenge"),
                expires_at=utcnow() + timedelta(seconds=CODE_SECONDS),
            )
        )
        db.session.commit()

    def query_authorization_code(self, code, client):
        """The code's record when it is good; a code used before revokes its grant."""
        now = utcnow()
        row = db.session.execute(
            select(OAuthCode, OAuthGrant)
            .join(OAuthGrant, OAuthGrant.pk == OAuthCode.grant_pk)
            .where(OAuthCode.code_hash == hash_secret(code))
        ).one_or_none()
        if row is None:
            return None
        found, grant = row
        if grant.client_pk != client.row.pk or grant.revoked_at is not None:
            return None
        claimed = db.session.execute(
            update(OAuthCode).where(OAuthCode.pk == found.pk, OAuthCode.used_at.is_(None)).values(used_at=now)
        ).rowcount
        if not claimed:
            grant_rules.revoke(grant, now)  # used twice: every token of the grant goes
            db.session.commit()
            return None
        db.session.commit()
        if found.expires_at <= now:
            return None
        return CodeRecord(grant.pk, grant.account_id, grant.scope, found.redirect_uri, found.code_challenge)

    def delete_authorization_code(self, authorization_code):
        """Nothing: the code was marked used when it was read."""

    def authenticate_user(self, authorization_code):
        return Approval(authorization_code.account_id, authorization_code.scope, authorization_code.grant_pk)


class RefreshGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token):
        """The token's record when it is current; one used before revokes its grant."""
        if not isinstance(refresh_token, str):
            return None
        now = utcnow()
        row = db.session.execute(
            select(OAuthToken, OAuthGrant, OAuthClient.client_id)
            .join(OAuthGrant, OAuthGrant.pk == OAuthToken.grant_pk)
            .join(OAuthClient, OAuthClient.pk == OAuthGrant.client_pk)
            .where(OAuthToken.token_hash == hash_secret(refresh_token), OAuthToken.kind == "refresh")
        ).one_or_none()
        if row is None:
            return None
        token, grant, client_id = row
        if grant.revoked_at is not None or token.expires_at <= now:
            return None
        claimed = db.session.execute(
            update(OAuthToken).where(OAuthToken.pk == token.pk, OAuthToken.used_at.is_(None)).values(used_at=now)
        ).rowcount
        if not claimed:
            grant_rules.revoke(grant, now)  # a rotated token used again
            db.session.commit()
            return None
        db.session.commit()
        return RefreshRecord(grant.pk, grant.account_id, grant.scope, client_id)

    def authenticate_user(self, refresh_token):
        return Approval(refresh_token.account_id, refresh_token.scope, refresh_token.grant_pk)

    def revoke_old_credential(self, refresh_token):
        """Nothing: the token was marked used when it was read."""


def save_token(token: dict, request) -> None:
    """Both tokens of an answer, hashed, under the grant the request is for."""
    approval: Approval = request.user
    now = utcnow()
    rows = [
        OAuthToken(
            grant_pk=approval.grant_pk,
            kind="access",
            token_hash=hash_secret(token["access_token"]),
            expires_at=now + timedelta(seconds=token["expires_in"]),
        )
    ]
    if token.get("refresh_token"):
        rows.append(
            OAuthToken(
                grant_pk=approval.grant_pk,
                kind="refresh",
                token_hash=hash_secret(token["refresh_token"]),
                expires_at=now + timedelta(days=REFRESH_DAYS),
            )
        )
    db.session.add_all(rows)
    db.session.execute(
        update(OAuthClient).where(OAuthClient.pk == request.client.row.pk).values(last_used_at=now)
    )
    db.session.commit()


class Registration(ClientRegistrationEndpoint):
    """``POST /oauth/register``: open to anyone (the view limits how often),
    public clients only; metadata it does not use is ignored."""

    def authenticate_token(self, request):
        return True  # open registration: RFC 7591 section 3

    def extract_client_metadata(self, request):
        data = request.payload.data
        if not isinstance(data, dict):
            raise InvalidRequestError("The body must be a JSON object.")
        uris = data.get("redirect_uris")
        if not isinstance(uris, list) or not uris or len(uris) > 10:
            raise InvalidClientMetadataError("redirect_uris: a list of 1 to 10 URLs is required.")
        for uri in uris:
            problem = redirect_uri_problem(uri)
            if problem is not None:
                raise InvalidRedirectUri(f"redirect_uris: {uri!r} {problem}."[:300])
        name = data.get("client_name")
        name = name.strip()[:100] if isinstance(name, str) and name.strip() else "Unnamed client"
        if "\x00" in name:
            raise InvalidClientMetadataError("client_name: must not contain U+0000.")
        return {
            "redirect_uris": uris,
            "client_name": name,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }

    def generate_client_secret(self, request):
        return None

    def generate_client_info(self, request):
        info = super().generate_client_info(request)
        del info["client_secret"], info["client_secret_expires_at"]
        return info

    def get_server_metadata(self):
        return {}

    def save_client(self, client_info, client_metadata, request):
        now = utcnow()
        forget_unused_clients(now)
        row = OAuthClient(
            client_id=client_info["client_id"],
            name=client_metadata["client_name"],
            redirect_uris=client_metadata["redirect_uris"],
            from_document=False,
            created_at=now,
            last_used_at=now,
        )
        db.session.add(row)
        db.session.commit()
        return Client(row)


class InvalidRedirectUri(InvalidClientMetadataError):
    error = "invalid_redirect_uri"


def forget_unused_clients(now) -> None:
    db.session.execute(
        OAuthClient.__table__.delete().where(
            OAuthClient.from_document.is_(False),
            OAuthClient.last_used_at < now - timedelta(days=CLIENT_UNUSED_DAYS),
        )
    )


class S256Challenge(CodeChallenge):
    """PKCE with S256 only, and required of every authorization request."""

    DEFAULT_CODE_CHALLENGE_METHOD = "S256"
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant, redirect_uri):
        data = grant.request.payload.data
        if not data.get("code_challenge") or data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("A code_challenge with code_challenge_method=S256 is required.")
        super().validate_code_challenge(grant, redirect_uri)


def _access_token(client, grant_type, user, scope):
    return new_secret(ACCESS_PREFIX)


def _refresh_token(client, grant_type, user, scope):
    return new_secret(REFRESH_PREFIX)


def _expires_in(client, grant_type):
    return current_app.config["OAUTH_TOKEN_SECONDS"]


def build_server(app) -> AuthorizationServer:
    server = AuthorizationServer()
    server.init_app(app, query_client=query_client, save_token=save_token)
    server.register_token_generator(
        "default", BearerTokenGenerator(_access_token, _refresh_token, _expires_in)
    )
    server.register_grant(CodeGrant, [S256Challenge(required=True)])
    server.register_grant(RefreshGrant)
    server.register_endpoint(Registration)
    return server
