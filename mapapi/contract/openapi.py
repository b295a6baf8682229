"""The OpenAPI 3.1 document, generated from the views and their schemas.

Each view declares its schemas once, with ``@operation``; the same schema
objects load the request (``payload.load_body``), dump the response
(``payload.respond``) and are described here, so the document cannot drift
from the code. Errors, headers, security and the links between operations
(for clients that follow them, and stateful fuzzing) are derived from the
URL map and the contract's rules.
"""

import re
from dataclasses import dataclass

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import current_app, request
from marshmallow import Schema

from ..http.auth import API_PREFIX
from ..storage.database import WRITE_METHODS
from .fields import QueryInteger, Timestamp
from .loading import Loader, compile_loader
from .serialization import Dumper, compile_dumper

OPENAPI_VERSION = "3.1.0"

#: Path parameters by the contract's names (``:locId``, ``:catId``).
PATH_PARAMETERS = {
    "map_id": "mapId",
    "location_id": "locId",
    "category_id": "catId",
    "tag_id": "tagId",
    "layer_id": "layerId",
    "key_id": "keyId",
}

ERROR_CODES = {
    400: ["VALIDATION_ERROR"],
    401: ["MISSING_API_KEY", "INVALID_API_KEY", "API_KEY_EXPIRED"],
    403: ["PRO_SUBSCRIPTION_REQUIRED", "INSUFFICIENT_SCOPE"],
    404: ["NOT_FOUND"],
    409: ["CONFLICT"],
    413: ["PAYLOAD_TOO_LARGE"],
    429: ["RATE_LIMIT_EXCEEDED"],
    500: ["INTERNAL_ERROR"],
    503: ["SERVICE_UNAVAILABLE"],
}
ERROR_DESCRIPTIONS = {
    400: "The body or query failed validation, or the body is not a JSON object.",
    401: "No API key, or one that is unknown, revoked or expired.",
    403: "The account has no active Pro plan, or a READ_ONLY key tried to write.",
    404: "No such resource in the caller's account.",
    409: (
        "A conflict: a tag name or a location's externalId taken on this map, "
        "or an 11th active API key."
    ),
    413: "The body is larger than 2 MiB.",
    429: "A rate-limit bucket is empty; retry after Retry-After seconds.",
    500: "An unexpected error (logged with the request id).",
    503: "The database cannot be reached.",
}
RATE_LIMIT_HEADERS = {
    "X-RateLimit-Limit": "Requests the bucket allows in its window.",
    "X-RateLimit-Remaining": "Requests left after this one.",
    "X-RateLimit-Reset": "Unix time (whole seconds) at which the bucket next regains capacity.",
}


@dataclass(frozen=True)
class Operation:
    """What a view takes and gives; the schemas are the ones it runs with."""

    body: Schema | None
    query: Schema | None
    response: Schema
    status: int
    conflict: bool
    #: ``response`` compiled: what ``response.dump`` gives, faster.
    dump: Dumper
    #: ``body`` compiled: what ``body.load`` gives, faster (None: no body).
    load: Loader | None


def operation(*, body=None, query=None, response, status=200, conflict=False):
    """Declare a view's schemas (classes or instances) and success status."""

    def instance(schema):
        return schema() if isinstance(schema, type) else schema

    body, response = instance(body), instance(response)
    declared = Operation(
        body,
        instance(query),
        response,
        status,
        conflict,
        compile_dumper(response),
        body and compile_loader(body),
    )

    def decorate(view):
        view.operation = declared
        return view

    return decorate


def current_operation() -> Operation:
    return current_app.view_functions[request.endpoint].operation


def build_document(app) -> dict:
    """The whole document for ``app``'s API routes."""
    plugin = MarshmallowPlugin(schema_name_resolver=_schema_name)
    spec = APISpec(
        title="mapapi",
        version="1.0.0",
        openapi_version=OPENAPI_VERSION,
        plugins=[plugin],
        info={
            "description": (
                "Maps and, inside a map, locations, categories, tags and layers; and the "
                'caller\'s API keys. Every success is `{"data": ...}`; every error is '
                '`{"error": {"code", "message"[, "details"]}}`.'
            )
        },
        servers=[{"url": API_PREFIX}],
        security=[{"bearerAuth": []}],
    )
    plugin.map_to_openapi_type(Timestamp, "string", "date-time")
    plugin.map_to_openapi_type(QueryInteger, "integer", None)
    spec.components.security_scheme(
        "bearerAuth",
        {"type": "http", "scheme": "bearer", "description": "An API key: `mk_live_...`."},
    )
    _add_shared_components(spec)
    operations = list(_api_operations(app))
    for path, method, endpoint, view in operations:
        spec.path(
            path=path,
            parameters=_path_parameters(path),
            operations={method.lower(): _describe(endpoint, view, path, method, operations)},
        )
    return spec.to_dict()


def _schema_name(schema) -> str:
    cls = schema if isinstance(schema, type) else type(schema)
    return cls.__name__.removesuffix("Schema")


def _add_shared_components(spec: APISpec) -> None:
    codes = [code for group in ERROR_CODES.values() for code in group]
    spec.components.schema(
        "Error",
        {
            "type": "object",
            "required": ["error"],
            "additionalProperties": False,
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "additionalProperties": False,
                    "properties": {
                        "code": {"type": "string", "enum": codes},
                        "message": {"type": "string"},
                        "details": {
                            "type": "object",
                            "description": "The fields at fault, keyed as the request was shaped.",
                        },
                    },
                }
            },
        },
    )
    for name, description in RATE_LIMIT_HEADERS.items():
        spec.components.header(
            name, {"description": description, "required": True, "schema": {"type": "integer"}}
        )
    spec.components.header(
        "X-Request-Id",
        {
            "description": "The client's own request id when valid, else a generated one.",
            "required": True,
            "schema": {"type": "string"},
        },
    )
    spec.components.header(
        "Retry-After",
        {"description": "Seconds to wait.", "required": True, "schema": {"type": "integer"}},
    )


def _api_operations(app):
    """(OpenAPI path, method, endpoint, view) of every declared API route, in order."""
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        if not rule.rule.startswith(API_PREFIX + "/") or not hasattr(view, "operation"):
            continue
        path = re.sub(
            r"<(?:\w+:)?(\w+)>",
            lambda match: "{" + PATH_PARAMETERS[match.group(1)] + "}",
            rule.rule.removeprefix(API_PREFIX),
        )
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            yield path, method, rule.endpoint, view


def _path_parameters(path: str) -> list[dict]:
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"{(\w+)}", path)
    ]


def _describe(endpoint: str, view, path: str, method: str, operations) -> dict:
    declared: Operation = view.operation
    summary, _, description = (view.__doc__ or endpoint).strip().partition("\n")
    described = {
        "operationId": endpoint.replace(".", "_"),
        "summary": summary.strip(),
        "tags": [endpoint.split(".")[0]],
        "responses": _responses(declared, path, method, operations),
    }
    if description.strip():
        described["description"] = description.strip()
    if declared.query is not None:
        described["parameters"] = [{"in": "query", "schema": declared.query}]
    if declared.body is not None:
        described["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": declared.body}},
        }
    return described


def _responses(declared: Operation, path: str, method: str, operations) -> dict:
    success = {
        "description": "Success.",
        "headers": _headers(),
        "content": {"application/json": {"schema": _envelope(declared.response)}},
    }
    if declared.status == 201:
        links = _links(path, operations)
        if links:
            success["links"] = links
    responses = {str(declared.status): success}
    for status in _error_statuses(declared, path, method):
        responses[str(status)] = {
            "description": f"{ERROR_DESCRIPTIONS[status]} Codes: {', '.join(ERROR_CODES[status])}.",
            "headers": _headers(retry_after=status == 429),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return responses


def _error_statuses(declared: Operation, path: str, method: str) -> list[int]:
    statuses = {401, 403, 429, 500, 503}
    if "{" in path:
        statuses.add(404)
    if declared.query is not None or declared.body is not None:
        statuses.add(400)
    if declared.body is not None or method in WRITE_METHODS:
        statuses.add(413)
    if declared.conflict:
        statuses.add(409)
    return sorted(statuses)


def _headers(retry_after: bool = False) -> dict:
    names = [*RATE_LIMIT_HEADERS, "X-Request-Id"] + (["Retry-After"] if retry_after else [])
    return {name: {"$ref": f"#/components/headers/{name}"} for name in names}


def _envelope(schema) -> dict:
    return {
        "type": "object",
        "required": ["data"],
        "additionalProperties": False,
        "properties": {"data": schema},
    }


def _links(create_path: str, operations) -> dict:
    """From a create to the operations on what it created: its id fills the
    item path's new parameter, the rest come from the create's own path."""
    links = {}
    for path, _method, endpoint, _view in operations:
        match = re.fullmatch(re.escape(create_path) + r"/{(\w+)}(?:/[^{}/]+)*", path)
        if not match:
            continue
        parameters = {name: f"$request.path.{name}" for name in re.findall(r"{(\w+)}", create_path)}
        parameters[match.group(1)] = "$response.body#/data/id"
        links[endpoint.replace(".", "_")] = {
            "operationId": endpoint.replace(".", "_"),
            "parameters": parameters,
        }
    return links
