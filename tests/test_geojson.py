"""GeoJSON out (a streamed FeatureCollection) and in (1..100 Features, all or nothing)."""

import json

import geojson
import pytest
import requests
from shapely.geometry import Point, shape

from mapapi.services import geojson as geojson_service

from .factories import error_code, make_category, make_layer, make_map, make_tag
from .helpers import data_of, validation_details

GEO = "application/geo+json"


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def export(api, map_id, query: str = "") -> dict:
    """The export of ``map_id``, checked as a valid RFC 7946 FeatureCollection."""
    response = api.get(f"/maps/{map_id}/locations.geojson?{query}")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == GEO
    assert response.headers["Cache-Control"] == "no-store"
    text = response.get_data(as_text=True)
    collection = geojson.loads(text)
    assert isinstance(collection, geojson.FeatureCollection)
    assert collection.is_valid, collection.errors()
    for feature in collection["features"]:
        assert shape(feature["geometry"]).equals(Point(feature["geometry"]["coordinates"]))
    return json.loads(text)


def import_features(api, map_id, features, query: str = "", content_type: str = GEO):
    body = json.dumps({"type": "FeatureCollection", "features": features})
    return api.post(
        f"/maps/{map_id}/locations/import?{query}",
        data=body,
        headers={"Content-Type": content_type},
    )


def point_feature(name="Spot", lng=2.35, lat=48.85, **properties) -> dict:
    return {
        "type": "Feature",
        "geometry": {"type": "Point", "coordinates": [lng, lat]},
        "properties": {"name": name, **properties},
    }


def bulk(api, map_id, *items) -> list[dict]:
    body = {"locations": [{"lat": 0, "lng": 0, **item} for item in items]}
    return api.created(f"/maps/{map_id}/locations/bulk", body)["created"]


# --- export ------------------------------------------------------------------------


def test_export_writes_each_location_as_a_point_feature(api, map_id):
    category = make_category(api, map_id)["id"]
    tags = [make_tag(api, map_id, name=name)["id"] for name in ("b", "a")]
    first, second = (make_layer(api, map_id, name=f"l{n}")["id"] for n in range(2))
    (location,) = bulk(
        api,
        map_id,
        {
            "name": "Café",
            "lat": 48.8566,
            "lng": 2.3522,
            "description": "d",
            "address": "a",
            "categoryId": category,
            "tagIds": tags,
            "properties": {"external": {"id": 7, "big": 2**70}, "list": [1.5, None]},
        },
    )
    path = f"/maps/{map_id}/locations/{location['id']}/layers"
    assert api.put(path, json={"layerIds": [second, first]}).status_code == 200
    stored = data_of(api.get(f"/maps/{map_id}/locations/{location['id']}"))
    collection = export(api, map_id)
    assert collection == {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "id": location["id"],
                "geometry": {"type": "Point", "coordinates": [2.3522, 48.8566]},
                "properties": {
                    "name": "Café",
                    "description": "d",
                    "address": "a",
                    "categoryId": category,
                    "tagIds": tags,
                    "layerIds": [first, second],
                    "properties": {"external": {"id": 7, "big": 2**70}, "list": [1.5, None]},
                    "externalId": None,
                    "createdAt": stored["createdAt"],
                    "updatedAt": stored["updatedAt"],
                },
            }
        ],
    }


def test_export_of_an_empty_map_is_an_empty_collection(api, map_id):
    assert export(api, map_id) == {"type": "FeatureCollection", "features": []}


@pytest.mark.parametrize(
    "sort", ["createdAt", "-createdAt", "updatedAt", "-updatedAt", "name", "-name"]
)
def test_export_reads_in_chunks_in_the_order_and_with_the_filters_of_the_list(
    api, map_id, monkeypatch, sort
):
    # Small chunks, and names with ties, so that pages break inside runs of equal keys.
    monkeypatch.setattr(geojson_service, "EXPORT_CHUNK", 3)
    bulk(
        api, map_id, *({"name": "ABC"[n % 3] + ("x" if n % 5 else ""), "lat": n} for n in range(20))
    )
    listed = data_of(api.get(f"/maps/{map_id}/locations?pageSize=100&sort={sort}"))["locations"]
    exported = export(api, map_id, f"sort={sort}")["features"]
    assert [feature["id"] for feature in exported] == [location["id"] for location in listed]
    listed = data_of(api.get(f"/maps/{map_id}/locations?sort={sort}&bbox=0,2,1,13&q=b"))
    exported = export(api, map_id, f"sort={sort}&bbox=0,2,1,13&q=b")["features"]
    assert [feature["id"] for feature in exported] == [
        location["id"] for location in listed["locations"]
    ]
    assert len(exported) == listed["pagination"]["total"] > 0


def test_export_sends_its_first_bytes_before_reading_the_map_to_the_end(
    api, map_id, monkeypatch, statements
):
    monkeypatch.setattr(geojson_service, "EXPORT_CHUNK", 10)
    bulk(api, map_id, *({"name": f"n{n}"} for n in range(100)))
    assert api.get("/keys").status_code == 200
    statements.reset()
    response = api.get(f"/maps/{map_id}/locations.geojson", buffered=False)
    chunks = iter(response.response)
    head = next(chunks) + next(chunks)
    read_so_far = statements.count
    rest = b"".join(chunks)
    response.close()
    assert head.startswith(b'{"type":"FeatureCollection","features":[{"type":"Feature"')
    assert len(json.loads(head + rest)["features"]) == 100
    assert statements.count - read_so_far >= 10  # the other chunks were read afterwards


def test_bad_filters_of_the_export_are_validation_errors(api, map_id):
    details = validation_details(api.get(f"/maps/{map_id}/locations.geojson?bbox=1,2&sort=x"))
    assert set(details) == {"bbox", "sort"}


def test_export_of_another_accounts_map_is_not_found(other_api, map_id):
    response = other_api.get(f"/maps/{map_id}/locations.geojson")
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"


def test_export_counts_as_one_general_request(api, map_id):
    bulk(api, map_id, *({"name": f"n{n}"} for n in range(5)))
    before = int(api.get("/keys").headers["X-RateLimit-Remaining"])
    response = api.get(f"/maps/{map_id}/locations.geojson")
    assert response.status_code == 200
    assert int(response.headers["X-RateLimit-Remaining"]) == before - 1


# --- import ------------------------------------------------------------------------


def test_import_creates_locations_in_order_with_their_layers(api, map_id):
    category = make_category(api, map_id)["id"]
    tag = make_tag(api, map_id)["id"]
    first, second = (make_layer(api, map_id, name=f"l{n}")["id"] for n in range(2))
    features = [
        point_feature(
            "One",
            lng=-73.98,
            lat=40.75,
            description="d",
            address="a",
            categoryId=category,
            tagIds=[tag],
            layerIds=[second, first, second],
            properties={"own": 1},
            createdAt="2001-01-01T00:00:00.000Z",
            updatedAt="whatever",
            website="https://example.com",
            rating=4.5,
        ),
        {**point_feature("Two"), "id": 17, "bbox": [0, 0, 1, 1]},
    ]
    features[1]["geometry"]["coordinates"].append(35.0)  # altitude, ignored
    response = import_features(api, map_id, features)
    data = data_of(response, 201)
    assert data["count"] == 2
    one, two = data["created"]
    assert (one["name"], one["lng"], one["lat"]) == ("One", -73.98, 40.75)
    assert (one["description"], one["address"], one["categoryId"]) == ("d", "a", category)
    assert one["tagIds"] == [tag]
    assert [layer["id"] for layer in one["layers"]] == [first, second]
    assert one["properties"] == {"own": 1, "website": "https://example.com", "rating": 4.5}
    assert one["createdAt"] == one["updatedAt"] != "2001-01-01T00:00:00.000Z"
    assert (two["name"], two["lng"], two["lat"], two["layers"]) == ("Two", 2.35, 48.85, [])
    listed = data_of(api.get(f"/maps/{map_id}/locations"))["locations"]
    assert listed == [one, two]


def test_import_takes_application_json_too(api, map_id):
    response = import_features(api, map_id, [point_feature()], content_type="application/json")
    assert data_of(response, 201)["count"] == 1


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_import_refuses_other_content_types_without_details(api, map_id, content_type):
    response = import_features(api, map_id, [point_feature()], content_type=content_type)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "details" not in response.get_json()["error"]


def test_name_property_names_the_property_read_as_the_name(api, map_id):
    feature = point_feature("kept as data", title="The title")
    data = data_of(import_features(api, map_id, [feature], "nameProperty=title"), 201)
    (created,) = data["created"]
    assert created["name"] == "The title"
    assert created["properties"] == {"name": "kept as data"}
    missing = validation_details(
        import_features(api, map_id, [point_feature()], "nameProperty=title")
    )
    assert missing == {
        "features": {
            "0": {"properties": {"title": missing["features"]["0"]["properties"]["title"]}}
        }
    }
    bad = validation_details(import_features(api, map_id, [feature], "nameProperty=tagIds"))
    assert list(bad) == ["nameProperty"]


def test_a_feature_without_a_name_is_told_about_name_property(api, map_id):
    feature = {"type": "Feature", "geometry": {"type": "Point", "coordinates": [2, 1]},
               "properties": {"title": "Café", "city": "Paris"}}  # fmt: skip
    details = validation_details(import_features(api, map_id, [feature]))
    (message,) = details["features"]["0"]["properties"]["name"]
    assert "nameProperty" in message and "'title'" in message and "'city'" in message
    bare = {**feature, "properties": {}}
    (message,) = validation_details(import_features(api, map_id, [bare]))["features"]["0"][
        "properties"
    ]["name"]
    assert "nameProperty" in message


@pytest.mark.parametrize(
    ("coordinates", "named"),
    [
        ([200, 100], ["Longitude (coordinates[0])", "Latitude (coordinates[1])"]),
        (["east", None], ["Longitude (coordinates[0])", "Latitude (coordinates[1])"]),
        ([2, 100], ["Latitude (coordinates[1])"]),
        ([-181, 1], ["Longitude (coordinates[0])"]),
    ],
)
def test_a_point_with_wrong_coordinates_names_each_of_them(api, map_id, coordinates, named):
    feature = {"type": "Feature", "geometry": {"type": "Point", "coordinates": coordinates},
               "properties": {"name": "x"}}  # fmt: skip
    messages = validation_details(import_features(api, map_id, [feature]))["features"]["0"][
        "geometry"
    ]
    assert [message.split(":")[0] for message in messages] == named


def test_a_key_both_beside_and_inside_properties_is_a_validation_error(api, map_id):
    feature = point_feature(website="a", properties={"website": "b"})
    details = validation_details(import_features(api, map_id, [feature]))
    assert list(details["features"]["0"]["properties"]) == ["website"]
    assert data_of(api.get(f"/maps/{map_id}/locations"))["pagination"]["total"] == 0


def test_import_is_all_or_nothing_and_names_every_bad_feature(api, map_id):
    layer = make_layer(api, map_id)["id"]
    features = [
        point_feature("fine", layerIds=[layer]),
        point_feature("", lng=200),
        point_feature("unknown refs", categoryId="nope", tagIds=["x"], layerIds=[layer, "y"]),
        point_feature("fine too"),
    ]
    details = validation_details(import_features(api, map_id, features))
    assert set(details) == {"features"}
    assert set(details["features"]) == {"1", "2"}
    assert set(details["features"]["1"]) == {"geometry", "properties"}
    assert set(details["features"]["1"]["properties"]) == {"name"}
    assert set(details["features"]["2"]["properties"]) == {"categoryId", "tagIds", "layerIds"}
    assert details["features"]["2"]["properties"]["layerIds"] == ["Not a layer of this map: y"]
    assert data_of(api.get(f"/maps/{map_id}/locations"))["pagination"]["total"] == 0


HOSTILE_FEATURES = {
    "not an object": ("a string", "_schema"),
    "null": (None, "_schema"),
    "a list": ([1, 2], "_schema"),
    "no type": ({"geometry": {"type": "Point", "coordinates": [0, 0]}, "properties": {"name": "x"}}, "type"),
    "a nested collection": ({"type": "FeatureCollection", "features": []}, "type"),
    "a line": (
        {"type": "Feature", "geometry": {"type": "LineString", "coordinates": [[0, 0], [1, 1]]}, "properties": {"name": "x"}},
        "geometry",
    ),
    "a geometry collection": (
        {"type": "Feature", "geometry": {"type": "GeometryCollection", "geometries": [{"type": "Point", "coordinates": [0, 0]}]}, "properties": {"name": "x"}},
        "geometry",
    ),
    "no geometry": ({"type": "Feature", "geometry": None, "properties": {"name": "x"}}, "geometry"),
    "a string geometry": ({"type": "Feature", "geometry": "POINT(0 0)", "properties": {"name": "x"}}, "geometry"),
    "string coordinates": (point_feature(lng="2.3"), "geometry"),
    "boolean coordinates": (point_feature(lng=True), "geometry"),
    "nested coordinates": ({"type": "Feature", "geometry": {"type": "Point", "coordinates": [[0, 0]]}, "properties": {"name": "x"}}, "geometry"),
    "one coordinate": ({"type": "Feature", "geometry": {"type": "Point", "coordinates": [0]}, "properties": {"name": "x"}}, "geometry"),
    "four coordinates": ({"type": "Feature", "geometry": {"type": "Point", "coordinates": [0, 0, 0, 0]}, "properties": {"name": "x"}}, "geometry"),
    "coordinates an object": ({"type": "Feature", "geometry": {"type": "Point", "coordinates": {"lng": 0}}, "properties": {"name": "x"}}, "geometry"),
    "latitude out of range": (point_feature(lat=90.5), "geometry"),
    "longitude out of range": (point_feature(lng=-180.01), "geometry"),
    "a huge integer": (point_feature(lng=10**400), "geometry"),
    "a geometry with a foreign member": ({"type": "Feature", "geometry": {"type": "Point", "coordinates": [0, 0], "radius": 5}, "properties": {"name": "x"}}, "geometry"),
        "properties a list": ({**point_feature(), "properties": ["name"]}, "properties"),
    "a string altitude": ({"type": "Feature", "geometry": {"type": "Point", "coordinates": [0, 0, "high"]}, "properties": {"name": "x"}}, "geometry"),
    "properties too deep": (point_feature(properties={"a": [[[[[[[[[[1]]]]]]]]]]}), "properties"),
    "U+0000 in a property": (point_feature(note="a\x00b"), "properties"),
    "name too long": (point_feature("x" * 201), "properties"),
    "tagIds not a list": (point_feature(tagIds="abc"), "properties"),
    "layerIds not a list": (point_feature(layerIds=5), "properties"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HOSTILE_FEATURES))
def test_a_hostile_feature_is_a_400_naming_it(api, map_id, name):
    feature, field = HOSTILE_FEATURES[name]
    details = validation_details(import_features(api, map_id, [point_feature(), feature]))
    assert list(details) == ["features"] and list(details["features"]) == ["1"], details
    assert field in details["features"]["1"], details


def test_nan_coordinates_are_a_400(api, map_id):
    body = '{"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": {"type": "Point", "coordinates": [NaN, 1]}, "properties": {"name": "x"}}]}'
    response = api.post(
        f"/maps/{map_id}/locations/import", data=body, headers={"Content-Type": GEO}
    )
    details = validation_details(response)
    assert list(details["features"]["0"]) == ["geometry"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "FeatureCollection"}, "features"),
        ({"type": "FeatureCollection", "features": None}, "features"),
        ({"type": "FeatureCollection", "features": {"0": {}}}, "features"),
        ({"type": "FeatureCollection", "features": []}, "features"),
        ({"type": "FeatureCollection", "features": [point_feature()] * 101}, "features"),
        ({"type": "Feature", "features": [point_feature()]}, "type"),
        ({"features": [point_feature()]}, "type"),
    ],
)
def test_a_hostile_collection_is_a_400_naming_the_member(api, map_id, body, field):
    response = api.post(
        f"/maps/{map_id}/locations/import", data=json.dumps(body), headers={"Content-Type": GEO}
    )
    assert set(validation_details(response)) == {field}


def test_a_body_that_is_not_an_object_is_a_400_without_details(api, map_id):
    for body in ("[]", '"FeatureCollection"', "{", "\xff"):
        response = api.post(
            f"/maps/{map_id}/locations/import", data=body, headers={"Content-Type": GEO}
        )
        assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
        assert "details" not in response.get_json()["error"]


def test_foreign_members_of_the_collection_are_ignored(api, map_id):
    body = {
        "type": "FeatureCollection",
        "name": "from QGIS",
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:OGC:1.3:CRS84"}},
        "bbox": [0, 0, 1, 1],
        "features": [point_feature()],
    }
    response = api.post(
        f"/maps/{map_id}/locations/import", data=json.dumps(body), headers={"Content-Type": GEO}
    )
    assert data_of(response, 201)["count"] == 1


def test_other_members_are_unknown_fields(api, map_id):
    body = {"type": "FeatureCollection", "features": [point_feature()], "extra": 1}
    response = api.post(
        f"/maps/{map_id}/locations/import", data=json.dumps(body), headers={"Content-Type": GEO}
    )
    assert validation_details(response) == {"extra": ["Unknown field."]}
    feature = {**point_feature(), "style": {"color": "red"}}
    details = validation_details(import_features(api, map_id, [feature]))
    assert details == {"features": {"0": {"style": ["Unknown field."]}}}


def test_import_of_an_unknown_map_is_not_found_before_validation(api):
    response = import_features(api, "AAAAAAAAAAAAAAAAAAAAAA", [None])
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"


@pytest.fixture
def two_bulks_an_hour(app_config):
    app_config["RATELIMIT_BULK"] = "2 per hour"


def test_import_counts_against_the_bulk_bucket(two_bulks_an_hour, api, map_id):
    refused = import_features(api, map_id, [])
    assert refused.status_code == 400  # counted all the same, as the bulk's are
    assert refused.headers["X-RateLimit-Remaining"] == "1"
    assert import_features(api, map_id, [point_feature()]).status_code == 201
    response = import_features(api, map_id, [point_feature()])
    assert response.status_code == 429 and error_code(response) == "RATE_LIMIT_EXCEEDED"
    assert data_of(api.get(f"/maps/{map_id}/locations"))["pagination"]["total"] == 1


def test_round_trip_gives_the_same_features_ids_and_times_aside(api, map_id):
    category = make_category(api, map_id)["id"]
    tags = [make_tag(api, map_id, name=f"t{n}")["id"] for n in range(3)]
    layers = [make_layer(api, map_id, name=f"l{n}")["id"] for n in range(2)]
    created = bulk(
        api,
        map_id,
        *(
            {
                "name": f"Spot {n} é",
                "lat": -89.5 + n * 17.3,
                "lng": 179.99 - n * 33.7,
                "description": f"line\nbreak {n}",
                "address": "" if n % 2 else "1 Main St",
                "categoryId": category if n % 2 else None,
                "tagIds": tags[n % 3 :],
                "properties": {"n": n, "nested": {"x": [1, "two", None, True]}, "big": 2**65},
            }
            for n in range(8)
        ),
    )
    for index, location in enumerate(created[:4]):
        path = f"/maps/{map_id}/locations/{location['id']}/layers"
        assert api.put(path, json={"layerIds": layers[index % 2 :]}).status_code == 200
    exported = export(api, map_id)

    # An empty map with the same categories, tags and layers (the ids differ).
    target = make_map(api)["id"]
    renamed = {category: make_category(api, target)["id"]}
    renamed.update((tag, make_tag(api, target, name=f"t{n}")["id"]) for n, tag in enumerate(tags))
    renamed.update(
        (layer, make_layer(api, target, name=f"l{n}")["id"]) for n, layer in enumerate(layers)
    )
    text = json.dumps(exported)
    for old, new in renamed.items():
        text = text.replace(old, new)
    data_of(import_features(api, target, json.loads(text)["features"]), 201)
    again = export(api, target)

    def comparable(collection) -> list:
        features = []
        for feature in collection["features"]:
            properties = dict(feature["properties"])
            for volatile in ("createdAt", "updatedAt"):
                properties.pop(volatile)
            features.append({**feature, "id": None, "properties": properties})
        return features

    assert comparable(again) == comparable(json.loads(text))
    assert len(again["features"]) == 8


def test_export_streams_over_http(api, map_id, live_server, key):
    bulk(api, map_id, *({"name": f"n{n}"} for n in range(30)))
    response = requests.get(
        f"{live_server}/api/v1/maps/{map_id}/locations.geojson?sort=-name",
        headers={"Authorization": f"Bearer {key}"},
        stream=True,
        timeout=10,
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"] == GEO
    assert "Content-Length" not in response.headers  # streamed, not buffered first
    collection = geojson.loads(b"".join(response.iter_content(1024)))
    assert collection.is_valid
    assert [f["properties"]["name"] for f in collection["features"]][:3] == ["n9", "n8", "n7"]


def test_the_openapi_document_describes_filters_export_and_import(client):
    document = client.get("/api/v1/openapi.json").get_json()
    listing = document["paths"]["/maps/{mapId}/locations"]["get"]
    parameters = {p["name"]: p for p in listing["parameters"]}
    assert set(parameters) == {
        "page", "pageSize", "bbox", "q", "categoryId", "tagId", "layerId", "updatedSince", "sort",
        "externalId",
    }  # fmt: skip
    assert parameters["tagId"]["schema"]["type"] == "array"
    assert parameters["tagId"]["schema"]["maxItems"] == 10
    assert parameters["sort"]["schema"]["enum"] == [
        "createdAt", "-createdAt", "updatedAt", "-updatedAt", "name", "-name",
    ]  # fmt: skip
    exported = document["paths"]["/maps/{mapId}/locations.geojson"]["get"]
    assert exported["operationId"] == "locations_export_geojson"
    assert list(exported["responses"]["200"]["content"]) == [GEO]
    schema = exported["responses"]["200"]["content"][GEO]["schema"]
    assert schema == {"$ref": "#/components/schemas/FeatureCollection"}
    assert {p["name"] for p in exported["parameters"]} == set(parameters) - {"page", "pageSize"}
    imported = document["paths"]["/maps/{mapId}/locations/import"]["post"]
    assert imported["operationId"] == "locations_import_geojson"
    assert set(imported["requestBody"]["content"]) == {GEO, "application/json"}
    assert [p["name"] for p in imported["parameters"] if "name" in p] == ["nameProperty", "upsert"]
    assert "201" in imported["responses"] and "400" in imported["responses"]
