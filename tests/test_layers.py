"""Layers: create, read, list, update, delete, and their order 0..n-1."""

import time

import pytest

from .factories import error_code, make_layer, make_map
from .helpers import LAYER_FIELDS, TICK, TIMESTAMP
from .helpers import data_of as data
from .helpers import validation_details as details


def assert_field_error(response, field):
    found = details(response)
    assert set(found) == {field}, found
    assert isinstance(found[field], list) and found[field], found
    assert all(isinstance(message, str) and message for message in found[field]), found


def layers_path(map_id):
    return f"/maps/{map_id}/layers"


def layer_path(map_id, layer_id):
    return f"/maps/{map_id}/layers/{layer_id}"


def layers_in_order(api, map_id) -> list[dict]:
    """The map's layers as listed, asserting their orders are exactly 0..n-1."""
    body = data(api.get(layers_path(map_id) + "?pageSize=100"))
    layers = body["layers"]
    assert body["pagination"]["total"] == len(layers)
    assert [layer["order"] for layer in layers] == list(range(len(layers))), layers
    assert all(set(layer) == LAYER_FIELDS for layer in layers)
    return layers


def names(api, map_id) -> list[str]:
    return [layer["name"] for layer in layers_in_order(api, map_id)]


def make_layers(api, map_id, *layer_names) -> dict[str, dict]:
    made = {name: make_layer(api, map_id, name=name) for name in layer_names}
    assert names(api, map_id) == list(layer_names)
    return made


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


# --- create ---------------------------------------------------------------------


def test_create_layer_applies_defaults(api, map_id):
    created = data(api.post(layers_path(map_id), json={"name": "  Bars  "}), 201)
    assert set(created) == LAYER_FIELDS
    assert created["name"] == "Bars"
    assert created["mapId"] == map_id
    assert created["color"] == "#3B82F6"
    assert created["order"] == 0
    assert created["routeEnabled"] is False and created["routeShowByDefault"] is False
    assert TIMESTAMP.match(created["createdAt"]) and created["createdAt"] == created["updatedAt"]
    assert layers_in_order(api, map_id) == [created]


def test_create_layer_stores_every_writable_field(api, map_id):
    body = {"name": "Route", "color": "#a1B2c3", "routeEnabled": True, "routeShowByDefault": True, "order": 0}
    created = data(api.post(layers_path(map_id), json=body), 201)
    assert created["color"] == "#A1B2C3"
    assert created["routeEnabled"] is True and created["routeShowByDefault"] is True
    assert layers_in_order(api, map_id) == [created]


def test_create_without_order_appends(api, map_id):
    orders = [data(api.post(layers_path(map_id), json={"name": name}), 201)["order"] for name in "abcd"]
    assert orders == [0, 1, 2, 3]
    assert names(api, map_id) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "order, expected",
    [
        (0, ["new", "a", "b", "c"]),
        (1, ["a", "new", "b", "c"]),
        (2, ["a", "b", "new", "c"]),
        (3, ["a", "b", "c", "new"]),
        (4, ["a", "b", "c", "new"]),
        (10**30, ["a", "b", "c", "new"]),
    ],
)
def test_create_with_order_inserts_there_and_shifts_the_rest(api, map_id, order, expected):
    make_layers(api, map_id, "a", "b", "c")
    created = data(api.post(layers_path(map_id), json={"name": "new", "order": order}), 201)
    assert created["order"] == expected.index("new")
    assert names(api, map_id) == expected


def test_create_with_order_on_an_empty_map_is_clamped_to_zero(api, map_id):
    created = data(api.post(layers_path(map_id), json={"name": "only", "order": 5}), 201)
    assert created["order"] == 0
    assert layers_in_order(api, map_id) == [created]


def test_inserting_a_layer_moves_updated_at_of_the_shifted_ones_only(api, map_id):
    made = make_layers(api, map_id, "a", "b", "c")
    time.sleep(TICK)
    data(api.post(layers_path(map_id), json={"name": "new", "order": 1}), 201)
    after = {layer["name"]: layer for layer in layers_in_order(api, map_id)}
    assert after["a"] == made["a"]
    for name in ("b", "c"):
        assert after[name]["updatedAt"] > made[name]["updatedAt"]
        assert after[name]["createdAt"] == made[name]["createdAt"]
        assert after[name]["order"] == made[name]["order"] + 1


@pytest.mark.parametrize("order", [-1, 1.5, 1.0, "1", None, True])
def test_create_with_an_invalid_order_is_refused(api, map_id, order):
    made = make_layers(api, map_id, "a", "b")
    assert_field_error(api.post(layers_path(map_id), json={"name": "new", "order": order}), "order")
    assert layers_in_order(api, map_id) == list(made.values())


@pytest.mark.parametrize("missing_or_bad", [{}, {"name": ""}, {"name": "   "}, {"name": None},
                                            {"name": 5}, {"name": "x" * 101}, {"name": "a\u0000"}])
def test_create_layer_requires_a_name_of_1_to_100_characters(api, map_id, missing_or_bad):
    assert_field_error(api.post(layers_path(map_id), json={"color": "#000000", **missing_or_bad}), "name")
    assert layers_in_order(api, map_id) == []


def test_layer_name_length_is_counted_after_trimming(api, map_id):
    longest = "é" * 99 + "😀"
    created = data(api.post(layers_path(map_id), json={"name": "  " + longest + "\n"}), 201)
    assert created["name"] == longest
    assert layers_in_order(api, map_id) == [created]


@pytest.mark.parametrize("color, stored", [("#abcdef", "#ABCDEF"), ("#A1b2C3", "#A1B2C3"), ("#000000", "#000000")])
def test_layer_color_is_returned_upper_case(api, map_id, color, stored):
    created = data(api.post(layers_path(map_id), json={"name": "a", "color": color}), 201)
    assert created["color"] == stored
    other = make_layer(api, map_id, name="b")
    updated = data(api.put(layer_path(map_id, other["id"]), json={"color": color}))
    assert updated["color"] == stored
    assert [layer["color"] for layer in layers_in_order(api, map_id)] == [stored, stored]


@pytest.mark.parametrize("color", ["#abc", "abcdef", "#GGGGGG", "#abcdef0", None, 123])
def test_invalid_layer_color_is_refused(api, map_id, color):
    assert_field_error(api.post(layers_path(map_id), json={"name": "a", "color": color}), "color")
    assert layers_in_order(api, map_id) == []
    layer = make_layer(api, map_id)
    assert_field_error(api.put(layer_path(map_id, layer["id"]), json={"color": color}), "color")
    assert layers_in_order(api, map_id) == [layer]


@pytest.mark.parametrize("field", ["routeEnabled", "routeShowByDefault"])
@pytest.mark.parametrize("value", ["true", 1, None])
def test_route_flags_must_be_json_booleans(api, map_id, field, value):
    assert_field_error(api.post(layers_path(map_id), json={"name": "a", field: value}), field)
    assert layers_in_order(api, map_id) == []
    layer = make_layer(api, map_id)
    assert_field_error(api.put(layer_path(map_id, layer["id"]), json={field: value}), field)
    assert layers_in_order(api, map_id) == [layer]


@pytest.mark.parametrize("unknown", ["position", "visible", "slug", "Order"])
def test_unknown_layer_field_is_refused_and_named(api, map_id, unknown):
    assert_field_error(api.post(layers_path(map_id), json={"name": "a", unknown: 1}), unknown)
    assert layers_in_order(api, map_id) == []


def test_read_only_layer_fields_are_ignored(api, map_id):
    other_map = make_map(api, title="Other")["id"]
    body = {"name": "a", "id": "forged", "mapId": other_map, "createdAt": "2000-01-01T00:00:00Z", "updatedAt": 5}
    created = data(api.post(layers_path(map_id), json=body), 201)
    assert created["id"] != "forged" and created["mapId"] == map_id
    assert not created["createdAt"].startswith("2000") and created["updatedAt"] == created["createdAt"]
    assert layers_in_order(api, map_id) == [created]
    assert layers_in_order(api, other_map) == []


# --- read and list -----------------------------------------------------------------


def test_get_layer_returns_it(api, map_id):
    made = make_layers(api, map_id, "a", "b")
    created = make_layer(api, map_id, name="x", color="#ffffff", routeEnabled=True)
    assert data(api.get(layer_path(map_id, created["id"]))) == created
    for layer in made.values():
        assert data(api.get(layer_path(map_id, layer["id"]))) == layer


def test_layers_are_listed_by_order_not_creation(api, map_id):
    made = make_layers(api, map_id, "a", "b", "c")
    data(api.put(layer_path(map_id, made["c"]["id"]), json={"order": 0}))
    data(api.post(layers_path(map_id), json={"name": "d", "order": 1}), 201)
    body = data(api.get(layers_path(map_id)))
    assert set(body) == {"layers", "pagination"}
    assert [layer["name"] for layer in body["layers"]] == ["c", "d", "a", "b"]
    assert body["pagination"] == {"total": 4, "page": 1, "pageSize": 50, "totalPages": 1}
    page = data(api.get(layers_path(map_id) + "?page=2&pageSize=3"))
    assert [layer["name"] for layer in page["layers"]] == ["b"]
    assert page["pagination"] == {"total": 4, "page": 2, "pageSize": 3, "totalPages": 2}


def test_layers_of_another_map_are_not_listed(api, map_id):
    other_map = make_map(api, title="Other")["id"]
    mine = make_layer(api, map_id)
    theirs = make_layer(api, other_map)
    assert theirs["order"] == 0
    assert layers_in_order(api, map_id) == [mine]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_unknown_or_foreign_layer_is_not_found(api, other_api, map_id, method):
    other_map = make_map(api, title="Other")["id"]
    layer = make_layer(api, map_id)
    for client, path in (
        (api, layer_path(map_id, "nope")),
        (api, layer_path(other_map, layer["id"])),
        (other_api, layer_path(map_id, layer["id"])),
    ):
        response = client.request(method, path, json={"name": "x"})
        assert response.status_code == 404
        assert error_code(response) == "NOT_FOUND"
    assert layers_in_order(api, map_id) == [layer]


def test_layers_of_an_unknown_map_are_not_found(api):
    for response in (api.get(layers_path("nope")), api.post(layers_path("nope"), json={"name": "a"})):
        assert response.status_code == 404
        assert error_code(response) == "NOT_FOUND"


# --- update ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "moved, order, expected",
    [
        ("a", 2, ["b", "c", "a", "d"]),
        ("d", 0, ["d", "a", "b", "c"]),
        ("b", 3, ["a", "c", "d", "b"]),
        ("c", 1, ["a", "c", "b", "d"]),
        ("b", 4, ["a", "c", "d", "b"]),
        ("a", 10**30, ["b", "c", "d", "a"]),
        ("c", 2, ["a", "b", "c", "d"]),
    ],
)
def test_update_with_order_moves_the_layer_and_shifts_the_others(api, map_id, moved, order, expected):
    made = make_layers(api, map_id, "a", "b", "c", "d")
    updated = data(api.put(layer_path(map_id, made[moved]["id"]), json={"order": order}))
    assert updated["order"] == expected.index(moved)
    assert names(api, map_id) == expected


def test_moving_a_layer_moves_updated_at_of_the_shifted_ones_only(api, map_id):
    made = make_layers(api, map_id, "a", "b", "c", "d", "e")
    time.sleep(TICK)
    moved = data(api.put(layer_path(map_id, made["b"]["id"]), json={"order": 3}))
    assert moved["updatedAt"] > made["b"]["updatedAt"]
    after = {layer["name"]: layer for layer in layers_in_order(api, map_id)}
    assert [name for name, _ in sorted(after.items(), key=lambda pair: pair[1]["order"])] == ["a", "c", "d", "b", "e"]
    assert after["b"] == moved
    assert after["a"] == made["a"] and after["e"] == made["e"]
    for name in ("c", "d"):
        assert after[name]["updatedAt"] > made[name]["updatedAt"]
        assert after[name]["order"] == made[name]["order"] - 1
        assert {k: v for k, v in after[name].items() if k not in ("order", "updatedAt")} == {
            k: v for k, v in made[name].items() if k not in ("order", "updatedAt")
        }


def test_moving_a_layer_up_shifts_the_ones_between_down(api, map_id):
    made = make_layers(api, map_id, "a", "b", "c", "d")
    time.sleep(TICK)
    data(api.put(layer_path(map_id, made["c"]["id"]), json={"order": 0}))
    after = {layer["name"]: layer for layer in layers_in_order(api, map_id)}
    assert [after[name]["order"] for name in "abcd"] == [1, 2, 0, 3]
    assert after["d"] == made["d"]
    for name in ("a", "b", "c"):
        assert after[name]["updatedAt"] > made[name]["updatedAt"]


def test_moving_a_layer_to_its_own_order_changes_nothing(api, map_id):
    made = make_layers(api, map_id, "a", "b", "c")
    time.sleep(TICK)
    assert data(api.put(layer_path(map_id, made["b"]["id"]), json={"order": 1})) == made["b"]
    assert data(api.put(layer_path(map_id, made["b"]["id"]), json={"order": 1, "name": "b"})) == made["b"]
    last = data(api.put(layer_path(map_id, made["c"]["id"]), json={"order": 99}))
    assert last == made["c"]  # clamped to n-1, where it already is
    assert layers_in_order(api, map_id) == list(made.values())


@pytest.mark.parametrize("order", [-1, 1.5, 1.0, "1", None, False])
def test_update_with_an_invalid_order_is_refused(api, map_id, order):
    made = make_layers(api, map_id, "a", "b", "c")
    response = api.put(layer_path(map_id, made["a"]["id"]), json={"name": "renamed", "order": order})
    assert_field_error(response, "order")
    assert layers_in_order(api, map_id) == list(made.values())


def test_put_empty_body_changes_nothing(api, map_id):
    made = make_layers(api, map_id, "a", "b")
    time.sleep(TICK)
    assert data(api.put(layer_path(map_id, made["b"]["id"]), json={})) == made["b"]
    assert layers_in_order(api, map_id) == list(made.values())


def test_put_with_the_same_values_keeps_updated_at(api, map_id):
    layer = make_layer(api, map_id, name="a", color="#ABCDEF", routeEnabled=True)
    time.sleep(TICK)
    same = {"name": " a ", "color": "#abcdef", "order": 0, "routeEnabled": True, "routeShowByDefault": False}
    assert data(api.put(layer_path(map_id, layer["id"]), json=same)) == layer
    assert layers_in_order(api, map_id) == [layer]


@pytest.mark.parametrize(
    "field, value",
    [("name", "renamed"), ("color", "#000000"), ("routeEnabled", True), ("routeShowByDefault", True)],
)
def test_put_changing_a_value_moves_updated_at_and_keeps_the_rest(api, map_id, field, value):
    made = make_layers(api, map_id, "a", "b")
    time.sleep(TICK)
    updated = data(api.put(layer_path(map_id, made["a"]["id"]), json={field: value}))
    assert updated[field] == value
    assert updated["updatedAt"] > made["a"]["updatedAt"]
    assert {k: v for k, v in updated.items() if k not in (field, "updatedAt")} == {
        k: v for k, v in made["a"].items() if k not in (field, "updatedAt")
    }
    assert layers_in_order(api, map_id) == [updated, made["b"]]


def test_get_modify_put_round_trips(api, map_id):
    made = make_layers(api, map_id, "a", "b", "c")
    fetched = data(api.get(layer_path(map_id, made["a"]["id"])))
    time.sleep(TICK)
    fetched["name"] = "renamed"
    fetched["order"] = 2
    updated = data(api.put(layer_path(map_id, made["a"]["id"]), json=fetched))
    assert updated["name"] == "renamed" and updated["order"] == 2
    assert updated["id"] == made["a"]["id"] and updated["createdAt"] == made["a"]["createdAt"]
    assert updated["updatedAt"] > made["a"]["updatedAt"]
    assert names(api, map_id) == ["b", "c", "renamed"]


@pytest.mark.parametrize("body, field", [({"name": ""}, "name"), ({"name": None}, "name"),
                                         ({"name": "x" * 101}, "name"), ({"visible": True}, "visible")])
def test_update_validates_like_create_and_changes_nothing(api, map_id, body, field):
    made = make_layers(api, map_id, "a", "b")
    assert_field_error(api.put(layer_path(map_id, made["b"]["id"]), json={"order": 0, **body}), field)
    assert layers_in_order(api, map_id) == list(made.values())


# --- delete ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doomed, expected",
    [("a", ["b", "c", "d"]), ("b", ["a", "c", "d"]), ("d", ["a", "b", "c"])],
)
def test_delete_layer_closes_the_gap(api, map_id, doomed, expected):
    made = make_layers(api, map_id, "a", "b", "c", "d")
    time.sleep(TICK)
    response = api.delete(layer_path(map_id, made[doomed]["id"]))
    assert response.status_code == 200
    assert response.get_json() == {"data": {"id": made[doomed]["id"], "deleted": True}}
    assert names(api, map_id) == expected

    after = {layer["name"]: layer for layer in layers_in_order(api, map_id)}
    for name in expected:
        if made[name]["order"] < made[doomed]["order"]:
            assert after[name] == made[name]
        else:
            assert after[name]["order"] == made[name]["order"] - 1
            assert after[name]["updatedAt"] > made[name]["updatedAt"]

    missing = api.get(layer_path(map_id, made[doomed]["id"]))
    assert missing.status_code == 404 and error_code(missing) == "NOT_FOUND"
    again = api.delete(layer_path(map_id, made[doomed]["id"]))
    assert again.status_code == 404 and error_code(again) == "NOT_FOUND"


def test_orders_stay_0_to_n_minus_1_through_a_sequence_of_changes(api, map_id):
    made = make_layers(api, map_id, "a", "b", "c")
    data(api.post(layers_path(map_id), json={"name": "d", "order": 0}), 201)
    assert names(api, map_id) == ["d", "a", "b", "c"]
    data(api.put(layer_path(map_id, made["a"]["id"]), json={"order": 50}))
    assert names(api, map_id) == ["d", "b", "c", "a"]
    data(api.delete(layer_path(map_id, made["b"]["id"])))
    assert names(api, map_id) == ["d", "c", "a"]
    data(api.post(layers_path(map_id), json={"name": "e", "order": 2}), 201)
    assert names(api, map_id) == ["d", "c", "e", "a"]
    data(api.put(layer_path(map_id, made["c"]["id"]), json={"order": 3}))
    assert names(api, map_id) == ["d", "e", "a", "c"]
    data(api.delete(layer_path(map_id, made["c"]["id"])))
    assert names(api, map_id) == ["d", "e", "a"]
    data(api.post(layers_path(map_id), json={"name": "f"}), 201)
    assert names(api, map_id) == ["d", "e", "a", "f"]


def test_layer_orders_of_different_maps_are_independent(api, map_id):
    other_map = make_map(api, title="Other")["id"]
    mine = make_layers(api, map_id, "a", "b")
    theirs = make_layers(api, other_map, "x", "y")
    data(api.put(layer_path(map_id, mine["b"]["id"]), json={"order": 0}))
    data(api.delete(layer_path(map_id, mine["a"]["id"])))
    assert names(api, map_id) == ["b"]
    assert layers_in_order(api, other_map) == list(theirs.values())
