"""Categories of a map: create, read, list, update, delete."""

import time

import pytest

from .factories import error_code, make_category, make_location, make_map
from .helpers import data_of, field_errors, outcome

CATEGORY_FIELDS = {"id", "mapId", "name", "color", "icon", "createdAt", "updatedAt"}


def assert_not_found(response):
    assert response.status_code == 404, response.get_json()
    assert error_code(response) == "NOT_FOUND"


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def path(map_id, category_id=None):
    base = f"/maps/{map_id}/categories"
    return base if category_id is None else f"{base}/{category_id}"


def listed(api, map_id):
    return data_of(api.get(path(map_id)))["categories"]


def test_create_category_applies_defaults(api, map_id):
    created = data_of(api.post(path(map_id), json={"name": "  Food  "}), 201)
    assert set(created) == CATEGORY_FIELDS
    assert created["name"] == "Food"
    assert created["mapId"] == map_id
    assert created["color"] is None and created["icon"] == ""
    assert created["createdAt"] == created["updatedAt"]
    assert len(created["id"]) >= 22
    assert data_of(api.get(path(map_id, created["id"]))) == created
    assert listed(api, map_id) == [created]


def test_color_is_accepted_in_either_case_and_returned_upper_case(api, map_id):
    for sent, stored in [("#ff8800", "#FF8800"), ("#AbCdEf", "#ABCDEF"), ("#00FF00", "#00FF00")]:
        created = data_of(api.post(path(map_id), json={"name": "C", "color": sent}), 201)
        assert created["color"] == stored
        assert data_of(api.get(path(map_id, created["id"])))["color"] == stored
        updated = data_of(api.put(path(map_id, created["id"]), json={"color": sent.swapcase()}))
        assert updated["color"] == stored


def test_create_category_stores_every_field(api, map_id):
    body = {"name": "n" * 100, "color": None, "icon": "  " + "i" * 50 + "  "}
    created = data_of(api.post(path(map_id), json=body), 201)
    assert (created["name"], created["color"], created["icon"]) == ("n" * 100, None, "i" * 50)
    assert data_of(api.get(path(map_id, created["id"]))) == created


INVALID_VALUES = {
    "name": ["", "   ", "n" * 101, None, 5, ["Food"]],
    "color": ["red", "#FFF", "#GGGGGG", "FF0000", "#FF00000", "#FF 000", 0xFF0000, True],
    "icon": ["i" * 51, "  " + "i" * 51, None, 3],
}


@pytest.mark.parametrize("name", INVALID_VALUES)
def test_create_refuses_invalid_values_naming_the_field(api, map_id, name):
    values = INVALID_VALUES[name]
    outcomes = {
        repr(v): outcome(api.post(path(map_id), json={"name": "Ok", name: v})) for v in values
    }
    assert outcomes == {repr(v): (400, "VALIDATION_ERROR", [name]) for v in values}
    assert listed(api, map_id) == []


@pytest.mark.parametrize("name", INVALID_VALUES)
def test_update_refuses_invalid_values_and_changes_nothing(api, map_id, name):
    created = make_category(api, map_id, color="#123456", icon="pin")
    target = path(map_id, created["id"])
    values = INVALID_VALUES[name]
    outcomes = {repr(v): outcome(api.put(target, json={name: v})) for v in values}
    assert outcomes == {repr(v): (400, "VALIDATION_ERROR", [name]) for v in values}
    assert data_of(api.get(target)) == created


def test_create_without_name_names_it(api, map_id):
    assert field_errors(api.post(path(map_id), json={"icon": "pin"})).keys() == {"name"}
    assert listed(api, map_id) == []


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_unknown_fields_are_refused_by_name(api, map_id, method):
    created = make_category(api, map_id)
    target = path(map_id) if method == "POST" else path(map_id, created["id"])
    body = {"name": "New", "slug": "new", "userId": "x", "order": 1}
    details = field_errors(api.request(method, target, json=body))
    assert details.keys() == {"slug", "userId", "order"}
    assert listed(api, map_id) == [created]


def test_read_only_fields_are_accepted_and_ignored(api, map_id):
    other_map = make_map(api)["id"]
    body = {
        "name": "Kept",
        "id": "forged",
        "mapId": other_map,
        "createdAt": "2000-01-01T00:00:00Z",
        "updatedAt": None,
    }
    created = data_of(api.post(path(map_id), json=body), 201)
    assert created["id"] != "forged" and created["mapId"] == map_id
    assert created["createdAt"] == created["updatedAt"]
    assert not created["createdAt"].startswith("2000")
    assert data_of(api.put(path(map_id, created["id"]), json={**body, "name": "Kept"})) == created
    assert data_of(api.get(path(map_id, created["id"]))) == created
    assert listed(api, other_map) == []


def test_put_is_a_partial_update_and_moves_updated_at(api, map_id):
    created = make_category(api, map_id, name="Food", color="#112233", icon="fork")
    time.sleep(0.005)
    updated = data_of(api.put(path(map_id, created["id"]), json={"color": "#aabbcc"}))
    assert updated["color"] == "#AABBCC"
    assert (updated["name"], updated["icon"]) == ("Food", "fork")
    assert updated["createdAt"] == created["createdAt"]
    assert updated["updatedAt"] > created["updatedAt"]
    assert data_of(api.get(path(map_id, created["id"]))) == updated


def test_put_null_color_clears_it(api, map_id):
    created = make_category(api, map_id, color="#112233")
    updated = data_of(api.put(path(map_id, created["id"]), json={"color": None}))
    assert updated["color"] is None
    assert data_of(api.get(path(map_id, created["id"])))["color"] is None


def test_put_that_changes_nothing_keeps_updated_at(api, map_id):
    created = make_category(api, map_id, name="Food", color="#AABBCC", icon="fork")
    bodies = [
        {},
        {"name": "Food", "color": "#AABBCC", "icon": "fork"},
        {"name": " Food ", "color": "#aabbcc", "icon": " fork "},
        {key: value for key, value in created.items()},
    ]
    for body in bodies:
        time.sleep(0.005)
        assert data_of(api.put(path(map_id, created["id"]), json=body)) == created, body
    assert data_of(api.get(path(map_id, created["id"]))) == created


def test_list_categories_in_creation_order(api, map_id):
    created = [make_category(api, map_id, name=name) for name in ("b", "a", "c")]
    other = make_category(api, make_map(api)["id"])
    body = data_of(api.get(path(map_id)))
    assert body == {
        "categories": created,
        "pagination": {"total": 3, "page": 1, "pageSize": 50, "totalPages": 1},
    }
    assert other not in body["categories"]


def test_delete_category(api, map_id):
    created = make_category(api, map_id)
    kept = make_category(api, map_id, name="Kept")
    deleted = data_of(api.delete(path(map_id, created["id"])))
    assert deleted == {"id": created["id"], "deleted": True}
    assert_not_found(api.get(path(map_id, created["id"])))
    assert_not_found(api.delete(path(map_id, created["id"])))
    assert_not_found(api.put(path(map_id, created["id"]), json={"name": "Back"}))
    assert listed(api, map_id) == [kept]


def test_delete_category_uncategorizes_its_locations(api, map_id):
    category = make_category(api, map_id)
    location = make_location(api, map_id, categoryId=category["id"])
    assert location["categoryId"] == category["id"]
    time.sleep(0.005)
    data_of(api.delete(path(map_id, category["id"])))
    after = data_of(api.get(f"/maps/{map_id}/locations/{location['id']}"))
    assert after["categoryId"] is None
    assert after["updatedAt"] > location["updatedAt"]


def test_another_accounts_category_is_not_found(api, other_api):
    their_map = make_map(other_api)["id"]
    theirs = make_category(other_api, their_map)
    requests = [
        ("GET", path(their_map)),
        ("POST", path(their_map)),
        ("GET", path(their_map, theirs["id"])),
        ("PUT", path(their_map, theirs["id"])),
        ("DELETE", path(their_map, theirs["id"])),
    ]
    outcomes = {r: outcome(api.request(r[0], r[1], json={"name": "Mine"})) for r in requests}
    assert outcomes == {r: (404, "NOT_FOUND", []) for r in requests}
    assert listed(other_api, their_map) == [theirs]


def test_category_under_another_map_or_unknown_is_not_found(api, map_id):
    other_map = make_map(api)["id"]
    created = make_category(api, map_id)
    requests = [
        (method, target)
        for method in ("GET", "PUT", "DELETE")
        for target in (
            path(other_map, created["id"]),
            path(map_id, "unknown-id"),
            path("nope", created["id"]),
        )
    ]
    outcomes = {r: outcome(api.request(r[0], r[1], json={"name": "Moved"})) for r in requests}
    assert outcomes == {r: (404, "NOT_FOUND", []) for r in requests}
    assert listed(api, map_id) == [created]
    assert listed(api, other_map) == []
