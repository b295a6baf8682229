"""Tools built from the service's OpenAPI document: one per operation.

A tool's input schema is the operation's own: its path and query parameters
as properties, and its request body, when it has one, as the property
``body``. ``$ref``s are resolved inline so that the schema stands alone.
Operations on API keys and webhooks get no tool: an agent never manages
credentials or where the account's events are sent.
"""

from dataclasses import dataclass, field
from typing import Any

#: Paths under which no tool is made.
EXCLUDED_PREFIXES = ("/keys", "/webhooks")

#: The contract's names where the view's name says it less plainly.
RENAMED = {
    "bulk_create_locations": "create_locations",
    "replace_location_layers": "set_location_layers",
}

#: When an agent should reach for a tool, beyond what the summary says.
GUIDANCE = {
    "list_maps": "Start here to find the id of a map by its title.",
    "list_locations": (
        "Use the filters to find places instead of reading every page: bbox "
        "(west,south,east,north) for a viewport, q for text in name, description "
        "or address, categoryId, tagId (all given tags), layerId, updatedSince, "
        "externalId; sort by createdAt, updatedAt or name (prefix - for descending)."
    ),
    "create_location": "For one place; for two or more use create_locations.",
    "create_locations": (
        "Preferred for adding several places: 1 to 100 in one call, all or none; "
        "each item may carry layerIds."
    ),
    "upsert_locations": (
        "Mirror records of another system by their externalId: existing ones are "
        "updated, new ones created; a rerun with the same input changes nothing."
    ),
    "set_location_layers": "Replaces the whole set of the location's layers.",
    "export_geojson": (
        "The map's locations (filters allowed) as one GeoJSON FeatureCollection, "
        "for GIS tools; large maps give large answers: filter when you can."
    ),
    "import_geojson": (
        "Create 1 to 100 locations from a GeoJSON FeatureCollection of Points; "
        "with upsert=true, upsert them by their externalId instead."
    ),
    "list_events": (
        "What changed, oldest first: pass `next` back as `after` to continue; "
        "after=latest gives a cursor from now on."
    ),
}

#: What a successful call returns, by the verb its name starts with.
RETURNS = {
    "list": "Returns one page of the list and its pagination (total, page, pageSize, totalPages).",
    "get": "Returns the resource.",
    "create": "Returns what was created, with its id.",
    "update": "Partial update: put only the fields to change in `body`. Returns the resource.",
    "delete": "Irreversible. Returns the id and deleted: true.",
}


@dataclass(frozen=True)
class Tool:
    """One operation of the document, as an agent calls it."""

    name: str
    method: str
    path: str
    description: str
    input_schema: dict
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    has_body: bool
    body_media_type: str | None = None
    annotations: dict = field(default_factory=dict)


def tool_name(operation_id: str) -> str:
    """``locations_bulk_create_locations`` → ``create_locations``: the view's name."""
    view = operation_id.split("_", 1)[1]
    return RENAMED.get(view, view)


def resolve(schema: Any, document: dict) -> Any:
    """``schema`` with every ``#/components/...`` reference replaced by its target."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            target = document
            for part in schema["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            return resolve(target, document)
        return {key: resolve(value, document) for key, value in schema.items()}
    if isinstance(schema, list):
        return [resolve(item, document) for item in schema]
    return schema


def annotations_for(method: str) -> dict:
    """The MCP hints an operation's method gives."""
    return {
        "readOnlyHint": method == "get",
        "destructiveHint": method == "delete",
        "idempotentHint": method in ("get", "put", "delete"),
    }


def returned_fields(operation: dict, document: dict) -> list[str]:
    """The field names of a success's ``data`` (or of the whole body when it is not wrapped)."""
    for status, response in operation.get("responses", {}).items():
        if not status.startswith("2"):
            continue
        for media in response.get("content", {}).values():
            schema = resolve(media.get("schema", {}), document)
            payload = schema.get("properties", {}).get("data", schema)
            return list(payload.get("properties", {}))
    return []


def describe(name: str, method: str, operation: dict, document: dict) -> str:
    parts = [operation.get("summary", "").strip()]
    if operation.get("description"):
        parts.append(operation["description"].strip())
    if name in GUIDANCE:
        parts.append(GUIDANCE[name])
    verb = name.split("_", 1)[0]
    if verb in RETURNS:
        parts.append(RETURNS[verb])
    fields = returned_fields(operation, document)
    if fields:
        parts.append("Result fields: " + ", ".join(fields) + ".")
    if method == "post":
        parts.append("Safe to retry: the call carries an Idempotency-Key.")
    return "\n\n".join(part for part in parts if part)


def input_schema(parameters: list[dict], body: dict | None) -> dict:
    """The tool's arguments: each parameter by its name, the request body as ``body``.

    Header parameters are left out: the server sets ``Idempotency-Key`` itself.
    """
    properties, required = {}, []
    for parameter in parameters:
        schema = dict(parameter.get("schema", {}))
        if parameter.get("description"):
            schema.setdefault("description", parameter["description"])
        properties[parameter["name"]] = schema
        if parameter.get("required"):
            required.append(parameter["name"])
    if body is not None:
        properties["body"] = body["schema"]
        if body["required"]:
            required.append("body")
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def request_body(operation: dict) -> dict | None:
    """The body's media type, schema and whether it is required, or None."""
    content = operation.get("requestBody", {}).get("content")
    if not content:
        return None
    media_type = (
        "application/json" if "application/json" in content else next(iter(content))
    )
    return {
        "media_type": media_type,
        "schema": content[media_type].get("schema", {}),
        "required": operation["requestBody"].get("required", False),
    }


def build_tools(document: dict) -> dict[str, Tool]:
    """Every tool the document gives, by name."""
    tools = {}
    for path, item in document["paths"].items():
        if path.startswith(EXCLUDED_PREFIXES):
            continue
        shared = item.get("parameters", [])
        for method, operation in item.items():
            if method not in ("get", "post", "put", "delete"):
                continue
            name = tool_name(operation["operationId"])
            parameters = [
                parameter
                for parameter in resolve(
                    shared + operation.get("parameters", []), document
                )
                if parameter["in"] in ("path", "query")
            ]
            body = resolve(request_body(operation), document)
            tools[name] = Tool(
                name=name,
                method=method,
                path=path,
                description=describe(name, method, operation, document),
                input_schema=input_schema(parameters, body),
                path_params=tuple(p["name"] for p in parameters if p["in"] == "path"),
                query_params=tuple(p["name"] for p in parameters if p["in"] == "query"),
                has_body=body is not None,
                body_media_type=body["media_type"] if body else None,
                annotations=annotations_for(method),
            )
    return tools
