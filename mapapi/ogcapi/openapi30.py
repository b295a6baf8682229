"""The OpenAPI 3.0 document of /ogcapi, as GDAL and the OGC test suite read it:
``servers[0]`` is /ogcapi, paths relative to it, the items' parameters
with ``limit``'s maximum."""

from .answers import GEOJSON, JSON, SCHEMA_JSON, url
from .queries import DEFAULT_LIMIT, MAX_LIMIT

_ERROR = {"$ref": "#/components/responses/Error"}
_COLLECTION_ID = {
    "name": "collectionId",
    "in": "path",
    "required": True,
    "description": "A map's id.",
    "schema": {"type": "string"},
}
_FEATURE_ID = {
    "name": "featureId",
    "in": "path",
    "required": True,
    "description": "A location's id.",
    "schema": {"type": "string"},
}


def _query(name: str, description: str, schema: dict | None = None, **extra) -> dict:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema or {"type": "string"},
        **extra,
    }


_F = _query(
    "f",
    "The only format: JSON (GeoJSON for features).",
    {"type": "string", "enum": ["json"]},
)
_ITEMS_PARAMETERS = [
    _COLLECTION_ID,
    _query(
        "limit",
        f"Features a page, 1..{MAX_LIMIT}; a larger number is read as {MAX_LIMIT}.",
        {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "default": DEFAULT_LIMIT,
        },
        style="form",
        explode=False,
    ),
    _query(
        "bbox",
        "minLng,minLat,maxLng,maxLat (CRS84; minLng > maxLng crosses the antimeridian), "
        "or 6 numbers with heights (ignored).",
        {"type": "array", "minItems": 4, "maxItems": 6, "items": {"type": "number"}},
        style="form",
        explode=False,
    ),
    _query(
        "datetime", "updatedAt: an instant, or an interval a/b (`..` or empty: open)."
    ),
    _query(
        "q", "Lower-cased, a substring of the lower-cased name, description or address."
    ),
    _query("categoryId", "Locations in this category."),
    _query(
        "tagId",
        "Locations carrying every given tag (up to 10 times).",
        {"type": "array", "items": {"type": "string"}},
        style="form",
        explode=True,
    ),
    _query("layerId", "Locations on this layer."),
    _query(
        "externalId",
        "Locations with this externalId (up to 100 times, matching any).",
        {"type": "array", "items": {"type": "string"}},
        style="form",
        explode=True,
    ),
    _query("name", "Equal to this name (exact, case-sensitive)."),
    _query("description", "Equal to this description (exact, case-sensitive)."),
    _query("address", "Equal to this address (exact, case-sensitive)."),
    _query(
        "filter",
        "A CQL2 filter on the queryables (Basic CQL2, LIKE, BETWEEN, IN, S_INTERSECTS).",
    ),
    _query(
        "filter-lang",
        "The filter's language.",
        {"type": "string", "enum": ["cql2-text", "cql2-json"], "default": "cql2-text"},
    ),
    _query("cursor", "Where the next page starts: only as the `next` link writes it."),
    _query("f", "JSON (GeoJSON).", {"type": "string", "enum": ["json", "geojson"]}),
]


def _get(summary: str, media_type: str, parameters=(), *, etag: bool = False) -> dict:
    ok = {
        "description": summary,
        "content": {media_type: {"schema": {"type": "object"}}},
    }
    if etag:
        ok["headers"] = {"ETag": {"schema": {"type": "string"}}}
    return {
        "summary": summary,
        "parameters": list(parameters),
        "responses": {"200": ok, "default": _ERROR},
    }


def _write(summary: str, status: str, media_types: tuple[str, ...], parameters) -> dict:
    operation = {
        "summary": summary,
        "parameters": list(parameters),
        "responses": {status: {"description": summary}, "default": _ERROR},
    }
    if media_types:
        operation["requestBody"] = {
            "required": True,
            "content": {
                media_type: {"schema": {"type": "object"}} for media_type in media_types
            },
        }
    return operation


_IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": "The ETag last read: the change is made only if it is still current.",
    "schema": {"type": "string"},
}
_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "A retried POST with the same key runs once.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
}
_OPTIONS = {
    "summary": "The methods this key may use here (Allow).",
    "parameters": [],
    "responses": {"204": {"description": "Allow lists them."}, "default": _ERROR},
}


def build_document() -> dict:
    """The document, with ``servers[0]`` this service's /ogcapi."""
    item = [_COLLECTION_ID, _FEATURE_ID]
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "mapapi: OGC API - Features",
            "version": "1.0.0",
            "description": "Each map of the key's account is a collection, each location a Feature.",
        },
        "servers": [{"url": url()}],
        "security": [{"bearer": []}, {"basic": []}],
        "paths": {
            "/": {"get": {**_get("Landing page", JSON, [_F]), "security": []}},
            "/conformance": {
                "get": {**_get("Conformance classes", JSON, [_F]), "security": []}
            },
            "/api": {"get": {**_get("This document", JSON), "security": []}},
            "/collections": {"get": _get("The account's maps", JSON, [_F])},
            "/collections/{collectionId}": {
                "get": _get("A map", JSON, [_COLLECTION_ID, _F])
            },
            "/collections/{collectionId}/queryables": {
                "get": _get("What a filter may name", SCHEMA_JSON, [_COLLECTION_ID, _F])
            },
            "/collections/{collectionId}/items": {
                "get": _get(
                    "A page of the map's locations", GEOJSON, _ITEMS_PARAMETERS
                ),
                "post": _write(
                    "Create a location from a Feature",
                    "201",
                    (GEOJSON, JSON),
                    [_COLLECTION_ID, _IDEMPOTENCY_KEY],
                ),
                "options": {**_OPTIONS, "parameters": [_COLLECTION_ID]},
            },
            "/collections/{collectionId}/items/{featureId}": {
                "get": _get("A location", GEOJSON, [*item, _F], etag=True),
                "put": _write(
                    "Replace a location", "200", (GEOJSON, JSON), [*item, _IF_MATCH]
                ),
                "patch": _write(
                    "Change a location (JSON Merge Patch)",
                    "200",
                    ("application/merge-patch+json",),
                    [*item, _IF_MATCH],
                ),
                "delete": _write("Delete a location", "204", (), [*item, _IF_MATCH]),
                "options": {**_OPTIONS, "parameters": item},
            },
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "The key as the user name or as the password.",
                },
            },
            "responses": {
                "Error": {
                    "description": "The contract's error envelope.",
                    "content": {
                        JSON: {
                            "schema": {
                                "type": "object",
                                "required": ["error"],
                                "properties": {
                                    "error": {
                                        "type": "object",
                                        "required": ["code", "message"],
                                        "properties": {
                                            "code": {"type": "string"},
                                            "message": {"type": "string"},
                                            "details": {"type": "object"},
                                        },
                                    }
                                },
                            }
                        }
                    },
                }
            },
        },
    }
