"""SQL statements per request: lists and bulk creates cost the same for 1 item or 100."""

from datetime import datetime

from . import backends
from .factories import create_key, make_category, make_layer, make_map, make_tag

#: What a fixed-size request may cost: key lookup, transaction, a few queries.
SMALL = 12


def count_statements(api, statements, method, path, expected_status=200, **kwargs):
    """Statements the app sends for one request, after a warm-up request.

    The warm-up absorbs the key's ``lastUsedAt`` write (at most once a
    minute) so that only the request's own statements are counted.
    """
    assert api.get("/keys").status_code == 200
    statements.reset()
    response = api.request(method, path, **kwargs)
    assert response.status_code == expected_status, response.get_json()
    return statements.count, response.get_json()["data"]


def located_map(api, how_many: int) -> str:
    """A map with ``how_many`` locations, each with 3 tags, 2 layers and a category."""
    map_id = make_map(api)["id"]
    tags = [make_tag(api, map_id, name=f"t{i}")["id"] for i in range(3)]
    layers = [make_layer(api, map_id, name=f"l{i}")["id"] for i in range(2)]
    category = make_category(api, map_id)["id"]
    items = [
        {"name": f"spot {i}", "lat": 1.0, "lng": 2.0, "tagIds": tags, "categoryId": category}
        for i in range(how_many)
    ]
    created = api.created(f"/maps/{map_id}/locations/bulk", {"locations": items})["created"]
    for location in created:
        response = api.put(f"/maps/{map_id}/locations/{location['id']}/layers", json={"layerIds": layers})
        assert response.status_code == 200, response.get_json()
    return map_id


def test_location_list_costs_the_same_for_one_or_a_hundred_locations(api, statements):
    one, hundred = located_map(api, 1), located_map(api, 100)
    small, page_one = count_statements(api, statements, "GET", f"/maps/{one}/locations?pageSize=100")
    large, page_hundred = count_statements(
        api, statements, "GET", f"/maps/{hundred}/locations?pageSize=100"
    )
    print(f"GET locations: {small} statements for 1, {large} for 100")
    assert len(page_one["locations"]) == 1 and len(page_hundred["locations"]) == 100
    assert all(len(loc["tagIds"]) == 3 and len(loc["layers"]) == 2 for loc in page_hundred["locations"])
    assert large == small
    assert small <= SMALL


def test_map_list_costs_the_same_for_one_or_a_hundred_maps(api, statements):
    make_map(api)
    small, listed = count_statements(api, statements, "GET", "/maps?pageSize=100")
    assert listed["pagination"]["total"] == 1
    for number in range(99):
        make_map(api, title=f"Map {number}")
    large, listed = count_statements(api, statements, "GET", "/maps?pageSize=100")
    print(f"GET maps: {small} statements for 1, {large} for 100")
    assert len(listed["maps"]) == 100
    assert large == small


def _child_list_cost(api, statements, plural, make, fields):
    one, hundred = make_map(api)["id"], make_map(api)["id"]
    make(api, one, **fields(0))
    for number in range(100):
        make(api, hundred, **fields(number))
    small, listed_one = count_statements(api, statements, "GET", f"/maps/{one}/{plural}?pageSize=100")
    large, listed = count_statements(api, statements, "GET", f"/maps/{hundred}/{plural}?pageSize=100")
    print(f"GET {plural}: {small} statements for 1, {large} for 100")
    assert len(listed_one[plural]) == 1 and len(listed[plural]) == 100
    return small, large


def test_tag_list_costs_the_same_for_one_or_a_hundred_tags(api, statements):
    small, large = _child_list_cost(api, statements, "tags", make_tag, lambda n: {"name": f"tag {n}"})
    assert large == small


def test_layer_list_costs_the_same_for_one_or_a_hundred_layers(api, statements):
    small, large = _child_list_cost(api, statements, "layers", make_layer, lambda n: {"name": f"l{n}"})
    assert large == small


def test_category_list_costs_the_same_for_one_or_a_hundred_categories(api, statements):
    small, large = _child_list_cost(
        api, statements, "categories", make_category, lambda n: {"name": f"c{n}"}
    )
    assert large == small


def test_key_list_costs_the_same_for_one_key_or_many(app, api, statements):
    small, listed = count_statements(api, statements, "GET", "/keys?pageSize=100")
    assert len(listed["keys"]) == 1
    # Expired keys first: a key cannot be issued while ten are active.
    for number in range(20):
        create_key(app, "owner@example.com", expires_at=datetime(2001, 1, 1), name=f"old {number}")
    for number in range(9):
        create_key(app, "owner@example.com", name=f"active {number}")
    large, listed = count_statements(api, statements, "GET", "/keys?pageSize=100")
    print(f"GET keys: {small} statements for 1, {large} for 30")
    assert len(listed["keys"]) == 30
    assert large == small


def _bulk_cost(api, statements, how_many):
    map_id = make_map(api)["id"]
    tags = [make_tag(api, map_id, name=f"t{i}")["id"] for i in range(3)]
    category = make_category(api, map_id)["id"]
    items = [
        {"name": f"spot {i}", "lat": 1.0, "lng": 2.0, "tagIds": tags, "categoryId": category}
        for i in range(how_many)
    ]
    cost, created = count_statements(
        api, statements, "POST", f"/maps/{map_id}/locations/bulk", 201, json={"locations": items}
    )
    assert created["count"] == how_many
    assert [loc["name"] for loc in created["created"]] == [item["name"] for item in items]
    assert all(loc["tagIds"] == tags for loc in created["created"])
    listed = api.get(f"/maps/{map_id}/locations?pageSize=100").get_json()["data"]
    assert listed["pagination"]["total"] == how_many
    return cost


def test_bulk_create_of_a_hundred_costs_about_what_one_costs(api, statements):
    small = _bulk_cost(api, statements, 1)
    large = _bulk_cost(api, statements, 100)
    print(f"POST bulk: {small} statements for 1, {large} for 100")
    assert large <= SMALL
    assert large - small <= 2


def test_get_location_costs_a_small_fixed_number_of_statements(api, statements):
    map_id = located_map(api, 1)
    (location,) = api.get(f"/maps/{map_id}/locations").get_json()["data"]["locations"]
    bare = make_map(api)["id"]
    plain = api.created(f"/maps/{bare}/locations", {"name": "plain", "lat": 0, "lng": 0})

    rich_path = f"/maps/{map_id}/locations/{location['id']}"
    rich_cost, fetched = count_statements(api, statements, "GET", rich_path)
    plain_cost, _ = count_statements(api, statements, "GET", f"/maps/{bare}/locations/{plain['id']}")
    print(f"GET location: {rich_cost} statements with tags and layers, {plain_cost} without")
    assert len(fetched["tagIds"]) == 3 and len(fetched["layers"]) == 2
    assert rich_cost == plain_cost
    assert rich_cost <= 8


#: The statements of the benchmark's scenarios on SQLite (benchmarks/run.py
#: prints the same counts, and lists them with --show-sql).
BENCHMARKED = {
    "GET /maps/:id": 1,  # key and map in one, on the driver (storage.driver)
    # key, then BEGIN, map, count, the page as one JSON value the database
    # writes (each location's tag ids and layers in it)
    "GET locations": 5,
    # key (checked without the write lock), then BEGIN IMMEDIATE, map
    # (locked), categories and tags (one), 2 INSERTs, the INSERT of the events
    "POST location": 7,
    "POST bulk": 7,  # the same for 100 locations
    # key, BEGIN IMMEDIATE, map (locked), the location's layer ids, the
    # layers asked for, a DELETE and an INSERT of memberships, the UPDATE of
    # updatedAt, the location read back (2), the INSERT of its event
    "PUT location layers": 11,
    "bad key": 1,  # key
    "no key": 0,  # refused before any SQL: no key, so nothing to look up
}
#: SQLite's BEGINs in each scenario: one per transaction; the key's own
#: statement runs outside any (storage.driver).
SQLITE_BEGINS = {"GET /maps/:id": 0, "bad key": 0, "no key": 0}


def test_the_benchmarked_requests_cost_what_the_benchmark_reports(api, statements):
    map_id = located_map(api, 3)
    tags = [tag["id"] for tag in api.get(f"/maps/{map_id}/tags").get_json()["data"]["tags"]]
    category = api.get(f"/maps/{map_id}/categories").get_json()["data"]["categories"][0]["id"]
    item = {"name": "n", "lat": 1, "lng": 2, "tagIds": tags[:2], "categoryId": category}
    costs = {
        "GET /maps/:id": count_statements(api, statements, "GET", f"/maps/{map_id}")[0],
        "GET locations": count_statements(
            api, statements, "GET", f"/maps/{map_id}/locations?pageSize=100"
        )[0],
        "POST location": count_statements(
            api, statements, "POST", f"/maps/{map_id}/locations", 201, json=item
        )[0],
        "POST bulk": count_statements(
            api, statements, "POST", f"/maps/{map_id}/locations/bulk", 201,
            json={"locations": [item] * 100},
        )[0],
    }  # fmt: skip
    location = api.get(f"/maps/{map_id}/locations").get_json()["data"]["locations"][0]
    kept, _dropped = (layer["id"] for layer in location["layers"])
    added = make_layer(api, map_id, name="added")["id"]
    costs["PUT location layers"] = count_statements(
        api, statements, "PUT", f"/maps/{map_id}/locations/{location['id']}/layers",
        json={"layerIds": [kept, added]},
    )[0]  # fmt: skip
    statements.reset()
    refused = api.get(f"/maps/{map_id}", headers={"Authorization": "Bearer mk_live_" + "x" * 43})
    assert refused.status_code == 401
    costs["bad key"] = statements.count
    statements.reset()
    missing = api.get(f"/maps/{map_id}", headers={"Authorization": ""})
    assert missing.get_json()["error"]["code"] == "MISSING_API_KEY"
    costs["no key"] = statements.count
    # PostgreSQL begins implicitly: no BEGIN at all.
    expected = BENCHMARKED
    if backends.on_postgres():
        expected = {name: max(0, n - SQLITE_BEGINS.get(name, 1)) for name, n in expected.items()}
    assert costs == expected


def _upsert_costs(api, statements, how_many) -> dict[str, int]:
    """Statements of an upsert of ``how_many`` items that all create, then
    all change (fields, tags and layers), then all change nothing."""
    map_id = make_map(api)["id"]
    tags = [make_tag(api, map_id, name=f"t{i}")["id"] for i in range(3)]
    layers = [make_layer(api, map_id, name=f"l{i}")["id"] for i in range(2)]
    category = make_category(api, map_id)["id"]

    def items(name, tag_ids, layer_ids):
        return [
            {"externalId": f"e{i}", "name": f"{name} {i}", "lat": 1.0, "lng": 2.0,
             "tagIds": tag_ids, "layerIds": layer_ids, "categoryId": category}
            for i in range(how_many)
        ]  # fmt: skip

    path = f"/maps/{map_id}/locations/upsert"
    costs = {}
    for scenario, body, counts in (
        ("new", items("spot", tags, layers[:1]), (how_many, 0, 0)),
        ("changed", items("moved", tags[::-1], layers[1:]), (0, how_many, 0)),
        ("unchanged", items("moved", tags[::-1], layers[1:]), (0, 0, how_many)),
    ):
        costs[scenario], answer = count_statements(api, statements, "POST", path, json={"locations": body})
        assert (answer["created"], answer["updated"], answer["unchanged"]) == counts
        assert [loc["name"] for loc in answer["locations"]] == [item["name"] for item in body]
        assert all(loc["tagIds"] == body[0]["tagIds"] for loc in answer["locations"])
    return costs


def test_upsert_of_a_hundred_costs_what_one_costs(api, statements):
    one, hundred = _upsert_costs(api, statements, 1), _upsert_costs(api, statements, 100)
    print(f"POST upsert: {one} statements for 1, {hundred} for 100")
    assert hundred == one
    # BEGIN, key, (SQLite: BEGIN IMMEDIATE), map, categories, tags, layers,
    # current locations, the writes (at most 5 kinds), the locations read
    # back (2), the events (one INSERT for all).
    assert max(hundred.values()) <= 17
    assert hundred["unchanged"] <= 10  # nothing written (SQLite: a second BEGIN, the write's)


def test_bulk_delete_of_a_hundred_costs_what_one_costs(api, statements):
    costs = {}
    for how_many in (1, 100):
        map_id = make_map(api)["id"]
        items = [{"name": f"s{i}", "lat": 0, "lng": 0, "externalId": f"e{i}"} for i in range(how_many)]
        api.created(f"/maps/{map_id}/locations/bulk", {"locations": items})
        body = {"externalIds": [item["externalId"] for item in items]}
        path = f"/maps/{map_id}/locations/bulk-delete"
        costs[how_many], answer = count_statements(api, statements, "POST", path, json=body)
        assert answer["count"] == how_many
    print(f"POST bulk-delete: {costs[1]} statements for 1, {costs[100]} for 100")
    # BEGIN, key, (SQLite: BEGIN IMMEDIATE), map, the ids, the DELETE, the events
    assert costs[100] == costs[1] <= 7
