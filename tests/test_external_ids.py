"""externalId on locations: rules, uniqueness per map (under races too), the
list filter; and layerIds on create, bulk and PUT."""

import threading
import time

import pytest
import requests
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from mapapi.extensions import db

from .factories import API, error_code, make_layer, make_location, make_map
from .helpers import TICK
from .helpers import data_of as data
from .helpers import validation_details as details


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def locations(api, map_id, query="") -> list[dict]:
    return data(api.get(f"/maps/{map_id}/locations?pageSize=100{query}"))["locations"]


def spot(**fields) -> dict:
    return {"name": "Spot", "lat": 1.5, "lng": 2.5, **fields}


# --- the field -----------------------------------------------------------------


def test_external_id_is_trimmed_stored_and_shown(api, map_id):
    created = data(api.post(f"/maps/{map_id}/locations", json=spot(externalId="  row-1 ")), 201)
    assert created["externalId"] == "row-1"
    assert data(api.get(f"/maps/{map_id}/locations/{created['id']}"))["externalId"] == "row-1"
    assert locations(api, map_id)[0]["externalId"] == "row-1"


def test_external_id_defaults_to_null_and_nulls_never_clash(api, map_id):
    first = make_location(api, map_id)
    second = make_location(api, map_id, externalId=None)
    assert first["externalId"] is None and second["externalId"] is None


@pytest.mark.parametrize("value", ["", "   ", "x" * 201, 5, True, ["a"], {"a": 1}, "a\x00b"])
def test_bad_external_ids_are_field_errors(api, map_id, value):
    response = api.post(f"/maps/{map_id}/locations", json=spot(externalId=value))
    assert set(details(response)) == {"externalId"}
    assert locations(api, map_id) == []


def test_external_id_of_200_characters_after_trimming_is_accepted(api, map_id):
    value = "é" * 200
    created = data(api.post(f"/maps/{map_id}/locations", json=spot(externalId=f" {value} ")), 201)
    assert created["externalId"] == value


def test_external_ids_are_case_sensitive_and_per_map(api, map_id):
    other_map = make_map(api)["id"]
    make_location(api, map_id, externalId="A1")
    assert make_location(api, map_id, externalId="a1")["externalId"] == "a1"
    assert make_location(api, other_map, externalId="A1")["externalId"] == "A1"


def test_a_taken_external_id_is_a_conflict_on_create(api, map_id):
    make_location(api, map_id, externalId="A1")
    response = api.post(f"/maps/{map_id}/locations", json=spot(name="second", externalId=" A1"))
    assert response.status_code == 409 and error_code(response) == "CONFLICT"
    assert "details" not in response.get_json()["error"]
    assert [location["name"] for location in locations(api, map_id)] == ["Spot"]


def test_a_taken_external_id_is_a_conflict_on_bulk_and_nothing_is_created(api, map_id):
    make_location(api, map_id, externalId="A1")
    items = [spot(name="new", externalId="B1"), spot(name="clash", externalId="A1")]
    response = api.post(f"/maps/{map_id}/locations/bulk", json={"locations": items})
    assert response.status_code == 409 and error_code(response) == "CONFLICT"
    assert [location["externalId"] for location in locations(api, map_id)] == ["A1"]


def test_an_external_id_twice_in_one_bulk_is_an_error_on_the_later_item(api, map_id):
    items = [spot(externalId="A1"), spot(externalId="B1"), spot(externalId=" A1 "), spot(lat=91)]
    response = api.post(f"/maps/{map_id}/locations/bulk", json={"locations": items})
    errors = details(response)["locations"]
    assert set(errors) == {"2", "3"}
    assert set(errors["2"]) == {"externalId"} and set(errors["3"]) == {"lat"}
    assert locations(api, map_id) == []


def test_a_taken_external_id_is_a_conflict_on_put_and_nothing_changes(api, map_id):
    make_location(api, map_id, externalId="A1")
    second = make_location(api, map_id, externalId="B1")
    response = api.put(
        f"/maps/{map_id}/locations/{second['id']}", json={"name": "renamed", "externalId": "A1"}
    )
    assert response.status_code == 409 and error_code(response) == "CONFLICT"
    assert data(api.get(f"/maps/{map_id}/locations/{second['id']}")) == second


def test_put_sets_changes_and_clears_the_external_id(api, map_id):
    location = make_location(api, map_id)
    path = f"/maps/{map_id}/locations/{location['id']}"
    time.sleep(TICK)
    assert data(api.put(path, json={"externalId": "A1"}))["externalId"] == "A1"
    same = data(api.put(path, json={"externalId": " A1 "}))
    assert same == data(api.get(path))
    time.sleep(TICK)
    cleared = data(api.put(path, json={"externalId": None}))
    assert cleared["externalId"] is None and cleared["updatedAt"] > same["updatedAt"]
    assert data(api.put(path, json={"externalId": "A1"}))["externalId"] == "A1"


def test_a_put_with_the_same_external_id_keeps_updated_at(api, map_id):
    location = make_location(api, map_id, externalId="A1")
    time.sleep(TICK)
    again = data(api.put(f"/maps/{map_id}/locations/{location['id']}", json={"externalId": "A1"}))
    assert again == location


def test_racing_creates_of_one_external_id_make_one_location(api, map_id, live_server):
    """Eight clients at once over HTTP: the database lets exactly one win."""
    url = f"{live_server}{API}/maps/{map_id}/locations"
    headers = {"Authorization": f"Bearer {api.key}"}
    start, statuses = threading.Barrier(8), []

    def create(number):
        start.wait()
        body = spot(name=f"racer {number}", externalId="shared")
        statuses.append(requests.post(url, json=body, headers=headers, timeout=30).status_code)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201] + [409] * 7
    assert len(locations(api, map_id, "&externalId=shared")) == 1


def test_the_database_refuses_a_second_location_with_an_external_id(app, api, map_id):
    """The unique index itself, without the service's lock in front of it."""
    location = make_location(api, map_id, externalId="A1")
    with app.app_context(), pytest.raises(IntegrityError), db.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO locations (id, map_id, name, lat, lng, description, address,"
                " properties, external_id, created_at, updated_at) SELECT :copy, map_id,"
                " name, lat, lng, description, address, properties, external_id,"
                " created_at, updated_at FROM locations WHERE id = :id"
            ),
            {"id": location["id"], "copy": "x" * 22},
        )


# --- the filter ----------------------------------------------------------------


def test_the_external_id_filter_matches_exactly_any_of_the_values(api, map_id):
    for value in ("A1", "a1", "B2", "C3"):
        make_location(api, map_id, name=value, externalId=value)
    make_location(api, map_id, name="none")
    assert [loc["name"] for loc in locations(api, map_id, "&externalId=A1")] == ["A1"]
    found = locations(api, map_id, "&externalId=C3&externalId=A1&externalId=nope")
    assert [loc["name"] for loc in found] == ["A1", "C3"]  # creation order
    assert locations(api, map_id, "&externalId=A") == []
    assert [loc["name"] for loc in locations(api, map_id, "&externalId=%20B2%20")] == ["B2"]


def test_the_external_id_filter_pages_and_counts_the_matches(api, map_id):
    items = [spot(name=f"s{n}", externalId=f"e{n}") for n in range(30)]
    api.created(f"/maps/{map_id}/locations/bulk", {"locations": items})
    query = "".join(f"&externalId=e{n}" for n in range(0, 30, 3))
    listed = data(api.get(f"/maps/{map_id}/locations?pageSize=4&page=2{query}"))
    assert listed["pagination"] == {"total": 10, "page": 2, "pageSize": 4, "totalPages": 3}
    assert [loc["name"] for loc in listed["locations"]] == ["s12", "s15", "s18", "s21"]


def test_the_external_id_filter_shows_the_locations_layers(api, map_id):
    layers = [make_layer(api, map_id, name=name)["id"] for name in ("a", "b")]
    make_location(api, map_id, externalId="A1", layerIds=[layers[1], layers[0]])
    make_location(api, map_id, externalId="B1", layerIds=[layers[1]])
    found = locations(api, map_id, "&externalId=A1&externalId=B1")
    assert [[layer["name"] for layer in loc["layers"]] for loc in found] == [["a", "b"], ["b"]]
    assert found == [loc for loc in locations(api, map_id)]


@pytest.mark.parametrize(
    "query", ["externalId=", "externalId=%20%20", "externalId=a&externalId=", "externalId=%00"]
)
def test_an_empty_external_id_filter_is_a_validation_error(api, map_id, query):
    assert set(details(api.get(f"/maps/{map_id}/locations?{query}"))) == {"externalId"}


def test_the_external_id_filter_takes_up_to_100_values_of_up_to_200_characters(api, map_id):
    make_location(api, map_id, externalId="x" * 200)
    hundred = "".join(f"&externalId={n}" for n in range(99)) + "&externalId=" + "x" * 200
    assert len(locations(api, map_id, hundred)) == 1
    response = api.get(f"/maps/{map_id}/locations?externalId=x&{hundred}")
    assert set(details(response)) == {"externalId"}
    response = api.get(f"/maps/{map_id}/locations?externalId=" + "x" * 201)
    assert set(details(response)) == {"externalId"}


def test_the_external_id_filter_is_served_from_the_index(app, api, map_id):
    """The planner reads the map's locations with a given externalId from the
    unique index on (map_id, external_id)."""
    for batch in range(3):
        items = [spot(externalId=f"{batch}-{n}") for n in range(100)]
        api.created(f"/maps/{map_id}/locations/bulk", {"locations": items})
    make_location(api, map_id, externalId="A1")
    query = "SELECT count(*) FROM locations WHERE map_id = :m AND external_id IN (:a, :b)"
    with app.app_context(), db.engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            explain = text("EXPLAIN QUERY PLAN " + query)
        else:
            # A table this small is read whole: ask which index the planner picks.
            connection.execute(text("ANALYZE locations"))
            connection.execute(text("SET enable_seqscan = off"))
            explain = text("EXPLAIN " + query)
        plan = connection.execute(explain, {"m": map_id, "a": "A1", "b": "B1"}).all()
    assert "uq_locations_map_id_external_id" in " ".join(str(row) for row in plan)


# --- layerIds on create, bulk and PUT ------------------------------------------


def test_create_with_layer_ids_puts_the_location_on_them(api, map_id):
    first, _second, third = (make_layer(api, map_id, name=n)["id"] for n in ("a", "b", "c"))
    created = make_location(api, map_id, layerIds=[third, first, third])
    assert [layer["id"] for layer in created["layers"]] == [first, third]
    assert data(api.get(f"/maps/{map_id}/locations/{created['id']}")) == created
    assert "layerIds" not in created


def test_create_with_unknown_layer_ids_names_them_and_creates_nothing(api, map_id):
    other_layer = make_layer(api, make_map(api)["id"])["id"]
    layer = make_layer(api, map_id)["id"]
    response = api.post(
        f"/maps/{map_id}/locations", json=spot(layerIds=[layer, other_layer, "nope"])
    )
    messages = details(response)["layerIds"]
    assert len(messages) == 2
    assert other_layer in messages[0] and "nope" in messages[1]
    assert locations(api, map_id) == []


@pytest.mark.parametrize("value", [None, "x", [1], {"a": "b"}])
def test_create_with_layer_ids_not_a_list_of_ids_is_refused(api, map_id, value):
    response = api.post(f"/maps/{map_id}/locations", json=spot(layerIds=value))
    assert set(details(response)) == {"layerIds"}


def test_layer_ids_take_100_ids_as_sent(api, map_id):
    layer = make_layer(api, map_id)["id"]
    assert len(make_location(api, map_id, layerIds=[layer] * 100)["layers"]) == 1
    response = api.post(f"/maps/{map_id}/locations", json=spot(layerIds=[layer] * 101))
    assert set(details(response)) == {"layerIds"}


def test_bulk_with_layer_ids_names_bad_items_by_index(api, map_id):
    first, second = (make_layer(api, map_id, name=n)["id"] for n in ("a", "b"))
    items = [spot(layerIds=[second, first]), spot(), spot(layerIds=[second])]
    created = api.created(f"/maps/{map_id}/locations/bulk", {"locations": items})["created"]
    assert [[layer["id"] for layer in loc["layers"]] for loc in created] == [
        [first, second],
        [],
        [second],
    ]
    assert created == locations(api, map_id)
    bad = [spot(layerIds=[first]), spot(layerIds=["unknown"]), spot(layerIds=None)]
    response = api.post(f"/maps/{map_id}/locations/bulk", json={"locations": bad})
    assert set(details(response)["locations"]) == {"1", "2"}
    assert len(locations(api, map_id)) == 3


def test_put_with_layer_ids_replaces_the_set(api, map_id):
    first, second, third = (make_layer(api, map_id, name=n)["id"] for n in ("a", "b", "c"))
    location = make_location(api, map_id, layerIds=[first, second])
    path = f"/maps/{map_id}/locations/{location['id']}"
    time.sleep(TICK)
    replaced = data(api.put(path, json={"layerIds": [third, second]}))
    assert [layer["id"] for layer in replaced["layers"]] == [second, third]
    assert replaced["updatedAt"] > location["updatedAt"]
    assert data(api.get(path)) == replaced
    time.sleep(TICK)
    assert data(api.put(path, json={"layerIds": [second, third, second]})) == replaced
    assert data(api.put(path, json={"name": "renamed"}))["layers"] == replaced["layers"]
    assert data(api.put(path, json={"layerIds": []}))["layers"] == []


def test_put_with_layer_ids_and_other_fields_moves_updated_at_once(api, map_id):
    layer = make_layer(api, map_id)["id"]
    location = make_location(api, map_id)
    time.sleep(TICK)
    path = f"/maps/{map_id}/locations/{location['id']}"
    updated = data(api.put(path, json={"name": "new", "layerIds": [layer], "tagIds": []}))
    assert updated["name"] == "new" and [layer_["id"] for layer_ in updated["layers"]] == [layer]
    assert updated["updatedAt"] > location["updatedAt"]
    assert data(api.get(path)) == updated


@pytest.mark.parametrize("value", [None, ["unknown"]])
def test_put_with_bad_layer_ids_changes_nothing(api, map_id, value):
    layer = make_layer(api, map_id)["id"]
    location = make_location(api, map_id, layerIds=[layer])
    path = f"/maps/{map_id}/locations/{location['id']}"
    response = api.put(path, json={"name": "changed", "layerIds": value})
    assert set(details(response)) == {"layerIds"}
    assert data(api.get(path)) == location
