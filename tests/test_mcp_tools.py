"""The MCP tools as built from the OpenAPI document: their schemas, hints,
descriptions and sizes, the check of a call's arguments, and the bounds of
an answer. No server: the document is built from the app's routes."""

import json
import math
import re

import mcp_types as types
import pytest
from flask import Flask

from mapapi.api import register_blueprints
from mapapi.contract.openapi import build_document
from mapapi.mcp.arguments import ArgumentErrors, checked, request_for
from mapapi.mcp.export import feature
from mapapi.mcp.results import TEXT_LIMIT, success
from mapapi.mcp.server import listing
from mapapi.mcp.tools import EXCLUDED_PREFIXES, build_tools, tool_name


@pytest.fixture(scope="module")
def document():
    app = Flask("mapapi")
    register_blueprints(app)
    return build_document(app)


@pytest.fixture(scope="module")
def tools(document):
    return build_tools(document)


def resolved(schema, document):
    """The test's own $ref resolution."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            _, _, kind, name = schema["$ref"].split("/")
            return resolved(document["components"][kind][name], document)
        return {key: resolved(value, document) for key, value in schema.items()}
    if isinstance(schema, list):
        return [resolved(item, document) for item in schema]
    return schema


def operations(document):
    """(tool name, path, method, operation) of every operation that has a tool."""
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in ("get", "post", "put", "delete") and not path.startswith(EXCLUDED_PREFIXES):
                yield tool_name(operation["operationId"]), path, method, operation


# --- one tool per operation, its arguments flat -------------------------------------------


def test_every_operation_but_keys_and_webhooks_is_a_tool_with_flat_arguments(document, tools):
    names = set()
    for name, path, method, operation in operations(document):
        names.add(name)
        tool = tools[name]
        parameters = resolved(document["paths"][path].get("parameters", []), document)
        parameters += resolved(operation.get("parameters", []), document)
        expected = {p["name"] for p in parameters if p["in"] in ("path", "query")}
        body = operation.get("requestBody")
        if body:
            media = body["content"].get("application/json") or next(iter(body["content"].values()))
            schema = resolved(media["schema"], document)
            expected |= {
                field for field, spec in schema["properties"].items() if not spec.get("readOnly")
            }
        if name == "import_geojson":
            expected.discard("upsert")  # upsert_geojson is the import that overwrites
        if name == "export_geojson":
            expected |= {"limit", "cursor"}  # its pages
        if name == "cluster_locations":  # the filters an agent uses list_locations for
            expected -= {"q", "categoryId", "tagId", "updatedSince", "externalId"}
        schema = tool.input_schema
        assert set(schema["properties"]) == expected, name
        assert schema["additionalProperties"] is False, name
        assert "body" not in schema["properties"], name
        path_names = set(re.findall(r"{(\w+)}", path))
        assert path_names <= set(schema.get("required", ())), name
    assert names | {"upsert_geojson"} == set(tools)
    assert not any("key" in name or "webhook" in name for name in tools)
    for name in ("list_maps", "create_map", "list_locations", "create_locations",
                 "set_location_layers", "export_geojson", "upsert_locations"):  # fmt: skip
        assert name in tools


def test_the_export_takes_the_filters_of_the_list(tools):
    export, listed = tools["export_geojson"], tools["list_locations"]
    assert set(export.query_params) <= set(listed.query_params)


# --- hints by effect -------------------------------------------------------------------------

PURE_CREATES = {
    "create_map", "create_location", "create_locations", "create_category", "create_tag",
    "create_layer", "import_geojson",
}  # fmt: skip
OVERWRITING_POSTS = {"upsert_locations", "bulk_delete_locations", "upsert_geojson"}


def expected_hints(name: str, method: str) -> tuple[bool, bool, bool]:
    """(readOnly, destructive, idempotent) as the contract lists them."""
    if method == "get":
        return True, False, False
    if method in ("put", "delete") or name in OVERWRITING_POSTS:
        return False, True, True
    assert name in PURE_CREATES, name
    return False, False, False


def test_every_tools_hints_follow_what_its_operation_does(document, tools):
    methods = {name: method for name, _path, method, _op in operations(document)}
    methods["upsert_geojson"] = "post"
    result = listing(tools, read_only=False)
    assert {tool.name for tool in result.tools} == set(tools)
    for tool in result.tools:
        hints = tool.annotations
        expected = expected_hints(tool.name, methods[tool.name])
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == expected, tool.name
        assert hints.open_world_hint is False, tool.name
    for name in ("delete_map", "update_location", "set_location_layers", "bulk_delete_locations"):
        assert tools[name].hints.destructive and tools[name].hints.idempotent


def test_read_only_lists_only_the_tools_that_read(tools):
    listed = {tool.name for tool in listing(tools, read_only=True).tools}
    assert listed == {name for name, tool in tools.items() if tool.hints.read_only}
    assert {"list_maps", "get_location", "export_geojson", "list_events"} <= listed
    assert not listed & {"create_map", "delete_map", "upsert_locations"}


# --- sizes and descriptions ------------------------------------------------------------------


def test_the_whole_tool_list_is_at_most_24000_characters_as_the_sdk_sends_it(tools):
    for read_only in (False, True):
        result = listing(tools, read_only)
        message = types.JSONRPCResponse(
            jsonrpc="2.0", id=1, result=result.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        sent = message.model_dump_json(by_alias=True, exclude_none=True)
        assert len(sent) <= 24_000, len(sent)


def described_fields(description: str) -> list[str]:
    (line,) = [line for line in description.splitlines() if line.startswith("Result: ")]
    return line.removeprefix("Result: ").removesuffix(".").split(", ")


def test_every_description_names_exactly_the_fields_its_result_has(document, tools):
    for name, _path, _method, operation in operations(document):
        statuses = sorted(s for s in operation["responses"] if s.startswith("2"))
        answers = {name: statuses[-1]}  # the 201 of the import; the only one elsewhere
        if name == "import_geojson":
            answers["upsert_geojson"] = statuses[0]
        for tool, status in answers.items():
            content = operation["responses"][status]["content"]
            schema = resolved(next(iter(content.values()))["schema"], document)
            data = schema["properties"].get("data", schema)
            expected = set(data["properties"])
            if tool == "export_geojson":
                expected |= {"total", "next"}
            assert set(described_fields(tools[tool].description)) == expected, tool


def test_descriptions_repeat_no_sentence_and_have_no_stray_indentation(tools):
    for tool in tools.values():
        text = tool.description
        assert text == text.strip() and "  " not in text and "\t" not in text, tool.name
        assert all(line == line.strip() and line for line in text.splitlines()), tool.name
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s]
        assert len(sentences) == len(set(sentences)), tool.name
        assert len(text) <= 400, tool.name


# --- the mistakes agents make ----------------------------------------------------------------

M, L = "Wf1LpVboBlrRBuHWGMogQa", "Xk2LpVboBlrRBuHWGMogQb"
PLACE = {"mapId": M, "name": "Fábrica", "lat": 38.7139, "lng": -9.1447}
MISTAKES = [
    # (tool, arguments, sentences the error must have)
    ("create_map", {"body": {"title": "Cafés"}}, ["body: no such argument; pass title flat", "title: required"]),
    ("create_map", {}, ["title: required"]),
    ("create_map", {"title": "Cafés", "style": "Dark"}, ['style: one of "streets"', 'not "Dark" (did you mean dark?)']),
    ("create_map", {"title": "Cafés", "public": "true"}, ["public: a boolean, not a string"]),
    ("create_map", {"title": "Cafés", "zoom": "12"}, ["zoom: a number or null, not a string"]),
    ("create_map", {"titel": "Cafés"}, ["titel: no such argument (did you mean title?)", "title: required"]),
    ("create_layer", {"mapId": M, "name": "Fav", "colour": "#22C55E"}, ["colour: no such argument (did you mean color?)"]),
    ("create_layer", {"mapId": M, "name": "Fav", "color": "green"}, ["color: must match ^#[0-9A-Fa-f]{6}$"]),
    ("create_location", {**PLACE, "lat": "38.7139"}, ["lat: a number, not a string"]),
    ("create_location", {**PLACE, "lat": 138.7}, ["lat: -90 to 90, not 138.7"]),
    ("create_location", {"mapId": M, "name": "Fábrica", "lat": 38.7}, ["lng: required"]),
    ("create_location", {**PLACE, "tagIds": "t1"}, ["tagIds: an array, not a string"]),
    ("create_location", {**PLACE, "mapid": M}, ["mapid: no such argument (did you mean mapId?)"]),
    ("get_map", {"id": M}, ["mapId: required", "id: no such argument"]),
    ("get_location", {"mapId": M}, ["locId: required"]),
    ("update_map", {"mapId": M, "centerLat": math.nan}, ["centerLat: a finite number"]),
    ("create_map", {"title": "T", "zoom": math.inf}, ["zoom: a finite number"]),
    ("create_locations", {"mapId": M, "locations": [{**PLACE, "properties": {"x": [1, -math.inf]}}]},
     ["locations[0].properties.x[1]: a finite number"]),
    ("update_layer", {"mapId": M, "layerId": L, "order": 1.5}, ["order: an integer, not a number"]),
    ("list_locations", {"mapId": M, "pageSize": "20"}, ["pageSize: an integer, not a string"]),
    ("list_locations", {"mapId": M, "page": 2.0}, ["page: an integer, not a number"]),
    ("list_locations", {"mapId": M, "pageSize": 500}, ["pageSize: 1 to 100, not 500"]),
    ("list_locations", {"mapId": M, "sort": "name desc"}, ['sort: one of "createdAt"']),
    ("list_locations", {"mapId": M, "tagId": "t1"}, ["tagId: an array, not a string"]),
    ("create_locations", {"mapId": M, "locations": [PLACE, {"name": "b", "lat": 100}]},
     ["locations[1].lat: -90 to 90, not 100", "locations[1].lng: required"]),
    ("create_locations", {"mapId": M, "locations": [{"name": "a", "lat": 1, "lng": 2}] * 101},
     ["locations: 1 to 100 items, not 101"]),
    ("upsert_locations", {"mapId": M, "locations": [{"name": "a", "lat": 1, "lng": 2}]},
     ["locations[0].externalId: required"]),
    ("bulk_delete_locations", {"mapId": M, "ids": L}, ["ids: an array, not a string"]),
    ("set_location_layers", {"mapId": M, "locId": L}, ["layerIds: required"]),
    ("import_geojson", {"mapId": M, "type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": ["-9.14", "38.71"]},
         "properties": {"name": "Fábrica"}}]},
     ["features[0].geometry.coordinates[0]: a number, not a string"]),
    ("import_geojson", {"mapId": M, "features": []}, ["type: required", "features: 1 to 1000 items, not 0"]),
    ("export_geojson", {"mapId": M, "limit": 500, "cursor": "next"},
     ["limit: 1 to 200, not 500", "cursor: must match ^[0-9]+$"]),
    ("list_events", {"limit": 0}, ["limit: 1 to 100, not 0"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "arguments", "sentences"), MISTAKES)
def test_a_call_that_does_not_fit_names_every_argument_at_fault(tools, name, arguments, sentences):
    with pytest.raises(ArgumentErrors) as raised:
        checked(tools[name], arguments)
    text = raised.value.text()
    assert text.startswith("Invalid arguments; nothing was sent:")
    for sentence in sentences:
        assert sentence in text, (text, sentence)
    assert len(raised.value.sentences) == len(set(raised.value.sentences))


FITTING = [
    # (tool, arguments, (path, query, body) of the request they make)
    ("create_map", {"title": "Cafés"}, ("/api/v1/maps", [], {"title": "Cafés"})),
    ("list_events", {"after": None}, ("/api/v1/events", [("limit", "20")], None)),
    ("list_events", {"after": "latest", "limit": 5}, ("/api/v1/events", [("after", "latest"), ("limit", "5")], None)),
    ("list_locations", {"mapId": M, "bbox": None, "q": None, "page": 2},
     (f"/api/v1/maps/{M}/locations", [("page", "2"), ("pageSize", "20")], None)),
    ("list_locations", {"mapId": M, "tagId": ["a", "b"], "pageSize": 100},
     (f"/api/v1/maps/{M}/locations", [("pageSize", "100"), ("tagId", "a"), ("tagId", "b")], None)),
    ("update_location", {"mapId": M, "locId": L, "categoryId": None},
     (f"/api/v1/maps/{M}/locations/{L}", [], {"categoryId": None})),
    # A body field that takes no null: null is the field left out.
    ("create_map", {"title": "T", "description": None}, ("/api/v1/maps", [], {"title": "T"})),
    ("update_map", {"mapId": M, "title": None, "description": None, "centerLat": None},
     (f"/api/v1/maps/{M}", [], {"centerLat": None})),
    ("create_locations", {"mapId": M, "locations": [{**PLACE, "address": None, "properties": {"a": None}}]},
     (f"/api/v1/maps/{M}/locations/bulk", [], {"locations": [{**PLACE, "properties": {"a": None}}]})),
    ("export_geojson", {"mapId": M, "cursor": None, "limit": None},
     (f"/api/v1/maps/{M}/locations.geojson", [], None)),
    # What a read gave, sent back: the read-only fields are accepted and ignored, as the API does.
    ("update_map", {"mapId": M, "id": M, "title": "New", "createdAt": "2026-01-01T00:00:00.000Z"},
     (f"/api/v1/maps/{M}", [], {"title": "New", "id": M, "createdAt": "2026-01-01T00:00:00.000Z"})),
    ("upsert_geojson", {"mapId": M, "type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": [1, 2]},
         "properties": {"externalId": "A1"}}]},
     (f"/api/v1/maps/{M}/locations/import", [("upsert", "true")], None)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "arguments", "made"), FITTING)
def test_a_call_that_fits_makes_its_request(tools, name, arguments, made):
    request = request_for(tools[name], checked(tools[name], arguments))
    path, query, body = made
    assert request.path == path
    assert sorted(request.query) == sorted(query)
    if body is not None:
        assert request.body == body


# --- bounded answers -------------------------------------------------------------------------


def location(number: int, long_text: int = 3000) -> dict:
    return {
        "id": f"loc{number:06d}", "mapId": M, "name": f"Place {number}", "lat": 1.0, "lng": 2.0,
        "description": "é" * long_text, "address": "", "categoryId": None, "properties": {},
        "externalId": None, "tagIds": [], "layers": [], "createdAt": "2026-01-01T00:00:00.000Z",
        "updatedAt": "2026-01-01T00:00:00.000Z",
    }  # fmt: skip


def text_of(result) -> str:
    return "\n".join(item.text for item in result.content)


@pytest.mark.parametrize(("page", "page_size"), [(1, 100), (2, 100), (3, 20), (1, 1)])
def test_a_page_too_long_is_the_smaller_page_that_starts_where_it_does(page, page_size):
    total = 500
    start = (page - 1) * page_size
    items = [location(n) for n in range(start, min(start + page_size, total))]
    data = {"locations": items, "pagination": {
        "total": total, "page": page, "pageSize": page_size, "totalPages": math.ceil(total / page_size)}}  # fmt: skip
    result = success(data)
    assert len(text_of(result)) <= TEXT_LIMIT
    kept = result.structured_content
    assert json.loads(result.content[0].text) == kept
    smaller = kept["pagination"]
    assert (smaller["page"] - 1) * smaller["pageSize"] == start
    assert kept["locations"] == items[: smaller["pageSize"]]
    assert smaller["totalPages"] == math.ceil(total / smaller["pageSize"])
    assert f"page={smaller['page'] + 1}, pageSize={smaller['pageSize']}" in result.content[1].text


def test_one_item_too_long_keeps_its_shape_with_its_longest_values_cut():
    huge = location(1, long_text=10_000)
    huge["properties"] = {f"key{n}": "v" * 100 for n in range(150)}
    huge["layers"] = [{"id": f"layer{n}", "name": "x" * 80, "color": "#3B82F6"} for n in range(100)]
    for data in (huge, {"locations": [huge], "pagination": {
            "total": 1, "page": 1, "pageSize": 20, "totalPages": 1}}):  # fmt: skip
        result = success(data)
        assert len(text_of(result)) <= TEXT_LIMIT
        assert "longest values are cut" in result.content[1].text
    single = success(huge).structured_content
    assert set(single) == set(huge)
    assert single["id"] == huge["id"] and single["name"] == huge["name"]
    assert single["description"].endswith("…[cut]")


def test_a_feed_too_long_ends_at_the_last_event_it_keeps():
    events = [{"id": str(n), "type": "location.created", "data": location(n)} for n in range(50)]
    result = success({"events": events, "next": "50", "hasMore": False})
    kept = result.structured_content
    assert len(text_of(result)) <= TEXT_LIMIT
    assert kept["events"] == events[: len(kept["events"])]
    assert kept["next"] == kept["events"][-1]["id"] and kept["hasMore"] is True


def test_a_feature_is_what_the_export_writes():
    place = location(1, long_text=5)
    place["layers"] = [{"id": "b"}, {"id": "a"}]
    written = feature(place)
    assert written["geometry"] == {"type": "Point", "coordinates": [2.0, 1.0]}
    assert written["properties"]["layerIds"] == ["b", "a"]
