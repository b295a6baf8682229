"""Locations: create, validate, read, list, update, delete; layer memberships."""

import json
import time

import pytest

from .factories import (
    error_code,
    make_category,
    make_layer,
    make_location,
    make_map,
    make_tag,
)
from .helpers import LAYER_FIELDS, LOCATION_FIELDS, TICK, TIMESTAMP
from .helpers import data_of as data
from .helpers import validation_details as details


def assert_messages(value):
    """A field's error entry: a non-empty list of human sentences, or such
    lists keyed by index when the field is an array (``{"0": [...]}``)."""
    if isinstance(value, dict):
        assert value and all(isinstance(key, str) for key in value), value
        for entry in value.values():
            assert_messages(entry)
        return
    assert isinstance(value, list) and value, value
    assert all(isinstance(message, str) and message for message in value), value


def exactly(value) -> str:
    """JSON text keeping key order and the distinction of 1, 1.0 and true."""
    return json.dumps(value, ensure_ascii=False)


def locations_path(map_id):
    return f"/maps/{map_id}/locations"


def location_path(map_id, location_id):
    return f"/maps/{map_id}/locations/{location_id}"


def get_location(api, map_id, location_id):
    return data(api.get(location_path(map_id, location_id)))


def list_locations(api, map_id, query=""):
    return data(api.get(locations_path(map_id) + query))


def assert_no_locations(api, map_id):
    listed = list_locations(api, map_id)
    assert listed["locations"] == []
    assert listed["pagination"]["total"] == 0


def nested(levels: int, kind: str = "object"):
    """A properties object nested ``levels`` deep (the object itself is level 1)."""
    inner = {} if kind == "object" else []
    for _ in range(levels - 2):
        inner = {"a": inner} if kind == "object" else [inner]
    return {"a": inner} if levels > 1 else {}


def properties_of_size(size: int, char: str = "x") -> dict:
    """``{"k": "<chars>"}`` whose compact UTF-8 JSON is exactly ``size`` bytes."""
    overhead = len(b'{"k":""}')
    width = len(char.encode("utf-8"))
    count, rest = divmod(size - overhead, width)
    value = {"k": char * count + "x" * rest}
    assert len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) == size
    return value


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


@pytest.fixture
def other_map_id(api):
    return make_map(api, title="Other map")["id"]


# --- create -------------------------------------------------------------------


def test_create_location_applies_defaults(api, map_id):
    response = api.post(locations_path(map_id), json={"name": "Spot", "lat": 48.5, "lng": 2.25})
    created = data(response, 201)
    assert set(created) == LOCATION_FIELDS
    assert created["mapId"] == map_id
    assert created["name"] == "Spot" and created["lat"] == 48.5 and created["lng"] == 2.25
    assert created["description"] == "" and created["address"] == ""
    assert created["categoryId"] is None
    assert created["tagIds"] == [] and created["properties"] == {} and created["layers"] == []
    assert isinstance(created["id"], str) and len(created["id"]) >= 16
    assert TIMESTAMP.match(created["createdAt"])
    assert created["createdAt"] == created["updatedAt"]
    assert get_location(api, map_id, created["id"]) == created
    assert list_locations(api, map_id)["locations"] == [created]


def test_create_location_stores_every_writable_field(api, map_id):
    category = make_category(api, map_id)
    tag = make_tag(api, map_id)
    body = {
        "name": "Café",
        "lat": -33.25,
        "lng": 151,
        "description": "Good coffee",
        "address": "1 Main St",
        "categoryId": category["id"],
        "tagIds": [tag["id"]],
        "properties": {"externalId": "abc-1"},
    }
    created = data(api.post(locations_path(map_id), json=body), 201)
    assert {name: created[name] for name in body} == body
    assert get_location(api, map_id, created["id"]) == created


@pytest.mark.parametrize("missing", ["name", "lat", "lng"])
def test_create_location_requires_name_lat_and_lng(api, map_id, missing):
    body = {"name": "Spot", "lat": 1, "lng": 2}
    del body[missing]
    found = details(api.post(locations_path(map_id), json=body))
    assert set(found) == {missing}
    assert_messages(found[missing])
    assert_no_locations(api, map_id)


@pytest.mark.parametrize("lat, lng", [(-90, -180), (90, 180), (-90.0, 180.0)])
def test_coordinates_at_the_range_edges_are_accepted(api, map_id, lat, lng):
    created = data(api.post(locations_path(map_id), json={"name": "Edge", "lat": lat, "lng": lng}), 201)
    assert created["lat"] == lat and created["lng"] == lng
    fetched = get_location(api, map_id, created["id"])
    assert fetched["lat"] == lat and fetched["lng"] == lng


@pytest.mark.parametrize(
    "field, value",
    [("lat", -90.000001), ("lat", 90.000001), ("lat", 91), ("lng", -180.000001), ("lng", 180.000001), ("lng", -181)],
)
def test_coordinates_just_outside_the_range_are_refused(api, map_id, field, value):
    body = {"name": "Out", "lat": 0, "lng": 0, field: value}
    found = details(api.post(locations_path(map_id), json=body))
    assert set(found) == {field}
    assert_messages(found[field])
    assert_no_locations(api, map_id)


def test_strings_are_trimmed_and_otherwise_kept_as_sent(api, map_id):
    body = {
        "name": " \t Café  de\u00a0Flore \n",
        "lat": 1,
        "lng": 2,
        "description": "  line one\n  line two  ",
        "address": "   ",
        "properties": {"note": "  not trimmed  "},
    }
    created = data(api.post(locations_path(map_id), json=body), 201)
    assert created["name"] == "Café  de\u00a0Flore"
    assert created["description"] == "line one\n  line two"
    assert created["address"] == ""
    assert created["properties"] == {"note": "  not trimmed  "}
    assert get_location(api, map_id, created["id"]) == created


def test_strings_are_not_unicode_normalized(api, map_id):
    decomposed = "Cafe\u0301"
    created = data(api.post(locations_path(map_id), json={"name": decomposed, "lat": 1, "lng": 2}), 201)
    assert created["name"] == decomposed
    assert get_location(api, map_id, created["id"])["name"] == decomposed


@pytest.mark.parametrize("field, maximum", [("name", 200), ("description", 10_000), ("address", 500)])
def test_string_lengths_are_counted_after_trimming(api, map_id, field, maximum):
    longest = "é" * (maximum - 1) + "😀"
    body = {"name": "Spot", "lat": 1, "lng": 2, field: "  " + longest + "  "}
    created = data(api.post(locations_path(map_id), json=body), 201)
    assert created[field] == longest
    assert get_location(api, map_id, created["id"])[field] == longest

    too_long = {"name": "Spot", "lat": 1, "lng": 2, field: "x" * (maximum + 1)}
    found = details(api.post(locations_path(map_id), json=too_long))
    assert set(found) == {field}
    assert_messages(found[field])
    assert len(list_locations(api, map_id)["locations"]) == 1


@pytest.mark.parametrize("name", ["", "   ", "\n\t"])
def test_name_empty_after_trimming_is_refused(api, map_id, name):
    found = details(api.post(locations_path(map_id), json={"name": name, "lat": 1, "lng": 2}))
    assert set(found) == {"name"}
    assert_no_locations(api, map_id)


@pytest.mark.parametrize(
    "field, value",
    [
        ("lat", "1.5"),
        ("lat", True),
        ("lat", None),
        ("lng", "2"),
        ("lng", None),
        ("name", 5),
        ("name", None),
        ("description", None),
        ("description", 1),
        ("address", None),
        ("categoryId", 5),
        ("tagIds", "abc"),
        ("tagIds", None),
        ("tagIds", [1]),
        ("properties", []),
        ("properties", "x"),
        ("properties", None),
    ],
)
def test_values_of_the_wrong_json_type_are_refused(api, map_id, field, value):
    body = {"name": "Spot", "lat": 1, "lng": 2, field: value}
    found = details(api.post(locations_path(map_id), json=body))
    assert set(found) == {field}
    assert_messages(found[field])
    assert_no_locations(api, map_id)


@pytest.mark.parametrize(
    "raw, field",
    [
        ('{"name":"a","lat":NaN,"lng":1}', "lat"),
        ('{"name":"a","lat":1,"lng":Infinity}', "lng"),
        ('{"name":"a","lat":-Infinity,"lng":1}', "lat"),
        ('{"name":"a","lat":1,"lng":1,"properties":{"x":NaN}}', "properties"),
        ('{"name":"a","lat":1,"lng":1,"properties":{"x":[1,Infinity]}}', "properties"),
    ],
)
def test_nan_and_infinity_literals_are_field_errors(api, map_id, raw, field):
    response = api.post(locations_path(map_id), data=raw, content_type="application/json")
    found = details(response)
    assert set(found) == {field}
    assert_messages(found[field])
    assert_no_locations(api, map_id)


@pytest.mark.parametrize(
    "field, value",
    [
        ("name", "a\u0000b"),
        ("description", "\u0000"),
        ("address", "x\u0000"),
        ("properties", {"note": "a\u0000b"}),
        ("properties", {"a\u0000b": 1}),
        ("properties", {"list": [{"deep": ["ok", "\u0000"]}]}),
    ],
)
def test_nul_character_is_refused_anywhere(api, map_id, field, value):
    body = {"name": "Spot", "lat": 1, "lng": 2, field: value}
    found = details(api.post(locations_path(map_id), json=body))
    assert set(found) == {field}
    assert_messages(found[field])
    assert_no_locations(api, map_id)


@pytest.mark.parametrize("unknown", ["color", "slug", "Name"])
def test_unknown_field_is_refused_and_named(api, map_id, unknown):
    body = {"name": "Spot", "lat": 1, "lng": 2, unknown: "x"}
    found = details(api.post(locations_path(map_id), json=body))
    assert set(found) == {unknown}
    assert_messages(found[unknown])
    assert_no_locations(api, map_id)


def test_read_only_fields_are_ignored_on_create(api, map_id, other_map_id):
    body = {
        "name": "Spot",
        "lat": 1,
        "lng": 2,
        "id": "forged-id",
        "mapId": other_map_id,
        "createdAt": "2000-01-01T00:00:00.000Z",
        "updatedAt": 12,
        "layers": [{"id": "nope"}],
    }
    created = data(api.post(locations_path(map_id), json=body), 201)
    assert created["id"] != "forged-id"
    assert created["mapId"] == map_id
    assert not created["createdAt"].startswith("2000")
    assert created["updatedAt"] == created["createdAt"]
    assert created["layers"] == []
    assert get_location(api, map_id, created["id"]) == created
    assert list_locations(api, other_map_id)["locations"] == []
    assert error_code(api.get(location_path(map_id, "forged-id"))) == "NOT_FOUND"


# --- references -----------------------------------------------------------------


def test_category_and_tags_of_the_same_map_are_stored(api, map_id):
    category = make_category(api, map_id)
    tag = make_tag(api, map_id)
    created = make_location(api, map_id, categoryId=category["id"], tagIds=[tag["id"]])
    assert created["categoryId"] == category["id"]
    assert created["tagIds"] == [tag["id"]]


@pytest.mark.parametrize("field", ["categoryId", "tagIds"])
def test_references_to_another_map_are_refused_on_create(api, map_id, other_map_id, field):
    own_tag = make_tag(api, map_id, name="own")
    foreign = {
        "categoryId": make_category(api, other_map_id)["id"],
        "tagIds": [own_tag["id"], make_tag(api, other_map_id)["id"]],
    }
    body = {"name": "Spot", "lat": 1, "lng": 2, field: foreign[field]}
    found = details(api.post(locations_path(map_id), json=body))
    assert set(found) == {field}
    assert_messages(found[field])
    assert_no_locations(api, map_id)
    assert_no_locations(api, other_map_id)


@pytest.mark.parametrize("field, value", [("categoryId", "no-such-category"), ("tagIds", ["no-such-tag"])])
def test_unknown_reference_ids_are_refused(api, map_id, field, value):
    found = details(api.post(locations_path(map_id), json={"name": "Spot", "lat": 1, "lng": 2, field: value}))
    assert set(found) == {field}
    assert_no_locations(api, map_id)


def test_references_of_another_account_are_refused(api, other_api, map_id):
    foreign_map = make_map(other_api)["id"]
    category = make_category(other_api, foreign_map)
    found = details(api.post(locations_path(map_id), json={"name": "S", "lat": 1, "lng": 2, "categoryId": category["id"]}))
    assert set(found) == {"categoryId"}
    assert_no_locations(api, map_id)


@pytest.mark.parametrize("field", ["categoryId", "tagIds"])
def test_references_to_another_map_are_refused_on_update(api, map_id, other_map_id, field):
    location = make_location(api, map_id)
    foreign = {
        "categoryId": make_category(api, other_map_id)["id"],
        "tagIds": [make_tag(api, other_map_id)["id"]],
    }
    found = details(api.put(location_path(map_id, location["id"]), json={"name": "New", field: foreign[field]}))
    assert set(found) == {field}
    assert get_location(api, map_id, location["id"]) == location


def test_tag_ids_duplicates_collapse_in_the_order_first_given(api, map_id):
    t1, t2, t3 = (make_tag(api, map_id, name=name)["id"] for name in ("one", "two", "three"))
    created = make_location(api, map_id, tagIds=[t2, t1, t2, t3, t1])
    assert created["tagIds"] == [t2, t1, t3]
    assert get_location(api, map_id, created["id"])["tagIds"] == [t2, t1, t3]

    updated = data(api.put(location_path(map_id, created["id"]), json={"tagIds": [t3, t3, t1]}))
    assert updated["tagIds"] == [t3, t1]
    assert get_location(api, map_id, created["id"])["tagIds"] == [t3, t1]


def test_at_most_100_tag_ids_are_accepted(api, map_id):
    tags = [make_tag(api, map_id, name=f"t{index}")["id"] for index in range(101)]
    created = make_location(api, map_id, tagIds=tags[:100])
    assert created["tagIds"] == tags[:100]

    found = details(api.post(locations_path(map_id), json={"name": "S", "lat": 1, "lng": 2, "tagIds": tags}))
    assert set(found) == {"tagIds"}
    assert_messages(found["tagIds"])
    found = details(api.put(location_path(map_id, created["id"]), json={"tagIds": tags}))
    assert set(found) == {"tagIds"}
    assert [item["id"] for item in list_locations(api, map_id)["locations"]] == [created["id"]]
    assert get_location(api, map_id, created["id"])["tagIds"] == tags[:100]


def test_more_than_100_tag_ids_are_refused_even_with_duplicates(api, map_id):
    # "0..100 ids as sent": the limit counts the array as sent, before duplicates collapse.
    tag = make_tag(api, map_id)["id"]
    found = details(api.post(locations_path(map_id), json={"name": "S", "lat": 1, "lng": 2, "tagIds": [tag] * 101}))
    assert set(found) == {"tagIds"}
    assert_no_locations(api, map_id)


# --- properties --------------------------------------------------------------------


def test_properties_round_trip_exactly(api, map_id):
    properties = {
        "zeta": 1,
        "alpha": 1.0,
        "flag": True,
        "one": 1,
        "nothing": None,
        "text": "  Grüße, 東京 😀 \"quoted\" \\ /  ",
        "big": 12345678901234567,
        "small": -0.000125,
        "empty": {},
        "list": [],
        "nested": {"b": [1, "2", False, None, {"c": [[]]}], "a": {"x": 1e-7}},
        "": "empty key",
    }
    created = make_location(api, map_id, properties=properties)
    assert exactly(created["properties"]) == exactly(properties)
    assert exactly(get_location(api, map_id, created["id"])["properties"]) == exactly(properties)
    listed = list_locations(api, map_id)["locations"][0]
    assert exactly(listed["properties"]) == exactly(properties)


@pytest.mark.parametrize(
    "before, after",
    [
        ({"a": 1, "b": 2}, {"a": True, "b": 2}),  # equal in Python, different JSON
        ({"a": [0, 1]}, {"a": [False, True]}),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # the client's key order is kept
        ({"a": 1, "b": 2}, {"b": 2}),
    ],
    ids=["int-to-bool", "nested-int-to-bool", "key-order", "key-removed"],
)
def test_properties_update_replaces_the_object_exactly(api, map_id, before, after):
    created = make_location(api, map_id, properties=before)
    time.sleep(TICK)
    updated = data(api.put(location_path(map_id, created["id"]), json={"properties": after}))
    assert exactly(updated["properties"]) == exactly(after)
    assert updated["updatedAt"] > created["updatedAt"]
    fetched = get_location(api, map_id, created["id"])
    assert exactly(fetched["properties"]) == exactly(after)
    assert fetched == updated


@pytest.mark.parametrize("char", ["x", "é", "😀"])
def test_properties_of_16384_bytes_are_accepted_and_16385_refused(api, map_id, char):
    largest = properties_of_size(16_384, char)
    created = make_location(api, map_id, properties=largest)
    assert created["properties"] == largest
    assert get_location(api, map_id, created["id"])["properties"] == largest

    found = details(api.post(locations_path(map_id), json={"name": "S", "lat": 1, "lng": 2,
                                                           "properties": properties_of_size(16_385, char)}))
    assert set(found) == {"properties"}
    assert_messages(found["properties"])
    found = details(api.put(location_path(map_id, created["id"]), json={"properties": properties_of_size(16_385, char)}))
    assert set(found) == {"properties"}
    assert get_location(api, map_id, created["id"])["properties"] == largest
    assert len(list_locations(api, map_id)["locations"]) == 1


def test_properties_size_counts_compact_json_not_the_request_bytes(api, map_id):
    largest = properties_of_size(16_384)
    spaced = json.dumps({"name": "S", "lat": 1, "lng": 2, "properties": largest}, indent=8)
    created = data(api.post(locations_path(map_id), data=spaced, content_type="application/json"), 201)
    assert created["properties"] == largest


@pytest.mark.parametrize("kind", ["object", "array"])
def test_properties_nested_10_levels_are_accepted_and_11_refused(api, map_id, kind):
    deepest = nested(10, kind)
    created = make_location(api, map_id, properties=deepest)
    assert exactly(created["properties"]) == exactly(deepest)
    assert exactly(get_location(api, map_id, created["id"])["properties"]) == exactly(deepest)

    found = details(api.post(locations_path(map_id), json={"name": "S", "lat": 1, "lng": 2,
                                                           "properties": nested(11, kind)}))
    assert set(found) == {"properties"}
    assert_messages(found["properties"])
    assert len(list_locations(api, map_id)["locations"]) == 1


def test_properties_depth_counts_mixed_objects_and_arrays(api, map_id):
    ten = {"a": [{"b": [{"c": [{"d": [{"e": [1]}]}]}]}]}  # 10 containers deep
    assert exactly(make_location(api, map_id, properties=ten)["properties"]) == exactly(ten)
    eleven = {"a": [{"b": [{"c": [{"d": [{"e": [[]]}]}]}]}]}
    found = details(api.post(locations_path(map_id), json={"name": "S", "lat": 1, "lng": 2, "properties": eleven}))
    assert set(found) == {"properties"}
    assert len(list_locations(api, map_id)["locations"]) == 1


# --- read and list -------------------------------------------------------------------


def test_list_locations_is_paged_in_creation_order(api, map_id):
    names = ["b", "a", "d", "c", "e"]
    ids = [make_location(api, map_id, name=name)["id"] for name in names]

    listed = list_locations(api, map_id)
    assert set(listed) == {"locations", "pagination"}
    assert [item["id"] for item in listed["locations"]] == ids
    assert all(set(item) == LOCATION_FIELDS for item in listed["locations"])
    assert listed["pagination"] == {"total": 5, "page": 1, "pageSize": 50, "totalPages": 1}

    second = list_locations(api, map_id, "?page=2&pageSize=2")
    assert [item["name"] for item in second["locations"]] == ["d", "c"]
    assert second["pagination"] == {"total": 5, "page": 2, "pageSize": 2, "totalPages": 3}

    past = list_locations(api, map_id, "?page=4&pageSize=2")
    assert past["locations"] == []
    assert past["pagination"] == {"total": 5, "page": 4, "pageSize": 2, "totalPages": 3}


def test_list_locations_shows_only_that_maps_locations(api, map_id, other_map_id):
    mine = make_location(api, map_id)
    make_location(api, other_map_id)
    assert list_locations(api, map_id)["locations"] == [mine]


def test_list_of_an_empty_map_is_empty(api, map_id):
    listed = list_locations(api, map_id)
    assert listed == {"locations": [], "pagination": {"total": 0, "page": 1, "pageSize": 50, "totalPages": 0}}


def test_get_location_returns_it(api, map_id):
    created = make_location(api, map_id, name="Here")
    assert get_location(api, map_id, created["id"]) == created


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_location_under_another_map_is_not_found(api, map_id, other_map_id, method):
    location = make_location(api, map_id)
    response = api.request(method, location_path(other_map_id, location["id"]), json={"name": "X"})
    assert response.status_code == 404
    assert error_code(response) == "NOT_FOUND"
    assert get_location(api, map_id, location["id"]) == location


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_location_of_another_account_is_not_found(api, other_api, map_id, method):
    location = make_location(api, map_id)
    response = other_api.request(method, location_path(map_id, location["id"]), json={"name": "X"})
    assert response.status_code == 404
    assert error_code(response) == "NOT_FOUND"
    assert get_location(api, map_id, location["id"]) == location


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_unknown_location_id_is_not_found(api, map_id, method):
    make_location(api, map_id)
    for location_id in ("nope", "x" * 300, "%20", "0"):
        response = api.request(method, location_path(map_id, location_id), json={"name": "X"})
        assert response.status_code == 404
        assert error_code(response) == "NOT_FOUND"


def test_locations_of_an_unknown_map_are_not_found(api):
    for response in (
        api.get(locations_path("nope")),
        api.post(locations_path("nope"), json={"name": "S", "lat": 1, "lng": 2}),
    ):
        assert response.status_code == 404
        assert error_code(response) == "NOT_FOUND"


# --- update -------------------------------------------------------------------------


def test_get_modify_put_round_trips(api, map_id):
    layer = make_layer(api, map_id)
    created = make_location(api, map_id, properties={"k": "v"})
    data(api.put(location_path(map_id, created["id"]) + "/layers", json={"layerIds": [layer["id"]]}))
    fetched = get_location(api, map_id, created["id"])
    time.sleep(TICK)

    fetched["name"] = "Renamed"
    fetched["layers"] = []  # read-only: ignored
    updated = data(api.put(location_path(map_id, created["id"]), json=fetched))
    assert updated["name"] == "Renamed"
    assert updated["id"] == created["id"] and updated["createdAt"] == created["createdAt"]
    assert [item["id"] for item in updated["layers"]] == [layer["id"]]
    assert updated["properties"] == {"k": "v"}
    assert updated["updatedAt"] > fetched["updatedAt"]
    assert get_location(api, map_id, created["id"]) == updated


def test_read_only_fields_are_ignored_on_update(api, map_id, other_map_id):
    created = make_location(api, map_id)
    time.sleep(TICK)
    body = {"id": "forged", "mapId": other_map_id, "createdAt": "2000-01-01T00:00:00Z",
            "updatedAt": None, "layers": None}
    unchanged = data(api.put(location_path(map_id, created["id"]), json=body))
    assert unchanged == created
    assert get_location(api, map_id, created["id"]) == created
    assert list_locations(api, other_map_id)["locations"] == []


def test_put_empty_body_changes_nothing(api, map_id):
    category = make_category(api, map_id)
    tag = make_tag(api, map_id)
    created = make_location(api, map_id, description="d", categoryId=category["id"], tagIds=[tag["id"]],
                            properties={"a": [1]})
    time.sleep(TICK)
    assert data(api.put(location_path(map_id, created["id"]), json={})) == created
    assert get_location(api, map_id, created["id"]) == created


def test_put_with_the_same_values_keeps_updated_at(api, map_id):
    category = make_category(api, map_id)
    t1, t2 = make_tag(api, map_id, name="1")["id"], make_tag(api, map_id, name="2")["id"]
    created = make_location(api, map_id, name="Spot", lat=1.5, lng=2.5, description="d", address="a",
                            categoryId=category["id"], tagIds=[t1, t2], properties={"a": {"b": [1, 2]}})
    time.sleep(TICK)
    same = {"name": "  Spot ", "lat": 1.5, "lng": 2.5, "description": "d", "address": "a",
            "categoryId": category["id"], "tagIds": [t1, t2, t1], "properties": {"a": {"b": [1, 2]}}}
    assert data(api.put(location_path(map_id, created["id"]), json=same)) == created
    assert get_location(api, map_id, created["id"]) == created


@pytest.mark.parametrize(
    "field, new_value",
    [
        ("name", lambda refs: "Other"),
        ("lat", lambda refs: -12.5),
        ("lng", lambda refs: 100),
        ("description", lambda refs: "new"),
        ("address", lambda refs: "new address"),
        ("properties", lambda refs: {"a": 2}),
        ("categoryId", lambda refs: refs["category"]),
        ("tagIds", lambda refs: refs["tags"][::-1]),
        ("tagIds", lambda refs: []),
    ],
    ids=["name", "lat", "lng", "description", "address", "properties", "categoryId", "tag-order", "no-tags"],
)
def test_put_changing_a_value_moves_updated_at(api, map_id, field, new_value):
    tags = [make_tag(api, map_id, name="1")["id"], make_tag(api, map_id, name="2")["id"]]
    refs = {"category": make_category(api, map_id)["id"], "tags": tags}
    created = make_location(api, map_id, tagIds=tags, properties={"a": 1})
    value = new_value(refs)
    time.sleep(TICK)
    updated = data(api.put(location_path(map_id, created["id"]), json={field: value}))
    assert updated[field] == value
    assert updated["updatedAt"] > created["updatedAt"]
    assert updated["createdAt"] == created["createdAt"]
    assert {k: v for k, v in updated.items() if k not in (field, "updatedAt")} == {
        k: v for k, v in created.items() if k not in (field, "updatedAt")
    }
    assert get_location(api, map_id, created["id"]) == updated


def test_put_is_a_partial_update(api, map_id):
    tag = make_tag(api, map_id)["id"]
    created = make_location(api, map_id, description="keep", address="keep too", tagIds=[tag], properties={"k": 1})
    updated = data(api.put(location_path(map_id, created["id"]), json={"name": "New"}))
    assert updated["name"] == "New"
    assert updated["description"] == "keep" and updated["address"] == "keep too"
    assert updated["tagIds"] == [tag] and updated["properties"] == {"k": 1}
    assert updated["lat"] == created["lat"] and updated["lng"] == created["lng"]


def test_put_can_clear_the_category(api, map_id):
    category = make_category(api, map_id)
    created = make_location(api, map_id, categoryId=category["id"])
    updated = data(api.put(location_path(map_id, created["id"]), json={"categoryId": None}))
    assert updated["categoryId"] is None
    assert get_location(api, map_id, created["id"])["categoryId"] is None


@pytest.mark.parametrize(
    "body, field",
    [
        ({"lat": 90.5}, "lat"),
        ({"lng": "1"}, "lng"),
        ({"lat": None}, "lat"),
        ({"name": ""}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"description": "x\u0000"}, "description"),
        ({"properties": []}, "properties"),
        ({"color": "#FFFFFF"}, "color"),
    ],
)
def test_put_validates_like_create_and_changes_nothing(api, map_id, body, field):
    created = make_location(api, map_id)
    found = details(api.put(location_path(map_id, created["id"]), json={"name": "Changed", **body}))
    assert set(found) == {field}
    assert_messages(found[field])
    assert get_location(api, map_id, created["id"]) == created


def test_put_nan_literal_is_a_field_error(api, map_id):
    created = make_location(api, map_id)
    response = api.put(location_path(map_id, created["id"]), data='{"lng":NaN}', content_type="application/json")
    assert set(details(response)) == {"lng"}
    assert get_location(api, map_id, created["id"]) == created


@pytest.mark.parametrize(
    "raw, content_type",
    [("{", "application/json"), ("[]", "application/json"), ('{"name":"x"}', "text/plain")],
)
def test_put_malformed_body_is_refused_without_details(api, map_id, raw, content_type):
    created = make_location(api, map_id)
    response = api.put(location_path(map_id, created["id"]), data=raw, content_type=content_type)
    assert response.status_code == 400
    assert error_code(response) == "VALIDATION_ERROR"
    assert "details" not in response.get_json()["error"]
    assert get_location(api, map_id, created["id"]) == created


# --- delete ------------------------------------------------------------------------


def test_delete_location_removes_it(api, map_id):
    kept = make_location(api, map_id, name="kept")
    gone = make_location(api, map_id, name="gone")
    response = api.delete(location_path(map_id, gone["id"]))
    assert response.status_code == 200
    assert response.get_json() == {"data": {"id": gone["id"], "deleted": True}}

    missing = api.get(location_path(map_id, gone["id"]))
    assert missing.status_code == 404 and error_code(missing) == "NOT_FOUND"
    listed = list_locations(api, map_id)
    assert listed["locations"] == [kept] and listed["pagination"]["total"] == 1

    again = api.delete(location_path(map_id, gone["id"]))
    assert again.status_code == 404 and error_code(again) == "NOT_FOUND"


def test_deleting_a_category_clears_it_from_its_locations(api, map_id):
    doomed = make_category(api, map_id, name="doomed")
    kept = make_category(api, map_id, name="kept")
    on_doomed = make_location(api, map_id, name="on doomed", categoryId=doomed["id"])
    on_kept = make_location(api, map_id, name="on kept", categoryId=kept["id"])
    without = make_location(api, map_id, name="without")
    time.sleep(TICK)

    assert data(api.delete(f"/maps/{map_id}/categories/{doomed['id']}")) == {"id": doomed["id"], "deleted": True}
    cleared = get_location(api, map_id, on_doomed["id"])
    assert cleared["categoryId"] is None
    assert cleared["updatedAt"] > on_doomed["updatedAt"]
    assert {k: v for k, v in cleared.items() if k not in ("categoryId", "updatedAt")} == {
        k: v for k, v in on_doomed.items() if k not in ("categoryId", "updatedAt")
    }
    assert get_location(api, map_id, on_kept["id"]) == on_kept
    assert get_location(api, map_id, without["id"]) == without


def test_deleting_a_tag_removes_it_from_its_locations(api, map_id):
    t1, t2, t3 = (make_tag(api, map_id, name=name)["id"] for name in ("one", "two", "three"))
    tagged = make_location(api, map_id, tagIds=[t3, t2, t1])
    untouched = make_location(api, map_id, tagIds=[t1, t3])
    time.sleep(TICK)

    assert data(api.delete(f"/maps/{map_id}/tags/{t2}")) == {"id": t2, "deleted": True}
    after = get_location(api, map_id, tagged["id"])
    assert after["tagIds"] == [t3, t1]
    assert after["updatedAt"] > tagged["updatedAt"]
    assert get_location(api, map_id, untouched["id"]) == untouched


def test_deleting_a_layer_removes_it_from_its_locations(api, map_id):
    first, doomed, last = (make_layer(api, map_id, name=name) for name in ("first", "doomed", "last"))
    member = make_location(api, map_id)
    other = make_location(api, map_id)
    ids = [first["id"], doomed["id"], last["id"]]
    member = data(api.put(location_path(map_id, member["id"]) + "/layers", json={"layerIds": ids}))
    other = data(api.put(location_path(map_id, other["id"]) + "/layers", json={"layerIds": [first["id"]]}))
    time.sleep(TICK)

    assert data(api.delete(f"/maps/{map_id}/layers/{doomed['id']}")) == {"id": doomed["id"], "deleted": True}
    after = get_location(api, map_id, member["id"])
    assert [layer["id"] for layer in after["layers"]] == [first["id"], last["id"]]
    assert [layer["order"] for layer in after["layers"]] == [0, 1]
    assert after["updatedAt"] > member["updatedAt"]
    assert get_location(api, map_id, other["id"])["updatedAt"] == other["updatedAt"]


# --- layer memberships --------------------------------------------------------------


def memberships_path(map_id, location_id):
    return location_path(map_id, location_id) + "/layers"


def get_layers(api, map_id):
    return data(api.get(f"/maps/{map_id}/layers"))["layers"]


def test_replacing_layers_sets_the_whole_set_ordered_by_layer_order(api, map_id):
    l0, l1, l2 = (make_layer(api, map_id, name=f"L{index}") for index in range(3))
    location = make_location(api, map_id)

    replaced = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [l2["id"], l0["id"]]}))
    assert set(replaced) == LOCATION_FIELDS
    assert replaced["layers"] == [l0, l2]
    assert all(set(layer) == LAYER_FIELDS for layer in replaced["layers"])
    assert get_location(api, map_id, location["id"]) == replaced

    replaced = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [l1["id"]]}))
    assert replaced["layers"] == [l1]
    assert get_location(api, map_id, location["id"]) == replaced

    replaced = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": []}))
    assert replaced["layers"] == []
    assert get_location(api, map_id, location["id"]) == replaced
    assert {k: v for k, v in replaced.items() if k not in ("layers", "updatedAt")} == {
        k: v for k, v in location.items() if k not in ("layers", "updatedAt")
    }


def test_location_layers_follow_the_current_layer_order(api, map_id):
    first, second = make_layer(api, map_id, name="first"), make_layer(api, map_id, name="second")
    location = make_location(api, map_id)
    data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [first["id"], second["id"]]}))
    data(api.put(f"/maps/{map_id}/layers/{second['id']}", json={"order": 0}))
    fetched = get_location(api, map_id, location["id"])
    assert fetched["layers"] == get_layers(api, map_id)
    assert [layer["id"] for layer in fetched["layers"]] == [second["id"], first["id"]]


def put_layers(api, map_id, location, layers) -> dict:
    body = {"layerIds": [layer["id"] for layer in layers]}
    return data(api.put(memberships_path(map_id, location["id"]), json=body))


def test_changing_a_layer_moves_updated_at_of_its_locations_only(api, map_id):
    changed, kept = make_layer(api, map_id, name="changed"), make_layer(api, map_id, name="kept")
    on_changed = put_layers(api, map_id, make_location(api, map_id), [changed, kept])
    on_kept = put_layers(api, map_id, make_location(api, map_id), [kept])
    time.sleep(TICK)

    same = data(api.put(f"/maps/{map_id}/layers/{changed['id']}", json={"name": "changed"}))
    assert same == changed
    assert get_location(api, map_id, on_changed["id"]) == on_changed

    renamed = data(api.put(f"/maps/{map_id}/layers/{changed['id']}", json={"color": "#000000"}))
    after = get_location(api, map_id, on_changed["id"])
    assert after["layers"] == [renamed, kept]
    assert after["updatedAt"] == renamed["updatedAt"] > on_changed["updatedAt"]
    assert get_location(api, map_id, on_kept["id"]) == on_kept


def shift_by_inserting(api, map_id, layers):
    make_layer(api, map_id, name="new second", order=1)


def shift_by_moving(api, map_id, layers):
    data(api.put(f"/maps/{map_id}/layers/{layers['last']['id']}", json={"order": 1}))


def shift_by_deleting(api, map_id, layers):
    data(api.delete(f"/maps/{map_id}/layers/{layers['doomed']['id']}"))


@pytest.mark.parametrize("shift", [shift_by_inserting, shift_by_moving, shift_by_deleting])
def test_a_layer_shifted_by_another_moves_updated_at_of_its_locations(api, map_id, shift):
    """``middle`` shifts in each case; ``first``, before the change, does not."""
    layers = {name: make_layer(api, map_id, name=name) for name in ("first", "doomed", "middle", "last")}
    on_middle = put_layers(api, map_id, make_location(api, map_id), [layers["middle"]])
    on_first = put_layers(api, map_id, make_location(api, map_id), [layers["first"]])
    on_none = make_location(api, map_id)
    time.sleep(TICK)

    shift(api, map_id, layers)
    after = get_location(api, map_id, on_middle["id"])
    shifted = data(api.get(f"/maps/{map_id}/layers/{layers['middle']['id']}"))
    assert shifted["order"] != layers["middle"]["order"]
    assert after["layers"] == [shifted]
    assert after["updatedAt"] == shifted["updatedAt"] > on_middle["updatedAt"]
    assert get_location(api, map_id, on_first["id"]) == on_first
    assert get_location(api, map_id, on_none["id"]) == on_none


def test_replacing_layers_collapses_duplicates(api, map_id):
    l0, l1 = make_layer(api, map_id, name="a"), make_layer(api, map_id, name="b")
    location = make_location(api, map_id)
    replaced = data(api.put(memberships_path(map_id, location["id"]),
                            json={"layerIds": [l1["id"], l1["id"], l0["id"], l1["id"]]}))
    assert replaced["layers"] == [l0, l1]
    assert get_location(api, map_id, location["id"])["layers"] == [l0, l1]


def test_replacing_layers_with_unknown_ids_changes_nothing(api, map_id, other_map_id):
    own = make_layer(api, map_id)
    kept = make_layer(api, map_id, name="kept")
    foreign = make_layer(api, other_map_id)
    location = make_location(api, map_id)
    location = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [kept["id"]]}))
    time.sleep(TICK)

    body = {"layerIds": [own["id"], foreign["id"], "no-such-layer"]}
    found = details(api.put(memberships_path(map_id, location["id"]), json=body))
    assert set(found) == {"layerIds"}
    assert_messages(found["layerIds"])
    text = " ".join(found["layerIds"])
    assert foreign["id"] in text and "no-such-layer" in text
    assert own["id"] not in text
    assert get_location(api, map_id, location["id"]) == location


def test_replacing_layers_with_another_accounts_layer_is_refused(api, other_api, map_id):
    foreign_map = make_map(other_api)["id"]
    foreign = make_layer(other_api, foreign_map)
    location = make_location(api, map_id)
    found = details(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [foreign["id"]]}))
    assert set(found) == {"layerIds"}
    assert foreign["id"] in " ".join(found["layerIds"])
    assert get_location(api, map_id, location["id"]) == location


def test_replacing_layers_with_the_same_set_keeps_updated_at(api, map_id):
    l0, l1 = make_layer(api, map_id, name="a"), make_layer(api, map_id, name="b")
    location = make_location(api, map_id)
    time.sleep(TICK)
    first = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [l0["id"], l1["id"]]}))
    assert first["updatedAt"] > location["updatedAt"]
    time.sleep(TICK)

    again = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [l1["id"], l0["id"], l0["id"]]}))
    assert again == first
    assert get_location(api, map_id, location["id"]) == first

    empty = make_location(api, map_id)
    time.sleep(TICK)
    assert data(api.put(memberships_path(map_id, empty["id"]), json={"layerIds": []})) == empty


def test_replacing_layers_with_a_different_set_moves_updated_at(api, map_id):
    l0, l1 = make_layer(api, map_id, name="a"), make_layer(api, map_id, name="b")
    location = make_location(api, map_id)
    first = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [l0["id"]]}))
    time.sleep(TICK)
    second = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [l0["id"], l1["id"]]}))
    assert second["updatedAt"] > first["updatedAt"]
    assert second["createdAt"] == location["createdAt"]
    assert get_location(api, map_id, location["id"]) == second


def test_replacing_layers_accepts_100_ids_and_refuses_101(api, map_id):
    layers = [make_layer(api, map_id, name=f"L{index}")["id"] for index in range(101)]
    location = make_location(api, map_id)
    replaced = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": layers[:100]}))
    assert [layer["id"] for layer in replaced["layers"]] == layers[:100]

    found = details(api.put(memberships_path(map_id, location["id"]), json={"layerIds": layers}))
    assert set(found) == {"layerIds"}
    assert_messages(found["layerIds"])
    assert get_location(api, map_id, location["id"]) == replaced


def test_replacing_layers_refuses_more_than_100_entries_even_with_duplicates(api, map_id):
    # "0..100 ids as sent": the limit counts the array as sent, before duplicates collapse.
    layer = make_layer(api, map_id)
    location = make_location(api, map_id)
    found = details(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [layer["id"]] * 101}))
    assert set(found) == {"layerIds"}
    assert get_location(api, map_id, location["id"]) == location


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "layerIds"),
        ({"layerIds": None}, "layerIds"),
        ({"layerIds": "abc"}, "layerIds"),
        ({"layerIds": [1]}, "layerIds"),
        ({"layerIds": [], "tagIds": []}, "tagIds"),
    ],
)
def test_replacing_layers_validates_the_body(api, map_id, body, field):
    layer = make_layer(api, map_id)
    location = make_location(api, map_id)
    location = data(api.put(memberships_path(map_id, location["id"]), json={"layerIds": [layer["id"]]}))
    found = details(api.put(memberships_path(map_id, location["id"]), json=body))
    assert set(found) == {field}
    assert_messages(found[field])
    assert get_location(api, map_id, location["id"]) == location


def test_replacing_layers_of_an_unknown_location_is_not_found(api, map_id, other_map_id):
    layer = make_layer(api, map_id)
    location = make_location(api, map_id)
    for path in (memberships_path(map_id, "nope"), memberships_path(other_map_id, location["id"])):
        response = api.put(path, json={"layerIds": [layer["id"]]})
        assert response.status_code == 404
        assert error_code(response) == "NOT_FOUND"
    assert get_location(api, map_id, location["id"]) == location
