"""Bulk delete: 1..1000 locations by id or by externalId, at once."""

import pytest

from .factories import error_code, make_layer, make_location, make_map, make_tag
from .helpers import data_of as data
from .helpers import validation_details as details
from .test_events import latest, read_feed
from .test_isolation_generated import dump_database


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def bulk_delete(api, map_id, body):
    return api.post(f"/maps/{map_id}/locations/bulk-delete", json=body)


def names(api, map_id) -> list[str]:
    listed = data(api.get(f"/maps/{map_id}/locations?pageSize=100"))["locations"]
    return [location["name"] for location in listed]


@pytest.fixture
def spots(api, map_id) -> dict[str, dict]:
    """Five locations a..e, each with its externalId (its name in upper case)."""
    items = [{"name": n, "lat": 0, "lng": 0, "externalId": n.upper()} for n in "abcde"]
    created = api.created(f"/maps/{map_id}/locations/bulk", {"locations": items})["created"]
    return {location["name"]: location for location in created}


def test_delete_by_ids_in_the_order_first_given(api, map_id, spots):
    ids = [spots[n]["id"] for n in ("d", "b", "d")]
    answer = data(bulk_delete(api, map_id, {"ids": ids}))
    assert answer == {"deleted": [spots["d"]["id"], spots["b"]["id"]], "count": 2}
    assert names(api, map_id) == ["a", "c", "e"]
    assert error_code(api.get(f"/maps/{map_id}/locations/{spots['d']['id']}")) == "NOT_FOUND"


def test_delete_by_external_ids_trimmed(api, map_id, spots):
    answer = data(bulk_delete(api, map_id, {"externalIds": [" E ", "A", "e", "E"]}))
    assert answer == {"deleted": [spots["e"]["id"], spots["a"]["id"]], "count": 2}
    assert names(api, map_id) == ["b", "c", "d"]


def test_names_that_match_nothing_are_skipped(api, map_id, spots):
    other_map = make_map(api)["id"]
    theirs = make_location(api, other_map, externalId="A")
    answer = data(
        bulk_delete(api, map_id, {"ids": ["unknown", "x" * 22, theirs["id"], spots["c"]["id"]]})
    )
    assert answer == {"deleted": [spots["c"]["id"]], "count": 1}
    assert data(bulk_delete(api, map_id, {"externalIds": ["Z", "c"]})) == {
        "deleted": [],
        "count": 0,
    }
    assert data(bulk_delete(api, map_id, {"ids": [spots["c"]["id"]]})) == {
        "deleted": [],
        "count": 0,
    }
    assert names(api, other_map) == ["Spot"]


def test_deleting_removes_memberships_and_keeps_tags_and_layers(app, api, map_id):
    layer = make_layer(api, map_id)["id"]
    tag = make_tag(api, map_id)["id"]
    kept = make_location(api, map_id, name="kept", tagIds=[tag], layerIds=[layer])
    gone = make_location(api, map_id, name="gone", externalId="G", tagIds=[tag], layerIds=[layer])
    assert data(bulk_delete(api, map_id, {"externalIds": ["G"]}))["deleted"] == [gone["id"]]
    rows = dump_database(app)
    assert [row[0] for row in rows["location_tags"]] == [kept["id"]]
    assert [row[0] for row in rows["location_layers"]] == [kept["id"]]
    assert data(api.get(f"/maps/{map_id}/locations/{kept['id']}")) == kept


def test_a_hundred_names_are_accepted(api, map_id, spots):
    ids = [spots["a"]["id"]] * 100
    assert data(bulk_delete(api, map_id, {"ids": ids}))["count"] == 1


@pytest.mark.parametrize(
    "body, fields",
    [
        ({}, {"ids", "externalIds"}),
        ({"ids": ["a"], "externalIds": ["b"]}, {"externalIds"}),
        ({"ids": []}, {"ids"}),
        ({"externalIds": []}, {"externalIds"}),
        ({"ids": ["a"] * 1001}, {"ids"}),
        ({"externalIds": ["a"] * 1001}, {"externalIds"}),
        ({"ids": None}, {"ids"}),
        ({"ids": "abc"}, {"ids"}),
        ({"ids": [1]}, {"ids"}),
        ({"externalIds": [""]}, {"externalIds"}),
        ({"externalIds": ["  "]}, {"externalIds"}),
        ({"externalIds": ["x" * 201]}, {"externalIds"}),
        ({"externalIds": ["a\x00"]}, {"externalIds"}),
        ({"ids": ["a"], "locations": []}, {"locations"}),
    ],
)
def test_bad_bodies_are_refused_and_nothing_is_deleted(app, api, map_id, spots, body, fields):
    before = dump_database(app)
    assert set(details(bulk_delete(api, map_id, body))) == fields
    assert dump_database(app) == before


def test_one_bad_name_deletes_nothing(app, api, map_id, spots):
    before = dump_database(app)
    response = bulk_delete(api, map_id, {"externalIds": ["A", "B", 3]})
    assert details(response)["externalIds"] == {"2": ["Not a valid string."]}
    assert dump_database(app) == before


def test_bulk_delete_on_an_unknown_map_or_another_account_is_not_found(
    api, other_api, map_id, spots
):
    assert error_code(bulk_delete(api, "x" * 22, {"ids": [spots["a"]["id"]]})) == "NOT_FOUND"
    assert error_code(bulk_delete(other_api, map_id, {"ids": [spots["a"]["id"]]})) == "NOT_FOUND"
    assert error_code(bulk_delete(api, "unknown", {})) == "NOT_FOUND"  # 404 before 400
    assert names(api, map_id) == list("abcde")


def test_malformed_bodies_are_refused_without_details(api, map_id):
    response = api.post(
        f"/maps/{map_id}/locations/bulk-delete",
        data="[]",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400 and "details" not in response.get_json()["error"]


def test_each_deleted_location_records_one_event(api, map_id, spots):
    cursor = latest(api)
    ids = [spots["a"]["id"], spots["b"]["id"]]
    body = {"ids": [ids[1], ids[0], ids[1], "x" * 22]}
    assert bulk_delete(api, map_id, body).get_json()["data"]["deleted"] == [ids[1], ids[0]]
    events = read_feed(api, after=cursor)
    assert [(e["type"], e["data"]) for e in events] == [
        ("location.deleted", {"id": location_id, "mapId": map_id}) for location_id in ids[::-1]
    ]
    cursor = latest(api)
    assert bulk_delete(api, map_id, {"ids": ids}).get_json()["data"]["count"] == 0
    assert read_feed(api, after=cursor) == []


def test_a_bulk_delete_takes_1000_names(api, map_id):
    items = [{"externalId": f"e{n}", "name": "n", "lat": 0, "lng": 0} for n in range(1000)]
    data(api.post(f"/maps/{map_id}/locations/upsert", json={"locations": items}))
    names_ = [f"e{n}" for n in range(999, -1, -1)]
    answer = data(bulk_delete(api, map_id, {"externalIds": names_}))
    assert answer["count"] == 1000 and len(answer["deleted"]) == 1000
    assert names(api, map_id) == []
