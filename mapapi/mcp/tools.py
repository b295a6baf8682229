"""The tools, built from the service's OpenAPI document: one per operation.

A tool's arguments are flat, as agents write them: the operation's path
parameters, query parameters and body fields side by side at the top level
(``update_map {"mapId": "...", "title": "..."}``). Each tool keeps two
schemas: the one it advertises, trimmed to what an agent needs (no
read-only fields, no empty defaults), and the one a call is checked
against, which also accepts the read-only fields the API accepts and
ignores, so that an object read from a tool can be sent back.

Its hints say what it does to existing data, read from the operation:
GET reads; DELETE, PUT and a POST that answers 200 (upsert, bulk delete)
change or remove what exists, and doing them twice is doing them once; a
POST that answers 201 only creates. The import, which creates or (with
``upsert=true``) overwrites, is two tools: ``import_geojson`` and
``upsert_geojson``.

Operations on API keys, webhooks and OAuth grants get no tool: an agent never manages
credentials or where the account's events are sent.
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .arguments import LIST_PAGE_SIZE, strict_validator

#: Paths under which no tool is made.
EXCLUDED_PREFIXES = ("/keys", "/webhooks", "/grants")

#: The contract's names where the view's name says it less plainly.
RENAMED = {
    "bulk_create_locations": "create_locations",
    "replace_location_layers": "set_location_layers",
    "list_location_clusters": "cluster_locations",
}

#: Operations that are two tools: the variant's name and summary, and the
#: boolean query parameter that the variant sets (and the first never sends).
VARIANTS = {
    "import_geojson": (
        "upsert_geojson",
        "Upsert locations by externalId from a GeoJSON FeatureCollection: all or none.",
        "upsert",
    )
}

#: The query parameter that sizes each list's page.
PAGE_SIZE_PARAMETERS = ("pageSize", "limit")

#: The GeoJSON export as a tool: its Features in pages of ``limit``.
EXPORT_TOOL = "export_geojson"
EXPORT_LIMIT = 50
EXPORT_LIMIT_MAX = 200
EXPORT_ARGUMENTS = {
    "limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": EXPORT_LIMIT_MAX,
        "default": EXPORT_LIMIT,
        "description": "Features at most (fewer when more would not fit in one answer).",
    },
    "cursor": {
        "type": "string",
        "pattern": "^[0-9]+$",
        "description": "The `next` of the previous page.",
    },
}
#: What the export tool answers beyond the FeatureCollection's own members.
EXPORT_RESULT_FIELDS = ("total", "next")

#: Tools whose filters are list_locations', described there once.
FILTERS_OF_THE_LIST = (EXPORT_TOOL, "cluster_locations")
#: The parameters of those tools that are their own, and keep their descriptions.
OWN_PARAMETERS = ("bbox",)
#: Query parameters a tool leaves out, to stay small: an agent filters
#: with list_locations; the clusters are for drawing.
HIDDEN = {"cluster_locations": ("q", "categoryId", "tagId", "updatedSince", "externalId")}

#: Schema keywords a tool's advertised schema leaves out, and those it
#: leaves out inside the items of an array.
UNSHOWN = frozenset({"example", "minLength", "maxLength", "format"})
UNSHOWN_IN_ITEMS = frozenset({"description", "additionalProperties"})

#: When to reach for a tool, where its summary does not say it.
GUIDANCE = {
    "list_maps": "Start here to find a map's id.",
    "create_location": "For several places use create_locations.",
    "create_locations": "Each item as create_location takes it, layerIds included.",
    "upsert_locations": (
        "An item whose externalId the map has updates that location, others create; "
        "a rerun changes nothing."
    ),
    "bulk_delete_locations": "Pass ids or externalIds, not both.",
    "set_location_layers": "The layerIds given become the whole set.",
    "export_geojson": (
        "Filters and sort as list_locations. For a whole file, GET the export over HTTP "
        "(the answer says where)."
    ),
    "import_geojson": (
        "Points are [lng, lat]. Creates only; to update by externalId use upsert_geojson."
    ),
    "upsert_geojson": (
        "Points are [lng, lat]. Each Feature needs an externalId; one the map has "
        "updates that location (keys left out keep their value), others create."
    ),
    "get_rate_limits": "Call before a long job; it uses up no request.",
    "list_events": (
        "Pass `next` back as `after` to read on; after=latest gives a cursor from now on."
    ),
}

#: What a list tool says about its pages.
PAGING = "{size} items a page unless {parameter} says (at most {maximum})."


@dataclass(frozen=True)
class Hints:
    """The MCP annotations of a tool, by what it does to existing data."""

    read_only: bool
    destructive: bool
    idempotent: bool


READS = Hints(read_only=True, destructive=False, idempotent=False)
CREATES = Hints(read_only=False, destructive=False, idempotent=False)
OVERWRITES = Hints(read_only=False, destructive=True, idempotent=True)


@dataclass(frozen=True)
class Tool:
    """One operation of the document, as an agent calls it."""

    name: str
    method: str
    path: str
    description: str
    #: What ``tools/list`` shows.
    input_schema: dict
    #: What a call is checked against: the advertised schema, plus the
    #: read-only body fields the API accepts and ignores.
    checked_schema: dict
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    #: The body's top-level fields; None when the operation takes no body.
    body_fields: tuple[str, ...] | None
    body_media_type: str | None
    hints: Hints
    #: The fields of a success's ``data``.
    result_fields: tuple[str, ...]
    #: Query parameters the tool always sends (the variant's flag).
    fixed_query: dict = field(default_factory=dict)
    #: Arguments of the tool itself, not of the operation (the export's pages).
    own_params: tuple[str, ...] = ()
    #: The list's page-size parameter, sent as ``LIST_PAGE_SIZE`` when left out.
    page_size_param: str | None = None

    @cached_property
    def validator(self):
        return strict_validator()(self.checked_schema)

    @property
    def optional_arguments(self) -> frozenset:
        """Path and query arguments (the tool's own too) for which ``null`` means "left out"."""
        required = set(self.checked_schema.get("required", ()))
        return frozenset(self.path_params + self.query_params + self.own_params) - required


def tool_name(operation_id: str) -> str:
    """``locations_bulk_create_locations`` is ``create_locations``: the view's name."""
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


def trimmed(schema: Any, *, inside_items: bool = False) -> Any:
    """``schema`` as a tool shows it: what an agent needs to write a call.

    Read-only fields, examples, formats, empty defaults and lengths are
    left out (the check before sending still holds the lengths), and whole
    numbers are written as such. The items of an array show their fields,
    types and bounds; what they mean is said once, at the top level.
    """
    if isinstance(schema, list):
        return [trimmed(item, inside_items=inside_items) for item in schema]
    if isinstance(schema, float) and schema.is_integer():
        return int(schema)
    if not isinstance(schema, dict):
        return schema
    kept = {}
    for key, value in schema.items():
        if key in UNSHOWN or (inside_items and key in UNSHOWN_IN_ITEMS):
            continue
        if key == "default" and (value == "" or value is None):
            continue
        if key == "properties":
            kept[key] = {
                name: trimmed(prop, inside_items=inside_items)
                for name, prop in value.items()
                if not _read_only(prop)
            }
        elif key != "additionalProperties" or value != {}:
            kept[key] = trimmed(value, inside_items=inside_items or key == "items")
    return kept


def _read_only(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("readOnly") is True


def success_schema(operation: dict, status: str, document: dict) -> dict:
    """The schema of the ``data`` of the answer with ``status`` (or of the
    whole body, when it is not wrapped)."""
    for media in operation["responses"][status].get("content", {}).values():
        schema = resolve(media.get("schema", {}), document)
        return schema.get("properties", {}).get("data", schema)
    return {}


def success_statuses(operation: dict) -> list[str]:
    return [status for status in operation["responses"] if status.startswith("2")]


def hints_for(method: str, status: str) -> Hints:
    """What an operation does to existing data, by its method and success status."""
    if method == "get":
        return READS
    if method == "post" and status == "201":
        return CREATES
    return OVERWRITES


def request_body(operation: dict, document: dict) -> tuple[str, dict] | None:
    """The body's media type (JSON when offered) and resolved schema, or None."""
    content = operation.get("requestBody", {}).get("content")
    if not content:
        return None
    media_type = "application/json" if "application/json" in content else next(iter(content))
    return media_type, resolve(content[media_type].get("schema", {}), document)


def page_parameter(name: str, schema: dict) -> dict:
    """A list's page-size parameter, defaulting to ``LIST_PAGE_SIZE``."""
    if name in PAGE_SIZE_PARAMETERS and "default" in schema:
        return {**schema, "default": LIST_PAGE_SIZE}
    return schema


def describe(tool_name_: str, summary: str, parameters: dict, result_fields) -> str:
    """Summary, guidance, paging and the result's fields: one line each."""
    lines = [summary.strip()]
    if tool_name_ in GUIDANCE:
        lines.append(GUIDANCE[tool_name_])
    for name in PAGE_SIZE_PARAMETERS:
        if name in parameters and "default" in parameters[name]:
            lines.append(
                PAGING.format(
                    size=parameters[name]["default"],
                    parameter=name,
                    maximum=parameters[name]["maximum"],
                )
            )
    if result_fields:
        lines.append("Result: " + ", ".join(result_fields) + ".")
    return "\n".join(lines)


def _object_schema(properties: dict, required: list[str]) -> dict:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = sorted(required)
    return schema


@dataclass(frozen=True)
class Operation:
    """One operation of the document, its shared parameters resolved."""

    path: str
    method: str
    spec: dict
    parameters: list[dict]

    @property
    def summary(self) -> str:
        return self.spec.get("summary", "")


def build_tool(
    name: str, operation: Operation, document: dict, *, status: str, summary: str,
    hidden: tuple[str, ...] = (), fixed_query: dict | None = None,
) -> Tool:  # fmt: skip
    """The tool of one operation, answering ``status``; ``hidden`` are query
    parameters it does not offer, ``fixed_query`` those it always sends."""
    fixed_query = fixed_query or {}
    parameters = [
        parameter
        for parameter in operation.parameters
        if parameter["in"] in ("path", "query")
        and parameter["name"] not in hidden
        and parameter["name"] not in fixed_query
    ]
    given, required = {}, []
    for parameter in parameters:
        schema = dict(parameter.get("schema", {}))
        if parameter.get("description") and (
            name not in FILTERS_OF_THE_LIST
            or (name != EXPORT_TOOL and parameter["name"] in OWN_PARAMETERS)
        ):
            schema.setdefault("description", parameter["description"])
        given[parameter["name"]] = page_parameter(parameter["name"], schema)
        if parameter.get("required"):
            required.append(parameter["name"])
    query_params = tuple(p["name"] for p in parameters if p["in"] == "query")
    result_fields = tuple(success_schema(operation.spec, status, document).get("properties", {}))
    own_params = ()
    if name == EXPORT_TOOL:
        given.update(EXPORT_ARGUMENTS)
        own_params = tuple(EXPORT_ARGUMENTS)
        result_fields += EXPORT_RESULT_FIELDS
    checked = dict(given)
    body = request_body(operation.spec, document)
    body_fields = None
    if body is not None:
        body_properties = body[1].get("properties", {})
        body_fields = tuple(name for name in body_properties if name not in given)
        checked.update({name: body_properties[name] for name in body_fields})
        required += body[1].get("required", [])
    advertised = trimmed(_object_schema(checked, required))
    return Tool(
        name=name,
        method=operation.method,
        path=operation.path,
        description=describe(name, summary, advertised["properties"], result_fields),
        input_schema=advertised,
        checked_schema=_object_schema(checked, required),
        path_params=tuple(p["name"] for p in parameters if p["in"] == "path"),
        query_params=query_params,
        body_fields=body_fields,
        body_media_type=body[0] if body else None,
        hints=hints_for(operation.method, status),
        result_fields=result_fields,
        fixed_query=fixed_query,
        own_params=own_params,
        page_size_param=next((p for p in PAGE_SIZE_PARAMETERS if p in query_params), None),
    )


def operations(document: dict):
    """Every operation of the document that gets a tool, by its tool's name."""
    for path, item in document["paths"].items():
        if path.startswith(EXCLUDED_PREFIXES):
            continue
        shared = item.get("parameters", [])
        for method, spec in item.items():
            if method in ("get", "post", "put", "delete"):
                parameters = resolve(shared + spec.get("parameters", []), document)
                yield tool_name(spec["operationId"]), Operation(path, method, spec, parameters)


def build_tools(document: dict) -> dict[str, Tool]:
    """Every tool the document gives, by name."""
    tools = {}
    for name, operation in operations(document):
        statuses = success_statuses(operation.spec)
        if name in VARIANTS:
            variant, summary, flag = VARIANTS[name]
            creates, overwrites = sorted(statuses, reverse=True)  # 201, then 200
            tools[name] = build_tool(
                name, operation, document, status=creates, summary=operation.summary,
                hidden=(flag,),
            )  # fmt: skip
            tools[variant] = build_tool(
                variant, operation, document, status=overwrites, summary=summary,
                fixed_query={flag: "true"},
            )  # fmt: skip
        else:
            tools[name] = build_tool(
                name, operation, document, status=statuses[0], summary=operation.summary,
                hidden=HIDDEN.get(name, ()),
            )  # fmt: skip
    return tools
