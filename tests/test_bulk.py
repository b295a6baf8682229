"""Bulk creation of locations: 1..100 items, all or nothing, input order."""

import json

import pytest

from .factories import error_code, make_category, make_location, make_map, make_tag
from .helpers import LOCATION_FIELDS
from .helpers import data_of as data
from .helpers import validation_details as details


def assert_messages(value):
    """A field's error entry: a non-empty list of human sentences."""
    assert isinstance(value, list) and value, value
    assert all(isinstance(message, str) and message for message in value), value


def item(index: int, **fields) -> dict:
    return {"name": f"Spot {index}", "lat": index % 90, "lng": -(index % 180), **fields}


def bulk(api, map_id, body):
    return api.post(f"/maps/{map_id}/locations/bulk", json=body)


def listed(api, map_id) -> list[dict]:
    body = data(api.get(f"/maps/{map_id}/locations?pageSize=100"))
    assert body["pagination"]["total"] == len(body["locations"])
    return body["locations"]


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def test_bulk_create_returns_the_locations_in_input_order(api, map_id):
    category = make_category(api, map_id)
    tag = make_tag(api, map_id)
    items = [
        item(0, name="  Zulu  "),
        item(1, description="second", address="2 Road", categoryId=category["id"]),
        item(2, tagIds=[tag["id"], tag["id"]], properties={"ext": 7, "flag": True}),
    ]
    created = data(bulk(api, map_id, {"locations": items}), 201)
    assert set(created) == {"created", "count"}
    assert created["count"] == 3
    locations = created["created"]
    assert [location["name"] for location in locations] == ["Zulu", "Spot 1", "Spot 2"]
    assert all(set(location) == LOCATION_FIELDS for location in locations)
    assert all(location["layers"] == [] for location in locations)
    assert all(location["mapId"] == map_id for location in locations)
    assert all(location["createdAt"] == location["updatedAt"] for location in locations)
    assert len({location["id"] for location in locations}) == 3

    first, second, third = locations
    assert (first["lat"], first["lng"]) == (0, 0)
    assert first["description"] == "" and first["address"] == "" and first["categoryId"] is None
    assert first["tagIds"] == [] and first["properties"] == {}
    assert second["description"] == "second" and second["address"] == "2 Road"
    assert second["categoryId"] == category["id"]
    assert third["tagIds"] == [tag["id"]]
    assert json.dumps(third["properties"]) == json.dumps({"ext": 7, "flag": True})

    assert listed(api, map_id) == locations
    for location in locations:
        assert data(api.get(f"/maps/{map_id}/locations/{location['id']}")) == location


@pytest.mark.parametrize("count", [1, 100])
def test_bulk_accepts_1_to_100_items(api, map_id, count):
    names = [f"Spot {index}" for index in range(count)]
    created = data(bulk(api, map_id, {"locations": [item(index) for index in range(count)]}), 201)
    assert created["count"] == count
    assert [location["name"] for location in created["created"]] == names
    assert [location["name"] for location in listed(api, map_id)] == names
    assert [location["id"] for location in listed(api, map_id)] == [location["id"] for location in created["created"]]


def test_bulk_locations_keep_creation_order_among_single_creates(api, map_id):
    before = make_location(api, map_id, name="before")
    created = data(bulk(api, map_id, {"locations": [item(index, name=name) for index, name in enumerate("cab")]}), 201)
    after = make_location(api, map_id, name="after")
    assert [location["id"] for location in listed(api, map_id)] == (
        [before["id"]] + [location["id"] for location in created["created"]] + [after["id"]]
    )


@pytest.mark.parametrize("count", [0, 101])
def test_bulk_refuses_0_or_more_than_100_items(api, map_id, count):
    found = details(bulk(api, map_id, {"locations": [item(index) for index in range(count)]}))
    assert set(found) == {"locations"}
    assert found["locations"]
    assert listed(api, map_id) == []


@pytest.mark.parametrize("body", [{}, {"locations": None}, {"locations": {"0": {}}}, {"locations": "x"}])
def test_bulk_requires_a_list_of_locations(api, map_id, body):
    found = details(bulk(api, map_id, body))
    assert set(found) == {"locations"}
    assert listed(api, map_id) == []


def test_bulk_refuses_an_unknown_top_level_field(api, map_id):
    found = details(bulk(api, map_id, {"locations": [item(0)], "atomic": True}))
    assert set(found) == {"atomic"}
    assert_messages(found["atomic"])
    assert listed(api, map_id) == []


def test_bulk_create_is_all_or_nothing(api, map_id):
    items = [item(index) for index in range(100)]
    del items[3]["name"]
    items[57]["lat"] = 90.5
    found = details(bulk(api, map_id, {"locations": items}))
    assert set(found) == {"locations"}
    assert set(found["locations"]) == {"3", "57"}
    assert set(found["locations"]["3"]) == {"name"}
    assert_messages(found["locations"]["3"]["name"])
    assert set(found["locations"]["57"]) == {"lat"}
    assert_messages(found["locations"]["57"]["lat"])
    assert listed(api, map_id) == []


def test_bulk_names_every_bad_item_and_every_bad_field(api, map_id):
    items = [item(index) for index in range(12)]
    items[0] = {"lat": "1", "lng": 200}
    items[5]["description"] = None
    items[5]["address"] = "x" * 501
    items[11]["unknown"] = 1
    found = details(bulk(api, map_id, {"locations": items}))
    assert set(found) == {"locations"}
    assert {index: set(fields) for index, fields in found["locations"].items()} == {
        "0": {"name", "lat", "lng"},
        "5": {"description", "address"},
        "11": {"unknown"},
    }
    for fields in found["locations"].values():
        for messages in fields.values():
            assert_messages(messages)
    assert listed(api, map_id) == []


@pytest.mark.parametrize(
    "raw_item, field",
    [
        ('{"name":"a","lat":NaN,"lng":1}', "lat"),
        ('{"name":"a","lat":1,"lng":-Infinity}', "lng"),
        ('{"name":"a\\u0000","lat":1,"lng":1}', "name"),
        ('{"name":"a","lat":1,"lng":1,"properties":[]}', "properties"),
        ('{"name":"a","lat":true,"lng":1}', "lat"),
        ('{"name":"   ","lat":1,"lng":1}', "name"),
    ],
)
def test_bulk_items_are_validated_like_a_single_create(api, map_id, raw_item, field):
    good = json.dumps(item(0))
    raw = '{"locations":[' + good + "," + raw_item + "," + good + "]}"
    response = api.post(f"/maps/{map_id}/locations/bulk", data=raw, content_type="application/json")
    found = details(response)
    assert set(found) == {"locations"}
    assert set(found["locations"]) == {"1"}
    assert set(found["locations"]["1"]) == {field}
    assert_messages(found["locations"]["1"][field])
    assert listed(api, map_id) == []


@pytest.mark.parametrize("bad", [None, "x", 5, [], [item(0)]])
def test_bulk_items_that_are_not_objects_are_named_by_index(api, map_id, bad):
    found = details(bulk(api, map_id, {"locations": [item(0), item(1), bad]}))
    assert set(found) == {"locations"}
    assert set(found["locations"]) == {"2"}
    assert found["locations"]["2"]
    assert listed(api, map_id) == []


def test_bulk_validates_references_per_item(api, map_id):
    other_map = make_map(api, title="Other")["id"]
    own_tag = make_tag(api, map_id)["id"]
    own_category = make_category(api, map_id)["id"]
    foreign_tag = make_tag(api, other_map)["id"]
    foreign_category = make_category(api, other_map)["id"]
    items = [
        item(0, tagIds=[own_tag], categoryId=own_category),
        item(1, tagIds=[own_tag, foreign_tag]),
        item(2, categoryId=foreign_category),
        item(3, categoryId="no-such-category", tagIds=["no-such-tag"]),
        item(4, lat=-91),
    ]
    found = details(bulk(api, map_id, {"locations": items}))
    assert set(found) == {"locations"}
    assert set(found["locations"]) == {"1", "2", "3", "4"}
    assert set(found["locations"]["1"]) == {"tagIds"}
    assert set(found["locations"]["2"]) == {"categoryId"}
    assert set(found["locations"]["3"]) == {"categoryId", "tagIds"}
    assert set(found["locations"]["4"]) == {"lat"}
    assert listed(api, map_id) == []
    assert listed(api, other_map) == []


def test_bulk_accepts_references_of_the_same_map(api, map_id):
    tags = [make_tag(api, map_id, name=name)["id"] for name in ("a", "b")]
    category = make_category(api, map_id)["id"]
    items = [item(0, tagIds=tags[::-1], categoryId=category), item(1, tagIds=tags), item(2, categoryId=None)]
    created = data(bulk(api, map_id, {"locations": items}), 201)["created"]
    assert [location["tagIds"] for location in created] == [tags[::-1], tags, []]
    assert [location["categoryId"] for location in created] == [category, None, None]
    assert listed(api, map_id) == created


def test_bulk_ignores_read_only_fields_in_items(api, map_id):
    other_map = make_map(api, title="Other")["id"]
    items = [item(0, id="forged", mapId=other_map, createdAt="2000-01-01T00:00:00Z", updatedAt=None,
                  layers=[{"id": "x"}])]
    created = data(bulk(api, map_id, {"locations": items}), 201)["created"][0]
    assert created["id"] != "forged" and created["mapId"] == map_id
    assert created["layers"] == [] and not created["createdAt"].startswith("2000")
    assert listed(api, map_id) == [created]
    assert listed(api, other_map) == []


@pytest.mark.parametrize(
    "body",
    [{"locations": [item(0)]}, {"locations": [{"lat": "north"}, 3]}, {"locations": []}, "{"],
    ids=["valid", "invalid items", "no items", "malformed JSON"],
)
def test_bulk_into_an_unknown_or_foreign_map_is_not_found(api, other_api, map_id, body):
    raw = body if isinstance(body, str) else json.dumps(body)
    for client, target in ((api, "nope"), (api, "A" * 22), (other_api, map_id)):
        response = client.post(
            f"/maps/{target}/locations/bulk", data=raw, content_type="application/json"
        )
        assert response.status_code == 404
        assert error_code(response) == "NOT_FOUND"
    assert listed(api, map_id) == []


@pytest.mark.parametrize(
    "raw, content_type",
    [("{", "application/json"), ('[{"name":"a","lat":1,"lng":1}]', "application/json"),
     ('{"locations":[]}', "text/plain")],
)
def test_bulk_malformed_body_is_refused_without_details(api, map_id, raw, content_type):
    response = api.post(f"/maps/{map_id}/locations/bulk", data=raw, content_type=content_type)
    assert response.status_code == 400
    assert error_code(response) == "VALIDATION_ERROR"
    assert "details" not in response.get_json()["error"]
    assert listed(api, map_id) == []
