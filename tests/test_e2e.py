"""End to end over real HTTP against waitress, with real threads racing each other."""

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

WORKERS = 16
TIMEOUT = 15


class Http:
    """A client of the live server speaking as one key."""

    def __init__(self, base: str, key: str):
        self.base = base + "/api/v1"
        self.headers = {"Authorization": f"Bearer {key}"}

    def call(self, method: str, path: str, body=None):
        return requests.request(
            method, self.base + path, json=body, headers=self.headers, timeout=TIMEOUT
        )

    def ok(self, method: str, path: str, body=None, status=200):
        response = self.call(method, path, body)
        assert response.status_code == status, (method, path, response.status_code, response.text)
        return response.json()["data"]

    def all(self, path: str, plural: str) -> list:
        listed = self.ok("GET", f"{path}?pageSize=100")
        assert listed["pagination"]["total"] <= 100, "the test expects one page"
        return listed[plural]


@pytest.fixture
def http(live_server, key):
    return Http(live_server, key)


def race(http, calls):
    """Send ``calls`` (method, path, body) from many threads at once.

    Returns (call, status, body) for each, in the order of ``calls``.
    """

    def one(call):
        method, path, body = call
        response = http.call(method, path, body)
        try:
            payload = response.json()
        except ValueError:
            payload = response.text
        return call, response.status_code, payload

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(one, calls))


def assert_no_server_errors(results):
    failures = [(call, status, body) for call, status, body in results if status >= 500]
    assert failures == [], failures[:5]


def code_of(body) -> str:
    assert isinstance(body, dict) and set(body) == {"error"}, body
    return body["error"]["code"]


def assert_layer_orders_are_dense(http, map_id) -> list:
    layers = http.all(f"/maps/{map_id}/layers", "layers")
    assert [layer["order"] for layer in layers] == list(range(len(layers)))
    assert len({layer["id"] for layer in layers}) == len(layers)
    return layers


# --- races the contract names -------------------------------------------------


def test_racing_creates_of_one_tag_name_make_exactly_one_tag(http):
    map_id = http.ok("POST", "/maps", {"title": "Race"}, 201)["id"]
    results = race(http, [("POST", f"/maps/{map_id}/tags", {"name": "coffee"})] * 20)
    assert_no_server_errors(results)
    statuses = Counter(status for _, status, _ in results)
    assert statuses == {201: 1, 409: 19}
    assert all(code_of(body) == "CONFLICT" for _, status, body in results if status == 409)
    (winner,) = [body["data"] for _, status, body in results if status == 201]
    tags = http.all(f"/maps/{map_id}/tags", "tags")
    assert [(tag["id"], tag["name"]) for tag in tags] == [(winner["id"], "coffee")]


def test_racing_renames_to_one_tag_name_let_exactly_one_win(http):
    map_id = http.ok("POST", "/maps", {"title": "Race"}, 201)["id"]
    tags = [http.ok("POST", f"/maps/{map_id}/tags", {"name": f"t{n}"}, 201)["id"] for n in range(12)]
    results = race(http, [("PUT", f"/maps/{map_id}/tags/{tag}", {"name": "same"}) for tag in tags])
    assert_no_server_errors(results)
    assert Counter(status for _, status, _ in results) == {200: 1, 409: 11}
    names = sorted(tag["name"] for tag in http.all(f"/maps/{map_id}/tags", "tags"))
    assert names.count("same") == 1 and len(names) == 12


def test_racing_key_creates_stop_at_exactly_ten_active_keys(http):
    results = race(http, [("POST", "/keys", {"name": f"k{n}", "scope": "READ_ONLY"}) for n in range(15)])
    assert_no_server_errors(results)
    assert Counter(status for _, status, _ in results) == {201: 9, 409: 6}
    assert all(code_of(body) == "CONFLICT" for _, status, body in results if status == 409)
    keys = http.all("/keys", "keys")
    assert len(keys) == 10 and all(key["status"] == "active" for key in keys)
    created = {body["data"]["id"] for _, status, body in results if status == 201}
    assert created < {key["id"] for key in keys}


# --- many writers on one map --------------------------------------------------


def test_mixed_concurrent_writes_keep_counts_and_layer_orders_exact(http):
    rng = random.Random(7)
    map_id = http.ok("POST", "/maps", {"title": "Busy"}, 201)["id"]
    base = f"/maps/{map_id}"
    seeds = [{"name": f"seed {n}", "lat": n / 10, "lng": n / 10} for n in range(20)]
    seeded = http.ok("POST", base + "/locations/bulk", {"locations": seeds}, 201)["created"]
    locations = [loc["id"] for loc in seeded]
    layers = [http.ok("POST", base + "/layers", {"name": f"L{n}"}, 201)["id"] for n in range(15)]
    kept_locations, doomed_locations = locations[:10], locations[10:]
    moved_layers, doomed_layers = layers[:5], layers[5:]

    calls = []
    calls += [("POST", base + "/locations", {"name": f"new {n}", "lat": 1, "lng": 2}) for n in range(50)]
    calls += [
        ("PUT", f"{base}/locations/{rng.choice(kept_locations)}", {"name": f"renamed {n}", "lat": -n / 5})
        for n in range(30)
    ]
    calls += [
        ("PUT", f"{base}/locations/{rng.choice(kept_locations)}/layers",
         {"layerIds": rng.sample(moved_layers, rng.randint(0, 3))})
        for _ in range(20)
    ]
    calls += [
        ("POST", base + "/layers", {"name": f"new {n}", **({"order": rng.randint(0, 40)} if n % 2 else {})})
        for n in range(30)
    ]
    calls += [
        ("PUT", f"{base}/layers/{rng.choice(moved_layers)}", {"order": rng.randint(0, 40)})
        for _ in range(30)
    ]
    # Every doomed location is deleted twice (one wins), and updated meanwhile.
    calls += [("DELETE", f"{base}/locations/{loc}", None) for loc in doomed_locations * 2]
    calls += [("PUT", f"{base}/locations/{loc}", {"address": "here"}) for loc in doomed_locations]
    calls += [("DELETE", f"{base}/layers/{layer}", None) for layer in doomed_layers]
    assert len(calls) == 200
    rng.shuffle(calls)

    results = race(http, calls)
    assert_no_server_errors(results)

    unexpected = []
    deletes = Counter()
    for (method, path, body), status, payload in results:
        if method == "POST":
            expected = {201}
        elif method == "DELETE" and "/locations/" in path:
            expected = {200, 404}
            deletes[(path, status)] += 1
        elif method == "PUT" and any(loc in path for loc in doomed_locations):
            expected = {200, 404}
        else:
            expected = {200}
        if status not in expected:
            unexpected.append((method, path, status, payload))
        elif status == 404:
            assert code_of(payload) == "NOT_FOUND"
    assert unexpected == [], unexpected[:5]
    for location in doomed_locations:
        assert deletes[(f"{base}/locations/{location}", 200)] == 1
        assert deletes[(f"{base}/locations/{location}", 404)] == 1

    final_layers = assert_layer_orders_are_dense(http, map_id)
    assert len(final_layers) == 15 + 30 - 10
    order_of = {layer["id"]: layer["order"] for layer in final_layers}
    assert set(moved_layers) <= set(order_of) and not set(doomed_layers) & set(order_of)

    final_locations = http.all(base + "/locations", "locations")
    assert len(final_locations) == 20 + 50 - 10
    assert {loc["id"] for loc in final_locations} >= set(kept_locations)
    assert not {loc["id"] for loc in final_locations} & set(doomed_locations)
    for location in final_locations:
        embedded = [(layer["id"], layer["order"]) for layer in location["layers"]]
        assert embedded == sorted(((i, order_of[i]) for i, _ in embedded), key=lambda pair: pair[1])


def test_concurrent_layer_moves_inserts_and_deletes_keep_orders_dense(http):
    rng = random.Random(11)
    map_id = http.ok("POST", "/maps", {"title": "Layers"}, 201)["id"]
    base = f"/maps/{map_id}/layers"
    layers = [http.ok("POST", base, {"name": f"L{n}"}, 201)["id"] for n in range(10)]
    moved, doomed = layers[:5], layers[5:]
    calls = [("PUT", f"{base}/{rng.choice(moved)}", {"order": rng.randint(0, 30)}) for _ in range(40)]
    calls += [("POST", base, {"name": f"at {n}", "order": rng.randint(0, 30)}) for n in range(20)]
    calls += [("POST", base, {"name": f"end {n}"}) for n in range(10)]
    calls += [("DELETE", f"{base}/{layer}", None) for layer in doomed]
    rng.shuffle(calls)

    results = race(http, calls)
    assert_no_server_errors(results)
    statuses = Counter((call[0], status) for call, status, _ in results)
    assert statuses == {("PUT", 200): 40, ("POST", 201): 30, ("DELETE", 200): 5}
    final = assert_layer_orders_are_dense(http, map_id)
    assert len(final) == 10 + 30 - 5
    for (method, _, request_body), _, body in results:
        if request_body and "order" in request_body:
            # Clamped to the end, never past what was asked.
            assert 0 <= body["data"]["order"] <= request_body["order"]


def test_concurrent_bulk_creates_are_all_or_nothing(http):
    map_id = http.ok("POST", "/maps", {"title": "Bulk"}, 201)["id"]
    bad_index = {3: 0, 5: 57, 8: 99, 9: 42}

    def batch(number):
        items = [{"name": f"b{number}-{i}", "lat": 1.0, "lng": 2.0} for i in range(100)]
        if number in bad_index:
            items[bad_index[number]]["lat"] = 91
        return ("POST", f"/maps/{map_id}/locations/bulk", {"locations": items})

    results = race(http, [batch(number) for number in range(12)])
    assert_no_server_errors(results)
    created = 0
    for number, (_, status, body) in enumerate(results):
        if number in bad_index:
            assert status == 400, body
            assert code_of(body) == "VALIDATION_ERROR"
            assert list(body["error"]["details"]["locations"]) == [str(bad_index[number])]
        else:
            assert status == 201, body
            assert body["data"]["count"] == 100
            assert [loc["name"] for loc in body["data"]["created"]] == [f"b{number}-{i}" for i in range(100)]
            created += 1
    assert created == 8
    listed = http.ok("GET", f"/maps/{map_id}/locations?pageSize=100")
    assert listed["pagination"]["total"] == 100 * created


def test_bulk_creates_racing_a_tag_delete_are_all_or_nothing(http):
    map_id = http.ok("POST", "/maps", {"title": "Bulk"}, 201)["id"]
    tag = http.ok("POST", f"/maps/{map_id}/tags", {"name": "doomed"}, 201)["id"]
    items = [{"name": f"s{i}", "lat": 0, "lng": 0, "tagIds": [tag]} for i in range(100)]
    calls = [("POST", f"/maps/{map_id}/locations/bulk", {"locations": items})] * 10
    calls.insert(4, ("DELETE", f"/maps/{map_id}/tags/{tag}", None))

    results = race(http, calls)
    assert_no_server_errors(results)
    created = 0
    for (method, _, _), status, body in results:
        if method == "DELETE":
            assert status == 200, body
        elif status == 201:
            created += 1
            assert body["data"]["count"] == 100
        else:
            assert status == 400, body
            assert code_of(body) == "VALIDATION_ERROR"
            assert set(body["error"]["details"]["locations"]) == {str(i) for i in range(100)}
    listed = http.ok("GET", f"/maps/{map_id}/locations?pageSize=100")
    assert listed["pagination"]["total"] == 100 * created
    assert all(loc["tagIds"] == [] for loc in listed["locations"])
    assert http.all(f"/maps/{map_id}/tags", "tags") == []


# --- the README's walk-through ------------------------------------------------


def test_readme_walk_through_over_http(live_server, key):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    api = live_server + "/api/v1"

    health = requests.get(live_server + "/healthz", timeout=TIMEOUT)
    assert health.status_code == 200 and health.json() == {"data": {"status": "ok"}}

    made = session.post(
        api + "/maps",
        json={"title": "Coffee in Paris", "city": "Paris", "country": "France"},
        headers={"X-Request-Id": "walk-1"},
        timeout=TIMEOUT,
    )
    assert made.status_code == 201, made.text
    assert made.headers["Content-Type"].startswith("application/json")
    assert made.headers["X-Request-Id"] == "walk-1"
    assert made.headers["Cache-Control"] == "no-store"
    assert made.headers["X-Content-Type-Options"] == "nosniff"
    assert "X-RateLimit-Remaining" in made.headers and "Retry-After" not in made.headers
    the_map = made.json()["data"]
    assert the_map["slug"] == "coffee-in-paris" and the_map["city"] == "Paris"
    base = f"{api}/maps/{the_map['id']}"

    favourites = session.post(base + "/layers", json={"name": "Favourites"}, timeout=TIMEOUT)
    terraces = session.post(base + "/layers", json={"name": "Terraces", "color": "#ff0000"}, timeout=TIMEOUT)
    assert favourites.status_code == terraces.status_code == 201
    favourites, terraces = favourites.json()["data"], terraces.json()["data"]
    assert (favourites["order"], terraces["order"]) == (0, 1)
    assert terraces["color"] == "#FF0000"

    bulk = session.post(
        base + "/locations/bulk",
        json={"locations": [
            {"name": "Café de Flore", "lat": 48.8542, "lng": 2.3326},
            {"name": "Les Deux Magots", "lat": 48.8540, "lng": 2.3333},
        ]},
        timeout=TIMEOUT,
    )
    assert bulk.status_code == 201, bulk.text
    assert bulk.json()["data"]["count"] == 2
    flore, magots = bulk.json()["data"]["created"]
    assert flore["layers"] == [] and magots["name"] == "Les Deux Magots"

    on_both = session.put(
        f"{base}/locations/{flore['id']}/layers",
        json={"layerIds": [terraces["id"], favourites["id"]]},
        timeout=TIMEOUT,
    )
    on_one = session.put(
        f"{base}/locations/{magots['id']}/layers", json={"layerIds": [favourites["id"]]}, timeout=TIMEOUT
    )
    assert on_both.status_code == on_one.status_code == 200
    assert [layer["id"] for layer in on_both.json()["data"]["layers"]] == [favourites["id"], terraces["id"]]

    listed = session.get(base + "/locations?pageSize=100", timeout=TIMEOUT)
    assert listed.status_code == 200
    body = listed.json()["data"]
    assert body["pagination"] == {"total": 2, "page": 1, "pageSize": 100, "totalPages": 1}
    assert [loc["name"] for loc in body["locations"]] == ["Café de Flore", "Les Deux Magots"]
    assert [[layer["name"] for layer in loc["layers"]] for loc in body["locations"]] == [
        ["Favourites", "Terraces"],
        ["Favourites"],
    ]

    fetched = session.get(f"{base}/locations/{magots['id']}", timeout=TIMEOUT)
    assert fetched.status_code == 200
    assert fetched.json()["data"]["lat"] == 48.8540
    assert fetched.json()["data"]["layers"][0]["id"] == favourites["id"]
    session.close()
