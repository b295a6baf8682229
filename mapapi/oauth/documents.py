"""Client ID Metadata Documents: a client known by an ``https`` URL whose
JSON names that same ``client_id`` and its ``redirect_uris``.

The document is fetched under the webhooks' address rules
(``delivery.addresses``: no loopback or private address unless
``MAPAPI_WEBHOOKS_ALLOW_PRIVATE``, the very address checked is the one
connected to), within 5 s, 64 KiB at most, and a redirect is not followed.
"""

import asyncio
import json
import ssl
from urllib.parse import urlsplit

from flask import current_app
from sqlalchemy import select

from ..delivery.addresses import AddressRefused, destination
from ..extensions import db
from ..timeutil import utcnow
from .server import redirect_uri_problem
from .storage import OAuthClient

FETCH_SECONDS = 5.0
MAX_BYTES = 64 * 1024
USER_AGENT = "mapapi-oauth/1"
_tls = ssl.create_default_context()


class DocumentRefused(ValueError):
    """Why the client's metadata document cannot be used (shown on the page)."""


def is_document_id(client_id: str) -> bool:
    """Whether ``client_id`` is a URL (only an https one can be used)."""
    return client_id.startswith(("https://", "http://"))


def client_from_document(client_id: str) -> OAuthClient:
    """The client the document at ``client_id`` describes, fetched now and stored."""
    parts = urlsplit(client_id)
    if parts.scheme != "https" or not parts.hostname or parts.fragment or parts.path in ("", "/"):
        raise DocumentRefused("A client_id URL must be an https URL, with a path and no fragment.")
    allow_private = current_app.config["WEBHOOKS_ALLOW_PRIVATE"]
    tls = current_app.extensions.get("mapapi.oauth.tls", _tls)
    try:
        body = asyncio.run(_fetch(client_id, allow_private, tls))
        document = json.loads(body.decode("utf-8"))
    except AddressRefused as refused:
        raise DocumentRefused(f"The client's metadata document cannot be fetched: {refused}") from None
    except (OSError, TimeoutError, ssl.SSLError, UnicodeDecodeError, ValueError) as failure:
        reason = str(failure) if isinstance(failure, DocumentRefused) else "it could not be read as JSON over https"
        raise DocumentRefused(f"The client's metadata document cannot be used: {reason}.") from None
    if not isinstance(document, dict) or document.get("client_id") != client_id:
        raise DocumentRefused("The client's metadata document does not name this client_id.")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or any(redirect_uri_problem(uri) for uri in uris):
        raise DocumentRefused("The client's metadata document has no valid redirect_uris.")
    name = document.get("client_name")
    name = name.strip()[:100] if isinstance(name, str) and name.strip() else parts.hostname
    row = db.session.scalar(select(OAuthClient).where(OAuthClient.client_id == client_id))
    if row is None:
        row = OAuthClient(client_id=client_id, from_document=True, created_at=utcnow(), last_used_at=utcnow())
        db.session.add(row)
    row.name, row.redirect_uris = name.replace("\x00", ""), uris
    db.session.commit()
    return row


async def _fetch(url: str, allow_private: bool, tls: ssl.SSLContext) -> bytes:
    async with asyncio.timeout(FETCH_SECONDS):
        place = await destination(url, allow_private=allow_private)
        target = place.target
        reader, writer = await asyncio.open_connection(
            place.address, target.port, ssl=tls, server_hostname=target.host
        )
        try:
            request = (
                f"GET {target.path} HTTP/1.0\r\nHost: {target.host_header}\r\nUser-Agent: {USER_AGENT}\r\n"
                "Accept: application/json\r\nConnection: close\r\n\r\n"
            )
            writer.write(request.encode("ascii"))
            await writer.drain()
            answer = b""
            while len(answer) <= MAX_BYTES + 8192:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                answer += chunk
        finally:
            writer.transport.abort()
    head, separator, body = answer.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    if not separator or len(status_line) < 2 or status_line[1] != b"200":
        raise DocumentRefused("it did not answer 200 (redirects are not followed)")
    if len(body) > MAX_BYTES:
        raise DocumentRefused("it is larger than 64 KiB")
    return body
