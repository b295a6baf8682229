"""GET /maps/:mapId/locations/clusters: a viewport's locations grouped by
64-pixel cells, exact, from the cell counts or from the filtered locations."""

import random

import pytest

from mapapi.storage.cells import cell_of

from .factories import error_code, make_category, make_layer, make_location, make_map, make_tag


def clusters(api, map_id, query: str) -> dict:
    response = api.get(f"/maps/{map_id}/locations/clusters?{query}")
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert set(body) == {"data"} and set(body["data"]) == {"clusters", "locations", "total"}
    return body["data"]


def inside(location, bbox) -> bool:
    west, south, east, north = bbox
    in_lng = west <= location["lng"] <= east if west <= east else (
        location["lng"] >= west or location["lng"] <= east
    )
    return in_lng and south <= location["lat"] <= north


def by_hand(locations, bbox, zoom) -> tuple[list, list, int]:
    """The answer computed from the locations, cell by cell: (clusters as
    (count, bbox), sorted; lone ids, sorted; total)."""
    cells = {}
    for location in locations:
        if inside(location, bbox):
            cells.setdefault(cell_of(location["lat"], location["lng"], zoom), []).append(location)
    grouped = sorted(
        (len(found), [min(p["lng"] for p in found), min(p["lat"] for p in found),
                      max(p["lng"] for p in found), max(p["lat"] for p in found)],
         sum(p["lat"] for p in found) / len(found), sum(p["lng"] for p in found) / len(found))
        for found in cells.values() if len(found) > 1
    )  # fmt: skip
    lone = sorted(found[0]["id"] for found in cells.values() if len(found) == 1)
    return grouped, lone, sum(len(found) for found in cells.values())


def assert_answer(answer, expected) -> None:
    grouped, lone, total = expected
    got = sorted((c["count"], c["bbox"], c["lat"], c["lng"]) for c in answer["clusters"])
    assert [(count, box) for count, box, _lat, _lng in got] == [(c, b) for c, b, _la, _ln in grouped]
    for (_c, _b, lat, lng), (_c2, _b2, lat2, lng2) in zip(got, grouped, strict=True):
        assert lat == pytest.approx(lat2, abs=1e-9) and lng == pytest.approx(lng2, abs=1e-9)
    assert sorted(location["id"] for location in answer["locations"]) == lone
    assert answer["total"] == total


@pytest.fixture
def city_map(api):
    """A map of 600 locations: three dense cities, noise, and the antimeridian."""
    rng = random.Random(42)
    map_id = make_map(api)["id"]
    spots = []
    for center_lat, center_lng, spread, count in (
        (48.85, 2.35, 0.05, 250), (51.5, -0.12, 0.3, 150), (-17.7, 178.9, 2.0, 100),
    ):
        spots += [
            (rng.gauss(center_lat, spread), rng.gauss(center_lng, spread)) for _ in range(count)
        ]
    spots += [(rng.uniform(-85, 85), rng.uniform(-180, 180)) for _ in range(90)]
    spots += [(0.0, 180.0), (0.0, -180.0), (89.9, 10.0), (-90.0, 0.0), (48.85, 2.35), (48.85, 2.35)]
    spots += [(lat, min(180.0, max(-180.0, lng))) for lat, lng in []]
    created = []
    for start in range(0, len(spots), 100):
        items = [
            {"name": f"spot {start + i}", "lat": max(-90.0, min(90.0, lat)),
             "lng": (lng + 180) % 360 - 180 if abs(lng) != 180 else lng, "properties": {"n": start + i}}
            for i, (lat, lng) in enumerate(spots[start : start + 100])
        ]  # fmt: skip
        response = api.post(f"/maps/{map_id}/locations/bulk", json={"locations": items})
        assert response.status_code == 201
        created += response.get_json()["data"]["created"]
    return map_id, created


VIEWPORTS = [
    ((-180, -90, 180, 90), 0), ((-180, -90, 180, 90), 1), ((-180, -85, 180, 85), 2),
    ((-10, 40, 10, 55), 5), ((-10, 40, 10, 55), 6), ((2.2, 48.75, 2.5, 48.95), 11),
    ((2.2, 48.75, 2.5, 48.95), 12), ((2.3, 48.8, 2.4, 48.9), 13), ((2.33, 48.84, 2.37, 48.86), 16),
    ((2.34, 48.845, 2.36, 48.855), 17), ((2.349, 48.849, 2.351, 48.851), 20),
    ((170, -30, -170, 0), 4), ((178, -20, -179, -15), 7), ((-0.5, 51.3, 0.3, 51.7), 9),
]  # fmt: skip


@pytest.mark.parametrize("bbox, zoom", VIEWPORTS)
def test_clusters_are_exact_at_every_zoom_and_box(api, city_map, bbox, zoom):
    map_id, locations = city_map
    answer = clusters(api, map_id, f"bbox={','.join(map(str, bbox))}&zoom={zoom}")
    assert_answer(answer, by_hand(locations, bbox, zoom))


def test_lone_locations_are_given_as_the_list_gives_them(api):
    map_id = make_map(api)["id"]
    layer = make_layer(api, map_id)["id"]
    tag = make_tag(api, map_id)["id"]
    alone = make_location(
        api, map_id, lat=10, lng=10, layerIds=[layer], tagIds=[tag], properties={"a": {"b": [1]}}
    )
    make_location(api, map_id, lat=-10, lng=-10)
    make_location(api, map_id, lat=-10.001, lng=-10.001)
    answer = clusters(api, map_id, "bbox=-20,-20,20,20&zoom=3")
    listed = api.get(f"/maps/{map_id}/locations/{alone['id']}").get_json()["data"]
    assert answer["locations"] == [listed]
    assert answer["clusters"] == [
        {"lat": pytest.approx(-10.0005), "lng": pytest.approx(-10.0005), "count": 2,
         "bbox": [-10.001, -10.001, -10.0, -10.0]}
    ]  # fmt: skip
    assert answer["total"] == 3


def test_a_write_is_seen_by_the_next_answer(api):
    map_id = make_map(api)["id"]
    first = make_location(api, map_id, lat=1, lng=1)
    query = "bbox=0,0,2,2&zoom=2"
    assert clusters(api, map_id, query)["locations"][0]["id"] == first["id"]
    second = make_location(api, map_id, lat=1.1, lng=1.1)
    assert clusters(api, map_id, query)["clusters"][0]["count"] == 2
    api.put(f"/maps/{map_id}/locations/{second['id']}", json={"lat": 40})
    assert clusters(api, map_id, query)["total"] == 1
    api.delete(f"/maps/{map_id}/locations/{first['id']}")
    assert clusters(api, map_id, query) == {"clusters": [], "locations": [], "total": 0}


def test_every_filter_of_the_list_applies(api, city_map):
    map_id, locations = city_map
    layer, other_layer = make_layer(api, map_id)["id"], make_layer(api, map_id)["id"]
    tag = make_tag(api, map_id)["id"]
    category = make_category(api, map_id)["id"]
    on_layer = locations[:40]
    for location in on_layer:
        api.put(f"/maps/{map_id}/locations/{location['id']}/layers", json={"layerIds": [layer]})
    api.put(f"/maps/{map_id}/locations/{locations[300]['id']}/layers", json={"layerIds": [other_layer]})
    for location in locations[20:60]:
        api.put(f"/maps/{map_id}/locations/{location['id']}", json={"tagIds": [tag], "categoryId": category})
    box, zoom = (-180, -90, 180, 90), 2
    where = f"bbox={','.join(map(str, box))}&zoom={zoom}"
    cases = {
        f"layerId={layer}": on_layer,
        f"layerId={layer}&layerId={other_layer}": on_layer + [locations[300]],
        "layerId=none": [x for i, x in enumerate(locations) if i >= 40 and i != 300],
        f"layerId=none&layerId={other_layer}": [x for i, x in enumerate(locations) if i >= 40],
        f"tagId={tag}": locations[20:60],
        f"categoryId={category}&layerId={layer}": locations[20:40],
        "q=spot 12": [x for x in locations if "spot 12" in x["name"]],
        f"externalId=nothing": [],
        "updatedSince=2000-01-01T00:00:00Z": locations,
        "updatedSince=2999-01-01T00:00:00Z": [],
        "layerId=AAAAAAAAAAAAAAAAAAAAAA": [],
    }
    for filters, matching in cases.items():
        answer = clusters(api, map_id, f"{where}&{filters}")
        assert_answer(answer, by_hand(matching, box, zoom))


def test_the_same_filters_on_the_list_and_the_export(api):
    map_id = make_map(api)["id"]
    layer, other = make_layer(api, map_id)["id"], make_layer(api, map_id)["id"]
    a = make_location(api, map_id, name="a", layerIds=[layer])
    b = make_location(api, map_id, name="b", layerIds=[other])
    c = make_location(api, map_id, name="c")

    def names(path):
        response = api.get(path)
        assert response.status_code == 200
        body = response.get_json()
        if "features" in body:
            return [feature["properties"]["name"] for feature in body["features"]]
        return [location["name"] for location in body["data"]["locations"]]

    for path in (f"/maps/{map_id}/locations", f"/maps/{map_id}/locations.geojson"):
        assert names(f"{path}?layerId={layer}&layerId={other}") == ["a", "b"]
        assert names(f"{path}?layerId=none") == ["c"]
        assert names(f"{path}?layerId=none&layerId={layer}") == ["a", "c"]
    assert {a["id"], b["id"], c["id"]}
    eleven = "&".join([f"layerId={layer}"] * 11)
    response = api.get(f"/maps/{map_id}/locations?{eleven}")
    assert error_code(response) == "VALIDATION_ERROR"
    assert response.get_json()["error"]["details"] == {"layerId": ["May be given at most 10 times."]}


@pytest.mark.parametrize(
    "query, field",
    [
        ("zoom=3", "bbox"),
        ("bbox=0,0,1,1", "zoom"),
        ("bbox=0,0,1,1&zoom=23", "zoom"),
        ("bbox=0,0,1,1&zoom=-1", "zoom"),
        ("bbox=0,0,1,1&zoom=1.5", "zoom"),
        ("bbox=0,0,1,1&zoom=", "zoom"),
        ("bbox=0,0,1&zoom=3", "bbox"),
        ("bbox=0,10,1,0&zoom=3", "bbox"),
        ("bbox=0,0,181,1&zoom=3", "bbox"),
        ("bbox=nan,0,1,1&zoom=3", "bbox"),
        ("bbox=-180,-90,180,90&zoom=4", "bbox"),
        ("bbox=-10,-10,10,10&zoom=10", "bbox"),
        ("bbox=0,0,1,1&zoom=3&layerId=", "layerId"),
        ("bbox=0,0,1,1&zoom=3&q=", "q"),
        ("bbox=0,0,1,1&zoom=3&updatedSince=yesterday", "updatedSince"),
    ],
)
def test_bad_queries_are_validation_errors_naming_the_parameter(api, query, field):
    map_id = make_map(api)["id"]
    response = api.get(f"/maps/{map_id}/locations/clusters?{query}")
    assert response.status_code == 400
    assert error_code(response) == "VALIDATION_ERROR"
    assert field in response.get_json()["error"]["details"]


def test_a_1920_by_1080_viewport_is_never_too_large(api):
    map_id = make_map(api)["id"]
    for zoom in range(0, 23):
        # A 1920 x 1080 viewport around Paris at this zoom.
        degrees_per_pixel = 360 / (256 * 2**zoom)
        half_width = min(180.0, 960 * degrees_per_pixel)
        half_height = min(85.0, 540 * degrees_per_pixel * 0.66)
        box = (max(-180, 2.35 - half_width), max(-85, 48.85 - half_height),
               min(180, 2.35 + half_width), min(85, 48.85 + half_height))  # fmt: skip
        clusters(api, map_id, f"bbox={','.join(f'{v:.10f}' for v in box)}&zoom={zoom}")


def test_clusters_of_another_accounts_map_are_not_found(api, other_api):
    map_id = make_map(api)["id"]
    make_location(api, map_id)
    response = other_api.get(f"/maps/{map_id}/locations/clusters?bbox=0,0,5,5&zoom=2")
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
    response = api.get("/maps/nope/locations/clusters?bbox=0,0,5,5&zoom=2")
    assert error_code(response) == "NOT_FOUND"
