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
from apispec.ext.marshmallow import MarshmallowPlugin, OpenAPIConverter
from flask import current_app, request
from marshmallow import Schema

from ..http.auth import API_PREFIX
from .fields import QueryInteger, Timestamp
from .loading import Loader, compile_loader
from .serialization import Dumper, compile_dumper

OPENAPI_VERSION = "3.1.0"
JSON = "application/json"

#: Path parameters by the contract's names (``:locId``, ``:catId``).
PATH_PARAMETERS = {
    "map_id": "mapId",
    "location_id": "locId",
    "category_id": "catId",
    "tag_id": "tagId",
    "layer_id": "layerId",
    "key_id": "keyId",
    "webhook_id": "webhookId",
    "grant_id": "grantId",
}

ERROR_CODES = {
    400: ["VALIDATION_ERROR"],
    401: ["MISSING_API_KEY", "INVALID_API_KEY", "API_KEY_EXPIRED"],
    403: ["PRO_SUBSCRIPTION_REQUIRED", "INSUFFICIENT_SCOPE"],
    404: ["NOT_FOUND"],
    405: ["METHOD_NOT_ALLOWED"],
    409: ["CONFLICT", "IDEMPOTENCY_KEY_IN_USE"],
    410: ["CURSOR_EXPIRED"],
    412: ["PRECONDITION_FAILED"],
    413: ["PAYLOAD_TOO_LARGE"],
    422: ["IDEMPOTENCY_KEY_REUSED"],
    429: ["RATE_LIMIT_EXCEEDED"],
    500: ["INTERNAL_ERROR"],
    503: ["SERVICE_UNAVAILABLE"],
}
ERROR_DESCRIPTIONS = {
    400: "The body or query failed validation, or the body is not a JSON object.",
    401: "No API key, or one that is unknown, revoked or expired.",
    403: "The account has no active Pro plan, or a READ_ONLY key tried to write.",
    404: "No such resource in the caller's account.",
    405: "The path exists, the method does not; `Allow` lists the methods it has.",
    409: (
        "A conflict: a tag name or a location's externalId taken on this map, "
        "an 11th active API key or webhook endpoint."
    ),
    410: "The cursor is older than the oldest event kept.",
    412: "If-Match does not match the resource's current ETag; nothing changed.",
    413: "The body is larger than 2 MiB.",
    422: "The Idempotency-Key was used with another method, path or body.",
    429: "A rate-limit bucket is empty; retry after Retry-After seconds.",
    500: "An unexpected error (logged with the request id).",
    503: "The database cannot be reached.",
}
IN_USE_DESCRIPTION = (
    "A request with the same Idempotency-Key is still running; retry after Retry-After seconds."
)
RATE_LIMIT_HEADERS = {
    "X-RateLimit-Limit": "Requests the bucket allows in its window.",
    "X-RateLimit-Remaining": "Requests left after this one.",
    "X-RateLimit-Reset": "Unix time (whole seconds) at which the bucket next regains capacity.",
}


#: What /docs shows above the operations: the overview of docs/api.md, short.
DESCRIPTION = """\
Maps and, inside each map, its locations, categories, tags and layers; and
the caller's own API keys. JSON in and out, UTF-8. The full guide is
`docs/api.md` in the project.

**Keys.** Every request under `/api/v1` (this document aside) sends
`Authorization: Bearer mk_live_...`. The operator makes accounts and their
first key with the `mapapi` command; `POST /keys` makes more (at most 10
active per account). A `READ_WRITE` key may do everything; a `READ_ONLY` key
gets `403 INSUFFICIENT_SCOPE` on POST, PUT and DELETE. Only accounts on an
active Pro plan may use the API (`403 PRO_SUBSCRIPTION_REQUIRED`). A missing,
unknown, revoked or expired key is a 401.

**Envelopes and errors.** A success is `{"data": ...}`. An error is
`{"error": {"code": "...", "message": "..."}}`; `VALIDATION_ERROR` adds
`details`, keyed as the request was shaped (`{"title": ["..."]}`, bulk items
by index). The checks run in this order and the first that fails answers:
the general rate limit (429), the key (401), plan then scope (403), the
route (404 `NOT_FOUND` for an unknown path, 405 `METHOD_NOT_ALLOWED` with
`Allow` for a wrong method), the map-creation, bulk or sync bucket (429), then
body size (413), the ids in the path (404, also for another account's
resources), validation (400) and conflicts (409).
Unknown body fields are refused; the read-only fields a GET returns are
accepted and ignored, so GET-modify-PUT works. PUT is a partial update:
fields left out keep their value.

**Rate limits.** Per account, over any rolling window: 1000 requests an
hour in general, of which 50 map creations, 20 bulk creations or plain
imports, and 100 upserts, bulk deletes or `import?upsert=true` (the
operator may change them). Every answer carries `X-RateLimit-Limit`,
`X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds); a 429
carries `Retry-After` (seconds). Requests without a valid key count
against their client address.

**Lists** are paged: `page` (from 1) and `pageSize` (1..100, default 50);
every list answers `{"<things>": [...], "pagination": {"total", "page",
"pageSize", "totalPages"}}` in a stable order. Ids are opaque strings;
times are UTC, `2026-11-21T09:30:00.000Z`.
"""


_PLACE = {"name": "Café de Flore", "lat": 48.8542, "lng": 2.3326, "address": "172 Bd Saint-Germain"}

#: One request body per body schema, by its name in the document: shown by
#: /docs and sent as they are by the fuzzer's examples phase.
BODY_EXAMPLES = {
    "MapInput": {"title": "Coffee in Paris", "city": "Paris", "country": "France"},
    "MapUpdate": {"description": "Where to sit and write.", "public": True},
    "LocationInput": {**_PLACE, "properties": {"sourceId": "A1"}},
    "LocationUpdate": {"name": "Café de Flore (terrace)"},
    "BulkInput": {"locations": [_PLACE, {"name": "Les Deux Magots", "lat": 48.854, "lng": 2.3333}]},
    "LayerMembershipInput": {"layerIds": []},
    "LayerInput": {"name": "Favourites", "color": "#3B82F6"},
    "LayerUpdate": {"order": 0, "routeEnabled": True},
    "CategoryInput": {"name": "Cafés", "color": "#8B5CF6", "icon": "coffee"},
    "CategoryUpdate": {"icon": "cup"},
    "TagInput": {"name": "terrace"},
    "TagUpdate": {"color": "#22C55E"},
    "KeyInput": {"name": "reporting", "scope": "READ_ONLY"},
    "UpsertInput": {"locations": [{**_PLACE, "externalId": "CRM-00017"}]},
    "BulkDeleteInput": {"externalIds": ["CRM-00017", "CRM-00018"]},
    "WebhookInput": {
        "url": "https://hooks.example.com/mapapi",
        "events": ["location.*", "map.deleted"],
        "description": "shop sync",
    },
    "WebhookUpdate": {"enabled": False},
    "ImportInput": {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [2.3326, 48.8542]},
                "properties": {
                    "name": "Café de Flore",
                    "website": "https://cafedeflore.fr",
                    "externalId": "CRM-00017",
                },
            }
        ],
    },
}


@dataclass(frozen=True)
class Operation:
    """What a view takes and gives; the schemas are the ones it runs with."""

    body: Schema | None
    query: Schema | None
    response: Schema
    status: int
    conflict: bool
    #: Error statuses only this operation answers (410 for an expired cursor).
    errors: tuple
    #: ``response`` compiled: what ``response.dump`` gives, faster.
    dump: Dumper
    #: ``body`` compiled: what ``body.load`` gives, faster (None: no body).
    load: Loader | None
    #: The body's accepted media types.
    body_media_types: tuple[str, ...] = (JSON,)
    #: The success response's media type; any other than JSON is not
    #: wrapped in ``{"data": ...}`` (the GeoJSON export).
    media_type: str = JSON
    #: Another success the query may ask for: ``(status, response schema,
    #: description)`` (the import's ``upsert=true``).
    other_success: tuple | None = None


def operation(
    *,
    body=None,
    query=None,
    response,
    status=200,
    conflict=False,
    errors=(),
    body_media_types=(JSON,),
    media_type=JSON,
    other_success=None,
):
    """Declare a view's schemas (classes or instances), success status and media types."""

    def instance(schema):
        return schema() if isinstance(schema, type) else schema

    body, response = instance(body), instance(response)
    declared = Operation(
        body,
        instance(query),
        response,
        status,
        conflict,
        tuple(errors),
        compile_dumper(response),
        body and compile_loader(body),
        tuple(body_media_types),
        media_type,
        other_success and (other_success[0], instance(other_success[1]), other_success[2]),
    )

    def decorate(view):
        view.operation = declared
        return view

    return decorate


def answers_one_resource(declared: Operation) -> bool:
    """Whether the operation answers one resource with an ``updatedAt`` (a map,
    location, category, tag, layer, webhook): the answers that carry an ETag."""
    names = {field.data_key or name for name, field in declared.response.fields.items()}
    return "id" in names and "updatedAt" in names


def current_operation() -> Operation:
    return current_app.view_functions[request.endpoint].operation


def build_document(app) -> dict:
    """The whole document for ``app``'s API routes."""
    plugin = _Plugin(schema_name_resolver=_schema_name)
    spec = APISpec(
        title="mapapi",
        version="1.0.0",
        openapi_version=OPENAPI_VERSION,
        plugins=[plugin],
        info={"description": DESCRIPTION},
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
    """``MapInputSchema`` is ``MapInput``; the same schema loading a partial
    update (``partial=True``: PUT) is ``MapUpdate``."""
    cls = schema if isinstance(schema, type) else type(schema)
    name = cls.__name__.removesuffix("Schema")
    if getattr(schema, "partial", False) is True:
        return name.removesuffix("Input") + "Update"
    return name


class _Converter(OpenAPIConverter):
    """Describes a schema as it loads: a partial update requires no field
    (apispec's own rule) and fills none in, so it shows no defaults either
    (a field left out keeps its value)."""

    def schema2jsonschema(self, schema):
        described = super().schema2jsonschema(schema)
        if getattr(schema, "partial", False) is True:
            for prop in described["properties"].values():
                prop.pop("default", None)
        return described


class _Plugin(MarshmallowPlugin):
    Converter = _Converter


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
    spec.components.header(
        "ETag",
        {
            "description": "The resource's strong ETag: it changes whenever its GET body does.",
            "required": True,
            "schema": {"type": "string"},
        },
    )
    spec.components.header(
        "Idempotent-Replayed",
        {
            "description": "`true` on the kept answer to an Idempotency-Key seen before.",
            "schema": {"type": "string", "enum": ["true"]},
        },
    )
    spec.components.header(
        "Allow",
        {
            "description": "The methods the path has (HEAD wherever GET is).",
            "required": True,
            "schema": {"type": "string"},
        },
    )
    # Not an answer of any operation (it answers a method the path does not
    # have), so it is described once, for every path, rather than per operation.
    spec.components.response(
        "MethodNotAllowed",
        {
            "description": f"{ERROR_DESCRIPTIONS[405]} Codes: METHOD_NOT_ALLOWED.",
            "headers": {**_headers(), "Allow": {"$ref": "#/components/headers/Allow"}},
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        },
    )
    for name, parameter in CONDITIONAL_PARAMETERS.items():
        spec.components.parameter(name, "header", parameter)


#: The request headers of safe retries and concurrent edits, by component name.
CONDITIONAL_PARAMETERS = {
    "IdempotencyKey": {
        "name": "Idempotency-Key",
        "description": (
            "Makes a retry of this POST safe: the same key, path, query and body within the "
            "configured hours answers the first outcome again (`Idempotent-Replayed: true`)."
        ),
        "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
    },
    "IfMatch": {
        "name": "If-Match",
        "description": "Change only if the resource's ETag is one of these (`*`: any); else 412.",
        "schema": {"type": "string"},
    },
    "IfNoneMatch": {
        "name": "If-None-Match",
        "description": "Answer 304 with no body when the resource's ETag is one of these.",
        "schema": {"type": "string"},
    },
}


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
    conditions = _conditions(declared, path, method, operations)
    described = {
        "operationId": endpoint.replace(".", "_"),
        "summary": summary.strip(),
        "tags": [endpoint.split(".")[0]],
        "responses": _responses(declared, path, method, operations, conditions),
    }
    if description.strip():
        described["description"] = description.strip()
    parameters: list = list(conditions)  # components, by name
    if declared.query is not None:
        parameters.append({"in": "query", "schema": declared.query})
    if parameters:
        described["parameters"] = parameters
    if declared.body is not None:
        media = {"schema": declared.body}
        example = BODY_EXAMPLES.get(_schema_name(declared.body))
        if example is not None:
            media["example"] = example
        described["requestBody"] = {
            "required": True,
            "content": {media_type: dict(media) for media_type in declared.body_media_types},
        }
    return described


def _conditions(declared: Operation, path: str, method: str, operations) -> list[str]:
    """The conditional request headers the operation reads."""
    if method == "POST":
        return ["IdempotencyKey"]
    if method == "GET" and answers_one_resource(declared):
        return ["IfNoneMatch"]
    if method in ("PUT", "DELETE") and _guards_resource(path, operations):
        return ["IfMatch"]
    return []


def _guards_resource(path: str, operations) -> bool:
    """Whether the path (or, without a GET of its own, the path above it) is
    a resource's GET that carries an ETag."""
    reads = {p: view for p, method, _endpoint, view in operations if method == "GET"}
    for candidate in (path, path.rsplit("/", 1)[0]):
        if candidate in reads:
            return answers_one_resource(reads[candidate].operation)
    return False


def _responses(declared: Operation, path: str, method: str, operations, conditions) -> dict:
    schema = declared.response
    if declared.media_type == JSON:
        schema = _envelope(schema)
    success = {
        "description": "Success.",
        "headers": _headers(
            etag=answers_one_resource(declared), replayed="IdempotencyKey" in conditions
        ),
        "content": {declared.media_type: {"schema": schema}},
    }
    if declared.status == 201:
        links = _links(path, operations)
        if links:
            success["links"] = links
    responses = {str(declared.status): success}
    if declared.other_success is not None:
        status, response, description = declared.other_success
        responses[str(status)] = {
            "description": description,
            "headers": success["headers"],
            "content": {JSON: {"schema": _envelope(response)}},
        }
    if "IfNoneMatch" in conditions:
        responses["304"] = {
            "description": "Not modified: If-None-Match holds the current ETag. No body.",
            "headers": _headers(etag=True),
        }
    for status in _error_statuses(declared, path, method, conditions):
        codes = _error_codes(status, declared, conditions)
        in_use = "IDEMPOTENCY_KEY_IN_USE" in codes
        description = ERROR_DESCRIPTIONS[status] if codes != ["IDEMPOTENCY_KEY_IN_USE"] else ""
        if in_use:
            description = f"{description} {IN_USE_DESCRIPTION}".strip()
        headers = _headers(retry_after=status == 429)
        if in_use:
            headers["Retry-After"] = {
                "description": "Seconds to wait: 1, with IDEMPOTENCY_KEY_IN_USE only.",
                "schema": {"type": "integer"},
            }
        responses[str(status)] = {
            "description": f"{description} Codes: {', '.join(codes)}.",
            "headers": headers,
            "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return responses


def _error_codes(status: int, declared: Operation, conditions: list[str]) -> list[str]:
    if status != 409:
        return ERROR_CODES[status]
    codes = ["CONFLICT"] if declared.conflict or 409 in declared.errors else []
    return codes + (["IDEMPOTENCY_KEY_IN_USE"] if "IdempotencyKey" in conditions else [])


def _error_statuses(declared: Operation, path: str, method: str, conditions) -> list[int]:
    # 413: a body over the limit is refused on every method, even where none is read.
    statuses = {401, 403, 413, 429, 500, 503}
    if "{" in path:
        statuses.add(404)
    if declared.query is not None or declared.body is not None:
        statuses.add(400)
    if declared.conflict:
        statuses.add(409)
    if "IdempotencyKey" in conditions:
        statuses.update({400, 409, 422})
    if "IfMatch" in conditions:
        statuses.add(412)
    statuses.update(declared.errors)
    return sorted(statuses)


def _headers(retry_after: bool = False, etag: bool = False, replayed: bool = False) -> dict:
    names = [*RATE_LIMIT_HEADERS, "X-Request-Id"]
    names += ["Retry-After"] * retry_after + ["ETag"] * etag + ["Idempotent-Replayed"] * replayed
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
