"""What every /ogcapi answer is made of: absolute links, media types, the
``f`` parameter, and a Feature's ETag."""

from urllib.parse import urlencode

import orjson
from flask import current_app, request

from ..http.errors import validation_error
from ..http.etags import etag_of
from ..http.public_url import base_url

JSON = "application/json"
GEOJSON = "application/geo+json"
SCHEMA_JSON = "application/schema+json"
OPENAPI_30 = "application/vnd.oai.openapi+json;version=3.0"
PREFIX = "/ogcapi"


def url(path: str = "", query: list[tuple[str, str]] | None = None) -> str:
    """The absolute URL of ``path`` under /ogcapi, with ``query`` if any."""
    address = base_url() + PREFIX + path
    return f"{address}?{urlencode(query)}" if query else address


def link(href: str, rel: str, media_type: str, title: str | None = None) -> dict:
    found = {"href": href, "rel": rel, "type": media_type}
    if title:
        found["title"] = title
    return found


def check_format(*accepted: str) -> None:
    """``f`` names one of ``accepted`` (or is absent); another is VALIDATION_ERROR."""
    given = request.args.getlist("f")
    if any(value not in accepted for value in given):
        raise validation_error(
            "The parameter f is invalid.", {"f": [f"Must be {' or '.join(accepted)}."]}
        )


def answer(document, media_type: str = JSON, status: int = 200, headers=None):
    """``document`` (a dict, or JSON text already written) as the body."""
    body = document if isinstance(document, bytes) else orjson.dumps(document)
    response = current_app.response_class(body, status=status, mimetype=media_type)
    response.headers.update(headers or {})
    return response


def feature_etag(feature: str) -> str:
    """A Feature's ETag, quoted: the hash of its JSON text as the database writes it."""
    return f'"{etag_of(feature.encode())}"'


def with_links(feature: str, links: list[dict]) -> bytes:
    """A Feature's JSON text with ``links`` added as its last member."""
    return feature.encode()[:-1] + b',"links":' + orjson.dumps(links) + b"}"
