"""Upsert by externalId: 1..100 items, create or update as PUT does, all or nothing."""

import threading
import time

import pytest
import requests

from .factories import (
    API,
    create_key,
    error_code,
    make_category,
    make_layer,
    make_map,
    make_tag,
)
from .helpers import TICK
from .helpers import data_of as data
from .helpers import validation_details as details
from .test_events import latest, read_feed
from .test_isolation_generated import dump_database


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def upsert(api, map_id, items):
    return api.post(f"/maps/{map_id}/locations/upsert", json={"locations": items})


def upserted(api, map_id, items) -> dict:
    return data(upsert(api, map_id, items))


def listed(api, map_id) -> list[dict]:
    return data(api.get(f"/maps/{map_id}/locations?pageSize=100"))["locations"]


def row(external_id, **fields) -> dict:
    return {"externalId": external_id, "name": f"Spot {external_id}", "lat": 1, "lng": 2, **fields}


def test_upsert_creates_new_items_as_the_bulk_does(api, map_id):
    layer = make_layer(api, map_id)["id"]
    tag = make_tag(api, map_id)["id"]
    answer = upserted(
        api, map_id, [row("b"), row("a", tagIds=[tag, tag], layerIds=[layer], address=" 1 Rd ")]
    )
    assert set(answer) == {"locations", "created", "updated", "unchanged"}
    assert (answer["created"], answer["updated"], answer["unchanged"]) == (2, 0, 0)
    second, first = answer["locations"]
    assert [second["externalId"], first["externalId"]] == ["b", "a"]
    assert first["tagIds"] == [tag] and [layer_["id"] for layer_ in first["layers"]] == [layer]
    assert first["address"] == "1 Rd" and second["description"] == "" and second["properties"] == {}
    assert all(loc["createdAt"] == loc["updatedAt"] for loc in answer["locations"])
    assert listed(api, map_id) == answer["locations"]


def test_upsert_updates_an_existing_item_exactly_as_put_does(api, map_id):
    first_layer, second_layer = (make_layer(api, map_id, name=n)["id"] for n in ("x", "y"))
    tags = [make_tag(api, map_id, name=n)["id"] for n in ("t1", "t2")]
    category = make_category(api, map_id)["id"]
    (before,) = upserted(
        api, map_id,
        [row("a", description="kept", categoryId=category, tagIds=tags, layerIds=[first_layer],
             properties={"n": 1})],
    )["locations"]  # fmt: skip
    time.sleep(TICK)
    answer = upserted(
        api,
        map_id,
        [{"externalId": "a", "name": "renamed", "tagIds": tags[::-1], "layerIds": [second_layer]}],
    )
    assert (answer["created"], answer["updated"], answer["unchanged"]) == (0, 1, 0)
    (after,) = answer["locations"]
    assert after["id"] == before["id"] and after["createdAt"] == before["createdAt"]
    assert after["updatedAt"] > before["updatedAt"]
    assert after["name"] == "renamed" and after["tagIds"] == tags[::-1]
    assert [layer["id"] for layer in after["layers"]] == [second_layer]
    assert (after["description"], after["categoryId"], after["properties"]) == (
        "kept",
        category,
        {"n": 1},
    )
    assert listed(api, map_id) == [after]
    # The same change by PUT on a twin gives the same location.
    twin = upserted(api, map_id, [row("b", description="kept", categoryId=category, tagIds=tags,
                                      layerIds=[first_layer], properties={"n": 1})])["locations"][0]  # fmt: skip
    put = data(api.put(f"/maps/{map_id}/locations/{twin['id']}",
                       json={"name": "renamed", "tagIds": tags[::-1], "layerIds": [second_layer]}))  # fmt: skip
    ignored = {"id", "externalId", "createdAt", "updatedAt"}
    assert {k: v for k, v in put.items() if k not in ignored} == {
        k: v for k, v in after.items() if k not in ignored
    }


def test_an_item_that_changes_nothing_is_unchanged_and_keeps_updated_at(api, map_id):
    tag = make_tag(api, map_id)["id"]
    layer = make_layer(api, map_id)["id"]
    items = [row("a", tagIds=[tag], layerIds=[layer], properties={"k": [1, 2.5, True]}), row("b")]
    first = upserted(api, map_id, items)
    time.sleep(TICK)
    again = upserted(api, map_id, items)
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 2)
    assert again["locations"] == first["locations"] == listed(api, map_id)
    partial = upserted(api, map_id, [{"externalId": "a"}, {"externalId": "b", "lat": 1.0}])
    assert (partial["created"], partial["updated"], partial["unchanged"]) == (0, 0, 2)
    assert partial["locations"] == first["locations"]


def test_upsert_counts_created_updated_and_unchanged_in_one_request(api, map_id):
    upserted(api, map_id, [row("a"), row("b")])
    time.sleep(TICK)
    answer = upserted(api, map_id, [row("c"), row("b"), row("a", name="changed")])
    assert (answer["created"], answer["updated"], answer["unchanged"]) == (1, 1, 1)
    assert [loc["externalId"] for loc in answer["locations"]] == ["c", "b", "a"]
    assert [loc["externalId"] for loc in listed(api, map_id)] == ["a", "b", "c"]


def test_a_json_change_inside_properties_is_a_change(api, map_id):
    upserted(api, map_id, [row("a", properties={"n": 1})])
    answer = upserted(api, map_id, [{"externalId": "a", "properties": {"n": True}}])
    assert answer["updated"] == 1 and answer["locations"][0]["properties"] == {"n": True}
    answer = upserted(api, map_id, [{"externalId": "a", "properties": {"n": True}}])
    assert answer["unchanged"] == 1


def test_external_ids_match_exactly_after_trimming(api, map_id):
    upserted(api, map_id, [row("A1")])
    answer = upserted(api, map_id, [row("  A1 ", name="Spot A1"), row("a1")])
    assert (answer["created"], answer["unchanged"]) == (1, 1)
    assert [loc["externalId"] for loc in listed(api, map_id)] == ["A1", "a1"]


def test_the_same_external_id_on_another_map_is_another_location(api, map_id):
    other = make_map(api)["id"]
    upserted(api, other, [row("a", name="elsewhere")])
    assert upserted(api, map_id, [row("a")])["created"] == 1
    assert listed(api, other)[0]["name"] == "elsewhere"


@pytest.mark.parametrize("value", [None, "", "  ", "x" * 201, 7])
def test_every_item_needs_an_external_id(api, map_id, value):
    item = row("x")
    item["externalId"] = value
    errors = details(upsert(api, map_id, [row("ok"), item]))["locations"]
    assert set(errors) == {"1"} and set(errors["1"]) == {"externalId"}
    assert listed(api, map_id) == []


def test_an_item_without_external_id_is_named(api, map_id):
    response = upsert(api, map_id, [{"name": "n", "lat": 0, "lng": 0}])
    assert set(details(response)["locations"]["0"]) == {"externalId"}


def test_an_external_id_twice_is_an_error_on_the_later_item(api, map_id):
    upserted(api, map_id, [row("a")])
    response = upsert(api, map_id, [row("a"), row("b"), row(" a", name="again")])
    errors = details(response)["locations"]
    assert set(errors) == {"2"} and set(errors["2"]) == {"externalId"}
    assert [loc["externalId"] for loc in listed(api, map_id)] == ["a"]


def test_a_new_item_needs_name_lat_and_lng_an_existing_one_does_not(api, map_id):
    upserted(api, map_id, [row("old")])
    response = upsert(
        api, map_id, [{"externalId": "old", "lat": 5}, {"externalId": "new", "lat": 5}]
    )
    errors = details(response)["locations"]
    assert set(errors) == {"1"} and set(errors["1"]) == {"name", "lng"}
    assert listed(api, map_id)[0]["lat"] == 1
    assert upserted(api, map_id, [{"externalId": "old", "lat": 5}])["updated"] == 1


def test_details_name_every_bad_item_and_nothing_is_written(app, api, map_id):
    upserted(api, map_id, [row("a"), row("b")])
    layer = make_layer(api, map_id)["id"]
    before = dump_database(app)
    items = [
        row("a", name="changed"),  # fine alone
        row("b", lat=91),  # a field error on an update
        row("c", categoryId="unknown"),  # a reference on a create
        {"externalId": "d"},  # a create without its required fields
        row("e", layerIds=[layer, "nope"]),  # an unknown layer
        row("f", layerIds=None),  # null layerIds
        row("g", bogus=1),  # an unknown field
        row("a"),  # given twice
        "not an object",
    ]
    errors = details(upsert(api, map_id, items))["locations"]
    assert set(errors) == {"1", "2", "3", "4", "5", "6", "7", "8"}
    assert set(errors["1"]) == {"lat"} and set(errors["2"]) == {"categoryId"}
    assert set(errors["4"]) == {"layerIds"} and set(errors["5"]) == {"layerIds"}
    assert set(errors["6"]) == {"bogus"} and set(errors["7"]) == {"externalId"}
    assert dump_database(app) == before


@pytest.mark.parametrize(
    "body",
    [{}, {"locations": []}, {"locations": None}, {"locations": {}}, {"locations": [1] * 1001}],
)
def test_the_body_holds_1_to_1000_items(api, map_id, body):
    response = api.post(f"/maps/{map_id}/locations/upsert", json=body)
    assert set(details(response)) == {"locations"}


def test_an_unknown_field_beside_locations_is_refused(api, map_id):
    response = api.post(
        f"/maps/{map_id}/locations/upsert", json={"locations": [row("a")], "upsert": True}
    )
    assert set(details(response)) == {"upsert"}


def test_upsert_takes_1000_items(api, map_id):
    items = [row(f"r{n}") for n in range(1000)]
    assert upserted(api, map_id, items)["created"] == 1000
    items[42]["name"] = "changed"
    answer = upserted(api, map_id, items)
    assert (answer["updated"], answer["unchanged"]) == (1, 999)
    assert [loc["externalId"] for loc in answer["locations"]] == [f"r{n}" for n in range(1000)]


def test_malformed_bodies_are_refused_without_details(api, map_id):
    response = api.post(
        f"/maps/{map_id}/locations/upsert", data="{", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400 and "details" not in response.get_json()["error"]


def test_upsert_on_an_unknown_map_or_another_account_is_not_found(api, other_api, map_id):
    assert error_code(upsert(api, "x" * 22, [row("a")])) == "NOT_FOUND"
    assert error_code(upsert(other_api, map_id, [row("a")])) == "NOT_FOUND"
    assert error_code(upsert(api, "unknown", [])) == "NOT_FOUND"  # 404 before 400


def test_upsert_needs_a_read_write_key(app, client, api, map_id):
    from .factories import ApiClient

    reader = ApiClient(client, create_key(app, "owner@example.com", scope="READ_ONLY"))
    assert error_code(upsert(reader, map_id, [row("a")])) == "INSUFFICIENT_SCOPE"


def test_an_upsert_cannot_move_another_maps_location(api, map_id):
    other = make_map(api)["id"]
    (theirs,) = upserted(api, other, [row("a")])["locations"]
    answer = upserted(api, map_id, [row("a", id=theirs["id"], mapId=other)])
    assert answer["created"] == 1 and answer["locations"][0]["id"] != theirs["id"]
    assert listed(api, other) == [theirs]


def test_racing_upserts_of_one_new_external_id_make_one_location(api, map_id, live_server):
    url = f"{live_server}{API}/maps/{map_id}/locations/upsert"
    headers = {"Authorization": f"Bearer {api.key}"}
    start, answers = threading.Barrier(6), []

    def send(number):
        start.wait()
        body = {"locations": [row("shared", name=f"racer {number}")]}
        answers.append(requests.post(url, json=body, headers=headers, timeout=30))

    threads = [threading.Thread(target=send, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [answer.status_code for answer in answers] == [200] * 6
    assert sum(answer.json()["data"]["created"] for answer in answers) == 1
    (location,) = listed(api, map_id)
    assert {answer.json()["data"]["locations"][0]["id"] for answer in answers} == {location["id"]}


def test_upsert_records_one_event_per_location_it_changes_and_none_for_the_others(api, map_id):
    layer = make_layer(api, map_id)["id"]
    upserted(api, map_id, [row("a"), row("b"), row("c")])
    cursor = latest(api)
    answer = upserted(
        api, map_id, [row("a"), row("b", name="renamed"), row("c", layerIds=[layer]), row("d")]
    )
    assert (answer["created"], answer["updated"], answer["unchanged"]) == (1, 2, 1)
    events = read_feed(api, after=cursor)
    shown = {loc["externalId"]: loc for loc in answer["locations"]}
    assert sorted((e["type"], e["data"]["externalId"]) for e in events) == [
        ("location.created", "d"),
        ("location.updated", "b"),
        ("location.updated", "c"),
    ]
    assert all(e["data"] == shown[e["data"]["externalId"]] for e in events)
    assert [layer_["id"] for layer_ in shown["c"]["layers"]] == [layer]


def test_a_put_that_only_changes_layer_ids_records_location_updated(api, map_id):
    layer = make_layer(api, map_id)["id"]
    location = api.created(f"/maps/{map_id}/locations", row("a"))
    cursor = latest(api)
    path = f"/maps/{map_id}/locations/{location['id']}"
    assert data(api.put(path, json={"layerIds": [layer]}))["layers"][0]["id"] == layer
    (event,) = read_feed(api, after=cursor)
    assert event["type"] == "location.updated"
    assert [layer_["id"] for layer_ in event["data"]["layers"]] == [layer]
    cursor = latest(api)
    assert data(api.put(path, json={"layerIds": [layer]}))["layers"][0]["id"] == layer
    assert read_feed(api, after=cursor) == []  # the same set: no change, no event
