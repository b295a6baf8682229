"""Every size has a bound: a request exactly at it is accepted, one past it is refused.

The bounds are those of docs/api.md and docs/limits.md, which lists them all; the
last tests check that the document states the bounds tested here and the
rate-limit defaults of the code.
"""

import json
import re
from pathlib import Path

import pytest

from mapapi import config

from .factories import make_category, make_layer, make_location, make_map, make_tag

TWO_MIB = 2 * 1024 * 1024
LIMITS_DOC = Path(__file__).resolve().parent.parent / "docs" / "limits.md"
#: One character, four bytes in UTF-8, two UTF-16 units: lengths count characters.
WIDE = "👍"

#: (resource, field, maximum characters, minimum characters).
STRING_BOUNDS = [
    ("maps", "title", 200, 1),
    ("maps", "description", 10_000, 0),
    ("maps", "country", 100, 0),
    ("maps", "city", 100, 0),
    ("locations", "name", 200, 1),
    ("locations", "description", 10_000, 0),
    ("locations", "address", 500, 0),
    ("locations", "externalId", 200, 1),
    ("layers", "name", 100, 1),
    ("categories", "name", 100, 1),
    ("categories", "icon", 50, 0),
    ("tags", "name", 50, 1),
    ("keys", "name", 100, 1),
]


def assert_refused(response, status, code, *detail_path):
    """The error ``code``; with ``detail_path``, ``details`` holds exactly that path."""
    assert response.status_code == status, (
        response.status_code,
        response.get_data(as_text=True)[:300],
    )
    body = response.get_json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    if not detail_path:
        assert set(body["error"]) == {"code", "message"}, body
        return
    details = body["error"]["details"]
    for key in detail_path:
        assert list(details) == [key], body
        details = details[key]


def data_of(response, status=200):
    assert response.status_code == status, (
        response.status_code,
        response.get_data(as_text=True)[:300],
    )
    return response.get_json()["data"]


# --- body size -----------------------------------------------------------------------


def padded_body(fields: dict, size: int) -> bytes:
    """``fields`` as JSON, padded with white space (valid JSON) to exactly ``size`` bytes."""
    body = json.dumps(fields).encode()
    return body[:-1] + b" " * (size - len(body)) + b"}"


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_a_body_of_exactly_two_mib_is_accepted_and_one_byte_more_is_payload_too_large(api, method):
    path = "/maps" if method == "POST" else f"/maps/{make_map(api)['id']}"
    at_bound = padded_body({"title": "Two MiB"}, TWO_MIB)
    assert len(at_bound) == TWO_MIB
    response = api.request(method, path, data=at_bound, content_type="application/json")
    assert data_of(response, 201 if method == "POST" else 200)["title"] == "Two MiB"
    past = padded_body({"title": "One byte more"}, TWO_MIB + 1)
    response = api.request(method, path, data=past, content_type="application/json")
    assert_refused(response, 413, "PAYLOAD_TOO_LARGE")
    assert len(data_of(api.get("/maps"))["maps"]) == 1


# --- strings -------------------------------------------------------------------------


def create_in(api, resource, **fields):
    """POST ``fields`` over a minimal valid body of ``resource``: (response, item path)."""
    if resource == "maps":
        return api.post("/maps", json={"title": "t", **fields}), "/maps/{id}"
    if resource == "keys":
        return api.post("/keys", json={"name": "k", "scope": "READ_ONLY", **fields}), None
    map_id = make_map(api)["id"]
    minimal = {"locations": {"name": "n", "lat": 1, "lng": 2}}.get(resource, {"name": "n"})
    return api.post(
        f"/maps/{map_id}/{resource}", json={**minimal, **fields}
    ), f"/maps/{map_id}/{resource}/{{id}}"


def existing(api, resource) -> str:
    """The path of a new ``resource`` to PUT to."""
    if resource == "maps":
        return f"/maps/{make_map(api)['id']}"
    map_id = make_map(api)["id"]
    maker = {
        "locations": make_location,
        "layers": make_layer,
        "categories": make_category,
        "tags": make_tag,
    }
    return f"/maps/{map_id}/{resource}/{maker[resource](api, map_id)['id']}"


@pytest.mark.parametrize(
    "resource, field, maximum, minimum",
    STRING_BOUNDS,
    ids=[f"{r}.{f}" for r, f, _, _ in STRING_BOUNDS],
)
def test_a_string_at_its_maximum_is_stored_whole_and_one_character_more_is_refused(
    api, resource, field, maximum, minimum
):
    at_bound = "  a" + WIDE * (maximum - 1) + "\t\n"  # white space around is trimmed first
    assert len(at_bound.strip()) == maximum
    response, item = create_in(api, resource, **{field: at_bound})
    created = data_of(response, 201)
    assert created[field] == at_bound.strip()
    if item:
        assert data_of(api.get(item.format(id=created["id"])))[field] == at_bound.strip()

    response, _ = create_in(api, resource, **{field: WIDE * (maximum + 1)})
    assert_refused(response, 400, "VALIDATION_ERROR", field)
    if minimum:
        response, _ = create_in(api, resource, **{field: " \t "})
        assert_refused(response, 400, "VALIDATION_ERROR", field)

    if resource != "keys":  # keys have no PUT
        path = existing(api, resource)
        assert data_of(api.put(path, json={field: at_bound}))[field] == at_bound.strip()
        assert_refused(
            api.put(path, json={field: WIDE * (maximum + 1)}), 400, "VALIDATION_ERROR", field
        )
        assert data_of(api.get(path))[field] == at_bound.strip()


def test_a_bulk_item_is_held_to_the_same_string_bounds_by_index(api):
    map_id = make_map(api)["id"]
    items = [{"name": WIDE * 200, "lat": 0, "lng": 0}, {"name": WIDE * 201, "lat": 0, "lng": 0}]
    response = api.post(f"/maps/{map_id}/locations/bulk", json={"locations": items})
    assert_refused(response, 400, "VALIDATION_ERROR", "locations", "1", "name")
    assert data_of(api.get(f"/maps/{map_id}/locations"))["pagination"]["total"] == 0


# --- arrays --------------------------------------------------------------------------


def test_tag_ids_take_exactly_100_ids_as_sent_on_create_and_update(api):
    map_id = make_map(api)["id"]
    tags = [make_tag(api, map_id, name=f"tag {i}")["id"] for i in range(101)]
    path = f"/maps/{map_id}/locations"
    created = data_of(
        api.post(path, json={"name": "n", "lat": 0, "lng": 0, "tagIds": tags[:100]}), 201
    )
    assert data_of(api.get(f"{path}/{created['id']}"))["tagIds"] == tags[:100]
    assert_refused(
        api.post(path, json={"name": "n", "lat": 0, "lng": 0, "tagIds": tags}),
        400,
        "VALIDATION_ERROR",
        "tagIds",
    )
    # Counted as sent: 100 copies are fine (one is kept), 101 copies are not.
    assert data_of(api.put(f"{path}/{created['id']}", json={"tagIds": [tags[5]] * 100}))[
        "tagIds"
    ] == [tags[5]]
    response = api.put(f"{path}/{created['id']}", json={"tagIds": [tags[5]] * 101})
    assert_refused(response, 400, "VALIDATION_ERROR", "tagIds")
    response = api.put(f"{path}/{created['id']}", json={"tagIds": list(reversed(tags))})
    assert_refused(response, 400, "VALIDATION_ERROR", "tagIds")
    assert data_of(api.get(f"{path}/{created['id']}"))["tagIds"] == [tags[5]]
    assert data_of(api.get(path))["pagination"]["total"] == 1


def test_layer_ids_take_exactly_100_ids_as_sent(api):
    map_id = make_map(api)["id"]
    layers = [make_layer(api, map_id, name=f"layer {i}")["id"] for i in range(101)]
    path = f"/maps/{map_id}/locations/{make_location(api, map_id)['id']}/layers"
    shown = data_of(api.put(path, json={"layerIds": list(reversed(layers[:100]))}))
    assert [layer["id"] for layer in shown["layers"]] == layers[:100]  # by order
    assert_refused(api.put(path, json={"layerIds": layers}), 400, "VALIDATION_ERROR", "layerIds")
    assert len(data_of(api.put(path, json={"layerIds": [layers[100]] * 100}))["layers"]) == 1
    assert_refused(
        api.put(path, json={"layerIds": [layers[0]] * 101}), 400, "VALIDATION_ERROR", "layerIds"
    )
    assert [layer["id"] for layer in data_of(api.get(path[: -len("/layers")]))["layers"]] == [
        layers[100]
    ]


def test_a_bulk_takes_1_to_100_locations(api):
    map_id = make_map(api)["id"]
    path = f"/maps/{map_id}/locations/bulk"
    items = [{"name": f"spot {i}", "lat": i % 90, "lng": 0} for i in range(101)]
    created = data_of(api.post(path, json={"locations": items[:100]}), 201)
    assert created["count"] == 100 and [loc["name"] for loc in created["created"]] == [
        i["name"] for i in items[:100]
    ]
    assert_refused(api.post(path, json={"locations": items}), 400, "VALIDATION_ERROR", "locations")
    assert_refused(api.post(path, json={"locations": []}), 400, "VALIDATION_ERROR", "locations")
    assert data_of(api.get(f"/maps/{map_id}/locations"))["pagination"]["total"] == 100


# --- properties ----------------------------------------------------------------------


def properties_of_size(size: int) -> dict:
    """An object of exactly ``size`` bytes as compact UTF-8 JSON (``{"k":"…"}``: 8 bytes more)."""
    room = size - 8
    value = WIDE * (room // 4) + "é" * (room % 4 // 2) + "x" * (room % 2)
    properties = {"k": value}
    assert len(json.dumps(properties, separators=(",", ":"), ensure_ascii=False).encode()) == size
    return properties


def nested_properties(levels: int) -> dict:
    """An object nested ``levels`` deep (itself level 1), objects and arrays alternating."""
    value = "leaf"
    for level in range(levels - 1):
        value = [value] if level % 2 else {"k": value}
    return {"k": value}


def assert_properties_refused(api, path: str, location_id: str, created, updated) -> None:
    """``properties`` refused in a create (``created``) and in an update of
    ``location_id`` (``updated``), each a VALIDATION_ERROR naming the field."""
    responses = (
        api.post(path, json={"name": "n", "lat": 0, "lng": 0, "properties": created}),
        api.put(f"{path}/{location_id}", json={"properties": updated}),
    )
    for response in responses:
        assert_refused(response, 400, "VALIDATION_ERROR", "properties")


def test_properties_of_16384_bytes_as_compact_utf8_are_accepted_and_one_byte_more_is_refused(api):
    map_id = make_map(api)["id"]
    path = f"/maps/{map_id}/locations"
    at_bound = properties_of_size(16_384)
    # Sent escaped and indented, several times larger: the bound is on the compact UTF-8 form.
    raw = json.dumps(
        {"name": "n", "lat": 0, "lng": 0, "properties": at_bound}, indent=4, ensure_ascii=True
    )
    assert len(raw.encode()) > 3 * 16_384
    created = data_of(api.post(path, data=raw, content_type="application/json"), 201)
    assert data_of(api.get(f"{path}/{created['id']}"))["properties"] == at_bound
    past = properties_of_size(16_385)
    assert_properties_refused(api, path, created["id"], past, past)
    assert data_of(api.get(f"{path}/{created['id']}"))["properties"] == at_bound


def test_properties_nested_10_levels_are_accepted_and_11_are_refused(api):
    map_id = make_map(api)["id"]
    path = f"/maps/{map_id}/locations"
    for at_bound in (nested_properties(10), {"a": 1, "b": nested_properties(9)}):
        created = data_of(
            api.post(path, json={"name": "n", "lat": 0, "lng": 0, "properties": at_bound}), 201
        )
        assert data_of(api.get(f"{path}/{created['id']}"))["properties"] == at_bound
    past = nested_properties(11)
    assert_properties_refused(api, path, created["id"], past, {"a": [past]})


# --- pages ---------------------------------------------------------------------------

LISTS = [
    "/maps",
    "/maps/{map}/locations",
    "/maps/{map}/categories",
    "/maps/{map}/tags",
    "/maps/{map}/layers",
    "/keys",
]


def test_a_page_holds_at_most_100_items(api):
    for index in range(101):
        make_map(api, title=f"map {index}")
    page = data_of(api.get("/maps?pageSize=100"))
    assert len(page["maps"]) == 100
    assert page["pagination"] == {"total": 101, "page": 1, "pageSize": 100, "totalPages": 2}
    assert len(data_of(api.get("/maps?pageSize=100&page=2"))["maps"]) == 1


@pytest.mark.parametrize("path", LISTS)
def test_every_list_accepts_page_size_100_and_refuses_101_and_0(api, path):
    path = path.format(map=make_map(api)["id"])
    assert data_of(api.get(f"{path}?pageSize=100"))["pagination"]["pageSize"] == 100
    for size in ("101", "0"):
        assert_refused(api.get(f"{path}?pageSize={size}"), 400, "VALIDATION_ERROR", "pageSize")


def test_a_page_number_has_no_bound_but_the_4300_digits_python_reads(api):
    page = "9" * 4300
    listed = data_of(api.get(f"/maps?page={page}"))
    assert listed["maps"] == [] and listed["pagination"]["page"] == int(page)
    assert_refused(api.get(f"/maps?page={'9' * 4301}"), 400, "VALIDATION_ERROR", "page")


# --- keys ----------------------------------------------------------------------------


def test_an_account_holds_10_active_keys_and_the_11th_is_a_conflict(api):
    # The fixture's key is the first.
    made = [
        data_of(api.post("/keys", json={"name": f"key {i}", "scope": "READ_ONLY"}), 201)
        for i in range(9)
    ]
    assert_refused(
        api.post("/keys", json={"name": "eleventh", "scope": "READ_ONLY"}), 409, "CONFLICT"
    )
    assert data_of(api.get("/keys"))["pagination"]["total"] == 10
    data_of(api.delete(f"/keys/{made[0]['id']}"))
    data_of(api.post("/keys", json={"name": "tenth again", "scope": "READ_ONLY"}), 201)


# --- the document --------------------------------------------------------------------


def doc_rows() -> list[str]:
    return [
        line for line in LIMITS_DOC.read_text(encoding="utf-8").splitlines() if line.startswith("|")
    ]


def number_written(value: int) -> str:
    return rf"(?<![\d,]){value:,}(?![\d,])|(?<![\d,]){value}(?![\d,])"


@pytest.mark.parametrize(
    "resource, field, maximum, minimum",
    STRING_BOUNDS,
    ids=[f"{r}.{f}" for r, f, _, _ in STRING_BOUNDS],
)
def test_limits_doc_states_each_string_bound(resource, field, maximum, minimum):
    singular = {
        "maps": "Map",
        "locations": "Location",
        "layers": "Layer",
        "categories": "Category",
        "tags": "Tag",
        "keys": "API key",
    }
    rows = [r for r in doc_rows() if f"`{field}`" in r and singular[resource] in r.split("|")[1]]
    assert len(rows) == 1, rows
    assert re.search(rf"{minimum}\.\.({number_written(maximum)})", rows[0].replace("`", "")), rows[
        0
    ]


@pytest.mark.parametrize(
    "what, numbers",
    [
        ("request body", ["2 MiB", "2,097,152", "PAYLOAD_TOO_LARGE"]),
        ("`tagIds`", ["100"]),
        ("`layerIds`", ["100"]),
        ("bulk `locations`", ["1..100"]),
        ("upsert `locations`", ["1..100"]),
        ("bulk delete `ids` or `externalIds`", ["1..100", "200"]),
        ("`externalId` filter", ["100", "200"]),
        ("`properties` size", ["16,384"]),
        ("`properties` nesting", ["10"]),
        ("`pageSize`", ["100"]),
        ("active API keys", ["10", "CONFLICT"]),
        ("`X-Request-Id`", ["128"]),
    ],
)
def test_limits_doc_states_each_other_bound(what, numbers):
    rows = [r for r in doc_rows() if what.lower() in r.split("|")[1].lower()]
    assert len(rows) == 1, (what, rows)
    for number in numbers:
        assert number in rows[0], (what, number, rows[0])


@pytest.mark.parametrize(
    "setting", ["RATELIMIT_GENERAL", "RATELIMIT_MAP_CREATE", "RATELIMIT_BULK", "RATELIMIT_SYNC"]
)
def test_limits_doc_states_the_rate_limit_defaults_of_the_code(setting):
    default = config.defaults("instance")[setting]
    variable = next(name for name, key in config.ENVIRONMENT.items() if key == setting)
    rows = [r for r in doc_rows() if f"`{variable}`" in r]
    assert len(rows) == 1 and default in rows[0], (default, rows)
