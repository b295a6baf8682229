"""Where OAuth is offered, and the two documents that say how to use it:
the protected resource's (RFC 9728) and the authorization server's (RFC 8414).

Every URL is built on the service's address as clients see it
(``http.public_url``). OAuth is offered on ``https`` only, and on plain
``http`` when the address is a loopback one: judged by ``MAPAPI_PUBLIC_URL``
when it is set, else by the client's own address as the service reads it
(a ``Host: localhost`` header proves nothing).
"""

import ipaddress
from urllib.parse import urlsplit

from flask import current_app, request

from ..http.public_url import base_url
from .storage import SCOPES

PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource/mcp"
AUTHORIZATION_SERVER_PATH = "/.well-known/oauth-authorization-server"


def _is_loopback_address(address: str | None) -> bool:
    try:
        return ipaddress.ip_address((address or "").strip("[]").partition("%")[0]).is_loopback
    except ValueError:
        return False


def oauth_base() -> str | None:
    """The base of OAuth's URLs for this request, or None where OAuth is refused."""
    base = base_url()
    scheme = base.partition("://")[0].lower()
    if scheme == "https":
        return base
    if current_app.config["PUBLIC_URL"]:
        host = urlsplit(base).hostname
        loopback = host == "localhost" or _is_loopback_address(host)
    else:
        loopback = _is_loopback_address(request.remote_addr)
    return base if loopback else None


def resource_metadata_url() -> str | None:
    base = oauth_base()
    return None if base is None else base + PROTECTED_RESOURCE_PATH


def protected_resource(base: str) -> dict:
    return {
        "resource": base + "/mcp",
        "authorization_servers": [base],
        "scopes_supported": list(SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "mapapi",
    }


def authorization_server(base: str) -> dict:
    return {
        "issuer": base,
        "authorization_endpoint": base + "/oauth/authorize",
        "token_endpoint": base + "/oauth/token",
        "registration_endpoint": base + "/oauth/register",
        "scopes_supported": list(SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": True,
    }
