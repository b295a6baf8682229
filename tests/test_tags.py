"""Tags of a map: CRUD, and names unique within a map."""

import time

import pytest

from .factories import error_code, make_location, make_map, make_tag
from .helpers import data_of, field_errors, outcome

TAG_FIELDS = {"id", "mapId", "name", "color", "createdAt", "updatedAt"}


def assert_error(response, status, code):
    assert response.status_code == status, response.get_json()
    assert error_code(response) == code
    assert "details" not in response.get_json()["error"]


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def path(map_id, tag_id=None):
    base = f"/maps/{map_id}/tags"
    return base if tag_id is None else f"{base}/{tag_id}"


def listed(api, map_id):
    return data_of(api.get(path(map_id)))["tags"]


# --- create and read --------------------------------------------------------


def test_create_tag_applies_defaults(api, map_id):
    created = data_of(api.post(path(map_id), json={"name": "  cafe  "}), 201)
    assert set(created) == TAG_FIELDS
    assert created["name"] == "cafe" and created["color"] is None
    assert created["mapId"] == map_id
    assert created["createdAt"] == created["updatedAt"]
    assert len(created["id"]) >= 22
    assert data_of(api.get(path(map_id, created["id"]))) == created
    assert listed(api, map_id) == [created]


def test_tag_color_is_returned_upper_case(api, map_id):
    colors = [("#ff8800", "#FF8800"), ("#aBcDeF", "#ABCDEF"), (None, None)]
    for n, (sent, stored) in enumerate(colors):
        created = data_of(api.post(path(map_id), json={"name": f"t{n}", "color": sent}), 201)
        assert created["color"] == stored
        assert data_of(api.get(path(map_id, created["id"])))["color"] == stored


def test_tag_name_of_50_characters_is_accepted(api, map_id):
    name = "ü" * 50
    created = data_of(api.post(path(map_id), json={"name": f"  {name}  "}), 201)
    assert created["name"] == name


INVALID_VALUES = {
    "name": ["", "  ", "n" * 51, " " + "n" * 51 + " ", None, 7, ["cafe"]],
    "color": ["blue", "#12345", "#1234567", "123456", "#12345G", 123456, False],
}


@pytest.mark.parametrize("name", INVALID_VALUES)
def test_create_refuses_invalid_values_naming_the_field(api, map_id, name):
    values = INVALID_VALUES[name]
    outcomes = {
        repr(v): outcome(api.post(path(map_id), json={"name": "ok", name: v})) for v in values
    }
    assert outcomes == {repr(v): (400, "VALIDATION_ERROR", [name]) for v in values}
    assert listed(api, map_id) == []


@pytest.mark.parametrize("name", INVALID_VALUES)
def test_update_refuses_invalid_values_and_changes_nothing(api, map_id, name):
    created = make_tag(api, map_id, color="#ABCDEF")
    target = path(map_id, created["id"])
    values = INVALID_VALUES[name]
    outcomes = {repr(v): outcome(api.put(target, json={name: v})) for v in values}
    assert outcomes == {repr(v): (400, "VALIDATION_ERROR", [name]) for v in values}
    assert data_of(api.get(target)) == created


def test_create_without_name_names_it(api, map_id):
    assert field_errors(api.post(path(map_id), json={"color": "#000000"})).keys() == {"name"}
    assert listed(api, map_id) == []


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_unknown_fields_are_refused_by_name(api, map_id, method):
    created = make_tag(api, map_id)
    target = path(map_id) if method == "POST" else path(map_id, created["id"])
    body = {"name": "other", "icon": "pin", "slug": "other"}
    assert field_errors(api.request(method, target, json=body)).keys() == {"icon", "slug"}
    assert listed(api, map_id) == [created]


def test_read_only_fields_are_accepted_and_ignored(api, map_id):
    body = {"name": "t", "id": 1, "mapId": "elsewhere", "createdAt": [], "updatedAt": "yesterday"}
    created = data_of(api.post(path(map_id), json=body), 201)
    assert created["id"] != 1 and created["mapId"] == map_id
    assert created["createdAt"] == created["updatedAt"]
    assert data_of(api.put(path(map_id, created["id"]), json=body)) == created
    assert listed(api, map_id) == [created]


# --- unique names -----------------------------------------------------------


def test_duplicate_name_on_a_map_is_a_conflict(api, map_id):
    first = make_tag(api, map_id, name="cafe")
    duplicates = ["cafe", " cafe ", "\tcafe\n"]
    outcomes = {d: outcome(api.post(path(map_id), json={"name": d})) for d in duplicates}
    assert outcomes == {d: (409, "CONFLICT", []) for d in duplicates}
    assert listed(api, map_id) == [first]
    # The refused requests left the service usable.
    second = data_of(api.post(path(map_id), json={"name": "bar"}), 201)
    assert listed(api, map_id) == [first, second]


def test_names_differing_in_case_coexist(api, map_id):
    upper = data_of(api.post(path(map_id), json={"name": "Cafe"}), 201)
    lower = data_of(api.post(path(map_id), json={"name": "cafe"}), 201)
    assert [tag["name"] for tag in listed(api, map_id)] == ["Cafe", "cafe"]
    assert upper["id"] != lower["id"]


def test_names_are_compared_without_unicode_normalization(api, map_id):
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    data_of(api.post(path(map_id), json={"name": composed}), 201)
    data_of(api.post(path(map_id), json={"name": decomposed}), 201)
    assert [tag["name"] for tag in listed(api, map_id)] == [composed, decomposed]


def test_the_same_name_on_two_maps_is_fine(api, other_api, map_id):
    second_map = make_map(api)["id"]
    first = data_of(api.post(path(map_id), json={"name": "cafe"}), 201)
    second = data_of(api.post(path(second_map), json={"name": "cafe"}), 201)
    theirs_map = make_map(other_api)["id"]
    theirs = data_of(other_api.post(path(theirs_map), json={"name": "cafe"}), 201)
    assert listed(api, map_id) == [first]
    assert listed(api, second_map) == [second]
    assert listed(other_api, theirs_map) == [theirs]


def test_renaming_to_a_taken_name_is_a_conflict_and_changes_nothing(api, map_id):
    cafe = make_tag(api, map_id, name="cafe")
    bar = make_tag(api, map_id, name="bar", color="#111111")
    for taken in ["cafe", "  cafe  "]:
        response = api.put(path(map_id, bar["id"]), json={"name": taken, "color": "#222222"})
        assert outcome(response) == (409, "CONFLICT", []), taken
    assert data_of(api.get(path(map_id, bar["id"]))) == bar
    assert listed(api, map_id) == [cafe, bar]


def test_renaming_to_its_own_name_is_fine(api, map_id):
    created = make_tag(api, map_id, name="cafe")
    for same in ["cafe", "  cafe "]:
        time.sleep(0.005)
        assert data_of(api.put(path(map_id, created["id"]), json={"name": same})) == created
    assert data_of(api.get(path(map_id, created["id"]))) == created


def test_renaming_to_a_free_name_moves_updated_at(api, map_id):
    created = make_tag(api, map_id, name="cafe", color="#ABCDEF")
    time.sleep(0.005)
    updated = data_of(api.put(path(map_id, created["id"]), json={"name": " Cafe "}))
    assert updated["name"] == "Cafe" and updated["color"] == "#ABCDEF"
    assert updated["createdAt"] == created["createdAt"]
    assert updated["updatedAt"] > created["updatedAt"]
    assert data_of(api.get(path(map_id, created["id"]))) == updated
    # The old name is free again.
    data_of(api.post(path(map_id), json={"name": "cafe"}), 201)


def test_deleted_tags_name_can_be_reused(api, map_id):
    created = make_tag(api, map_id, name="cafe")
    data_of(api.delete(path(map_id, created["id"])))
    again = data_of(api.post(path(map_id), json={"name": "cafe"}), 201)
    assert again["id"] != created["id"]
    assert listed(api, map_id) == [again]


# --- update, list, delete ---------------------------------------------------


def test_put_is_a_partial_update(api, map_id):
    created = make_tag(api, map_id, name="cafe", color="#ABCDEF")
    time.sleep(0.005)
    updated = data_of(api.put(path(map_id, created["id"]), json={"color": "#00ff00"}))
    assert (updated["name"], updated["color"]) == ("cafe", "#00FF00")
    assert updated["updatedAt"] > created["updatedAt"]
    cleared = data_of(api.put(path(map_id, created["id"]), json={"color": None}))
    assert (cleared["name"], cleared["color"]) == ("cafe", None)
    assert data_of(api.get(path(map_id, created["id"]))) == cleared


def test_put_that_changes_nothing_keeps_updated_at(api, map_id):
    created = make_tag(api, map_id, name="cafe", color="#ABCDEF")
    for body in [{}, {"name": "cafe", "color": "#abcdef"}, dict(created)]:
        time.sleep(0.005)
        assert data_of(api.put(path(map_id, created["id"]), json=body)) == created, body
    assert data_of(api.get(path(map_id, created["id"]))) == created


def test_list_tags_in_creation_order(api, map_id):
    created = [make_tag(api, map_id, name=name) for name in ("zeta", "alpha", "mid")]
    make_tag(api, make_map(api)["id"], name="elsewhere")
    assert data_of(api.get(path(map_id))) == {
        "tags": created,
        "pagination": {"total": 3, "page": 1, "pageSize": 50, "totalPages": 1},
    }


def test_delete_tag_removes_it_from_locations(api, map_id):
    doomed, kept = make_tag(api, map_id, name="doomed"), make_tag(api, map_id, name="kept")
    location = make_location(api, map_id, tagIds=[doomed["id"], kept["id"]])
    time.sleep(0.005)
    assert data_of(api.delete(path(map_id, doomed["id"]))) == {"id": doomed["id"], "deleted": True}
    assert_error(api.get(path(map_id, doomed["id"])), 404, "NOT_FOUND")
    assert_error(api.delete(path(map_id, doomed["id"])), 404, "NOT_FOUND")
    assert listed(api, map_id) == [kept]
    after = data_of(api.get(f"/maps/{map_id}/locations/{location['id']}"))
    assert after["tagIds"] == [kept["id"]]
    assert after["updatedAt"] > location["updatedAt"]


def test_another_accounts_tag_is_not_found(api, other_api):
    their_map = make_map(other_api)["id"]
    theirs = make_tag(other_api, their_map)
    requests = [
        ("GET", path(their_map)),
        ("POST", path(their_map)),
        ("GET", path(their_map, theirs["id"])),
        ("PUT", path(their_map, theirs["id"])),
        ("DELETE", path(their_map, theirs["id"])),
    ]
    outcomes = {r: outcome(api.request(r[0], r[1], json={"name": "mine"})) for r in requests}
    assert outcomes == {r: (404, "NOT_FOUND", []) for r in requests}
    assert listed(other_api, their_map) == [theirs]


def test_tag_under_another_map_or_unknown_is_not_found(api, map_id):
    created = make_tag(api, map_id)
    other_map = make_map(api)["id"]
    requests = [
        (method, target)
        for method in ("GET", "PUT", "DELETE")
        for target in (path(other_map, created["id"]), path(map_id, "unknown-id"))
    ]
    outcomes = {r: outcome(api.request(r[0], r[1], json={"name": "moved"})) for r in requests}
    assert outcomes == {r: (404, "NOT_FOUND", []) for r in requests}
    assert listed(api, map_id) == [created]
    assert listed(api, other_map) == []
