"""OGC API - Features at /ogcapi (contract section 14): documents, collections,
items and their filters, paging, keys, and Part 4's writes with their events."""

import base64
import json

import pytest

from mapapi.ogcapi.documents import CONFORMS_TO

from .factories import (
    create_key,
    make_category,
    make_layer,
    make_map,
    make_tag,
)
from .helpers import validation_details

OGC = "/ogcapi"


class Ogc:
    """The test client under /ogcapi, with a key sent as GIS tools send it."""

    def __init__(self, client, key: str | None, scheme: str = "Bearer"):
        self.client, self.key, self.scheme = client, key, scheme

    def request(self, method, path, headers=None, **kwargs):
        sent = {}
        if self.key and self.scheme == "Bearer":
            sent["Authorization"] = f"Bearer {self.key}"
        elif self.key:
            sent["Authorization"] = (
                "Basic "
                + base64.b64encode(self.scheme.format(key=self.key).encode()).decode()
            )
        sent.update(headers or {})
        return self.client.open(OGC + path, method=method, headers=sent, **kwargs)

    def get(self, path, **kwargs):
        return self.request("GET", path, **kwargs)

    def items(self, map_id, **query):
        response = self.get(f"/collections/{map_id}/items", query_string=query)
        assert response.status_code == 200, response.get_json()
        return response.get_json()


@pytest.fixture
def ogc(client, key):
    return Ogc(client, key)


@pytest.fixture
def map_id(api):
    return make_map(api, title="Cafés", description="Where to sit")["id"]


def bulk(api, map_id, *items):
    body = {"locations": [{"lat": 48.85, "lng": 2.35, **item} for item in items]}
    return api.created(f"/maps/{map_id}/locations/bulk", body)["created"]


def error(response, status, code):
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == code
    return response.get_json()["error"]


# --- documents ---------------------------------------------------------------------


def test_landing_page_links_and_needs_no_key(client):
    for path in (OGC, OGC + "/"):
        response = client.get(path)
        assert response.status_code == 200 and response.mimetype == "application/json"
        body = response.get_json()
        rels = {item["rel"]: item for item in body["links"]}
        assert {"self", "service-desc", "conformance", "data"} <= set(rels)
        assert rels["service-desc"]["href"].endswith("/ogcapi/api")
        assert (
            rels["service-desc"]["type"]
            == "application/vnd.oai.openapi+json;version=3.0"
        )
        assert rels["data"]["href"].endswith("/ogcapi/collections")
        assert body["title"] and body["description"]


def test_conformance_declares_exactly_what_is_built(client):
    body = client.get(OGC + "/conformance").get_json()
    assert body == {"conformsTo": CONFORMS_TO}
    assert len(CONFORMS_TO) == 14
    assert "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core" in CONFORMS_TO
    assert (
        "http://www.opengis.net/spec/ogcapi-features-4/1.0/conf/update" in CONFORMS_TO
    )


def test_api_definition_is_openapi_30_with_the_items_parameters(client):
    from openapi_spec_validator import validate

    response = client.get(OGC + "/api")
    assert response.mimetype == "application/vnd.oai.openapi+json"
    document = response.get_json()
    validate(document)
    assert document["openapi"].startswith("3.0")
    assert document["servers"][0]["url"].endswith("/ogcapi")
    items = document["paths"]["/collections/{collectionId}/items"]["get"]
    names = {parameter["name"] for parameter in items["parameters"]}
    assert {
        "limit",
        "bbox",
        "datetime",
        "filter",
        "filter-lang",
        "cursor",
        "q",
        "name",
    } <= names
    limit = next(p for p in items["parameters"] if p["name"] == "limit")
    assert limit["schema"]["maximum"] == 10000


def test_another_format_is_a_validation_error(client, ogc, map_id):
    assert validation_details(client.get(OGC + "/conformance?f=html")) == {
        "f": ["Must be json."]
    }
    assert "f" in validation_details(ogc.get(f"/collections/{map_id}/items?f=xml"))
    assert ogc.get(f"/collections/{map_id}/items?f=geojson").status_code == 200


# --- keys --------------------------------------------------------------------------


def test_a_key_is_needed_and_both_schemes_are_offered(client, map_id):
    response = client.get(OGC + "/collections")
    error(response, 401, "MISSING_API_KEY")
    challenge = response.headers["WWW-Authenticate"]
    assert 'Bearer realm="mapapi"' in challenge and 'Basic realm="mapapi"' in challenge
    response = client.get(
        OGC + "/collections", headers={"Authorization": "Bearer mk_live_nope"}
    )
    error(response, 401, "INVALID_API_KEY")
    assert 'Basic realm="mapapi"' in response.headers["WWW-Authenticate"]


@pytest.mark.parametrize("scheme", ["{key}:", "{key}:anything", ":{key}", "qgis:{key}"])
def test_basic_authentication_with_the_key_as_user_or_password(
    client, key, map_id, scheme
):
    response = Ogc(client, key, scheme).get(f"/collections/{map_id}")
    assert response.status_code == 200, response.get_json()


def test_basic_authentication_elsewhere_and_keys_in_the_query_are_refused(
    client, key, map_id
):
    basic = "Basic " + base64.b64encode(f"{key}:".encode()).decode()
    error(
        client.get("/api/v1/maps", headers={"Authorization": basic}),
        401,
        "INVALID_API_KEY",
    )
    error(
        client.get(OGC + "/collections", headers={"Authorization": "Basic %%%"}),
        401,
        "INVALID_API_KEY",
    )
    for name in ("key", "api_key", "access_token", "token"):
        error(client.get(f"{OGC}/collections?{name}={key}"), 401, "MISSING_API_KEY")


def test_collections_are_the_accounts_maps_only(ogc, api, other_api, map_id):
    second = make_map(api, title="Second")["id"]
    theirs = make_map(other_api, title="Theirs")["id"]
    body = ogc.get("/collections").get_json()
    assert [c["id"] for c in body["collections"]] == [map_id, second]
    assert body["links"][0]["rel"] == "self"
    error(ogc.get(f"/collections/{theirs}"), 404, "NOT_FOUND")
    error(ogc.get(f"/collections/{theirs}/items"), 404, "NOT_FOUND")


def test_a_collection_describes_its_extent(ogc, api, map_id):
    empty = ogc.get(f"/collections/{map_id}").get_json()
    assert empty["extent"]["spatial"]["bbox"] == [[-180, -90, 180, 90]]
    assert empty["extent"]["temporal"]["interval"] == [[None, None]]
    first, _second = bulk(
        api,
        map_id,
        {"name": "a", "lat": 10, "lng": -5},
        {"name": "b", "lat": 20, "lng": 7.5},
    )
    api.put(f"/maps/{map_id}/locations/{first['id']}", json={"name": "a2"})
    updated = api.get(f"/maps/{map_id}/locations/{first['id']}").get_json()["data"][
        "updatedAt"
    ]
    body = ogc.get(f"/collections/{map_id}").get_json()
    assert (
        body["id"] == map_id
        and body["title"] == "Cafés"
        and body["description"] == "Where to sit"
    )
    assert body["itemType"] == "feature"
    assert body["crs"] == ["http://www.opengis.net/def/crs/OGC/1.3/CRS84"]
    assert body["extent"]["spatial"]["bbox"] == [[-5, 10, 7.5, 20]]
    assert body["extent"]["temporal"]["interval"] == [[first["createdAt"], updated]]
    rels = {item["rel"]: item["type"] for item in body["links"]}
    assert (
        rels["items"] == "application/geo+json" and rels["self"] == "application/json"
    )
    assert any(rel.endswith("queryables") for rel in rels)


def test_queryables_are_a_closed_json_schema(ogc, map_id):
    response = ogc.get(f"/collections/{map_id}/queryables")
    assert response.mimetype == "application/schema+json"
    schema = response.get_json()
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {
        "geometry",
        "name",
        "description",
        "address",
        "externalId",
        "categoryId",
        "createdAt",
        "updatedAt",
    }
    assert schema["properties"]["categoryId"]["type"] == ["string", "null"]


# --- items -------------------------------------------------------------------------


def test_items_are_the_exports_features(ogc, api, map_id):
    layer = make_layer(api, map_id, name="L")["id"]
    tag = make_tag(api, map_id, name="T")["id"]
    bulk(
        api,
        map_id,
        {
            "name": "a",
            "lat": 48.123456789012345,
            "lng": 2.3,
            "tagIds": [tag],
            "layerIds": [layer],
            "properties": {"z": 1, "a": [True, None]},
            "externalId": "x-1",
        },
        {"name": "b"},
    )
    export = json.loads(api.get(f"/maps/{map_id}/locations.geojson").get_data())
    page = ogc.get(f"/collections/{map_id}/items")
    assert page.mimetype == "application/geo+json"
    body = page.get_json()
    assert body["type"] == "FeatureCollection"
    assert body["features"] == export["features"]
    assert body["numberMatched"] == 2 and body["numberReturned"] == 2
    assert body["timeStamp"].endswith("Z")
    assert {link["rel"] for link in body["links"]} == {"self", "collection"}
    feature = body["features"][0]
    assert feature["geometry"]["coordinates"] == [2.3, 48.123456789012345]
    assert list(feature["properties"]) == [
        "name",
        "description",
        "address",
        "categoryId",
        "tagIds",
        "layerIds",
        "properties",
        "externalId",
        "createdAt",
        "updatedAt",
    ]


def test_one_item_with_links_and_etag(ogc, api, map_id):
    (location,) = bulk(api, map_id, {"name": "a"})
    response = ogc.get(f"/collections/{map_id}/items/{location['id']}")
    assert response.status_code == 200 and response.mimetype == "application/geo+json"
    feature = response.get_json()
    assert feature["id"] == location["id"] and feature["properties"]["name"] == "a"
    assert {link["rel"] for link in feature["links"]} == {"self", "collection"}
    etag = response.headers["ETag"]
    again = ogc.get(
        f"/collections/{map_id}/items/{location['id']}", headers={"If-None-Match": etag}
    )
    assert (
        again.status_code == 304
        and again.headers["ETag"] == etag
        and again.get_data() == b""
    )
    error(ogc.get(f"/collections/{map_id}/items/nope"), 404, "NOT_FOUND")


def test_limit_is_clamped_and_bad_parameters_are_named(ogc, api, map_id):
    bulk(api, map_id, {"name": "a"}, {"name": "b"}, {"name": "c"})
    assert ogc.items(map_id, limit="100000")["numberReturned"] == 3
    details = validation_details(
        ogc.get(
            f"/collections/{map_id}/items?limit=0&bbox=1,2,3&datetime=yesterday&sort=name&foo=1"
        )
    )
    assert set(details) == {"limit", "bbox", "datetime", "sort", "foo"}
    assert set(
        validation_details(
            ogc.get(f"/collections/{map_id}/items?limit=-1&bbox=0,10,1,5")
        )
    ) == {
        "limit",
        "bbox",
    }
    assert "cursor" in validation_details(
        ogc.get(f"/collections/{map_id}/items?cursor=abc")
    )


def test_bbox_datetime_list_filters_and_equality(ogc, api, map_id):
    category = make_category(api, map_id, name="C")["id"]
    a, b, c = bulk(
        api,
        map_id,
        {
            "name": "Alpha",
            "lat": 10,
            "lng": 179.5,
            "categoryId": category,
            "address": "1 Rue",
        },
        {"name": "beta", "lat": 11, "lng": -179.5, "description": "ALPHA inside"},
        {"name": "gamma", "lat": 50, "lng": 0},
    )
    ids = lambda body: [feature["id"] for feature in body["features"]]
    assert ids(ogc.items(map_id, bbox="179,9,-179,12")) == [a["id"], b["id"]]
    assert ids(ogc.items(map_id, bbox="-1,49,0,50")) == [c["id"]]
    assert ids(ogc.items(map_id, bbox="-1,49,0,0,50,100")) == [c["id"]]
    assert ids(ogc.items(map_id, bbox="-1e-5,4.9e1,1e-7,50")) == [c["id"]]  # as GDAL may write them
    assert ids(ogc.items(map_id, q="alpha")) == [a["id"], b["id"]]
    assert ids(ogc.items(map_id, categoryId=category)) == [a["id"]]
    assert ids(ogc.items(map_id, name="Alpha")) == [a["id"]]
    assert ids(ogc.items(map_id, name="alpha")) == []
    assert ids(ogc.items(map_id, address="1 Rue", q="alpha")) == [a["id"]]
    created = a["createdAt"]
    assert len(ids(ogc.items(map_id, datetime=created))) == 3
    assert len(ids(ogc.items(map_id, datetime=f"{created}/.."))) == 3
    assert ids(ogc.items(map_id, datetime="../2000-01-01T00:00:00Z")) == []
    assert ids(ogc.items(map_id, datetime="2000-01-01T00:00:00Z/")) == [
        a["id"],
        b["id"],
        c["id"],
    ]


# --- CQL2 --------------------------------------------------------------------------


@pytest.fixture
def named(api, map_id):
    """Locations a, B, c_d, 'it''s' on a grid, the first in a category, by name."""
    category = make_category(api, map_id, name="C")["id"]
    created = bulk(
        api,
        map_id,
        {"name": "a", "lat": 0, "lng": 0, "categoryId": category, "externalId": "e1"},
        {"name": "B", "lat": 1, "lng": 1, "address": "x"},
        {"name": "c_d", "lat": 2, "lng": 2},
        {"name": "it's", "lat": 3, "lng": 3},
    )
    return {location["name"]: location["id"] for location in created} | {
        "category": category
    }


def names(ogc, map_id, cql, lang="cql2-text"):
    body = ogc.items(
        map_id,
        filter=cql if isinstance(cql, str) else json.dumps(cql),
        **{"filter-lang": lang},
    )
    return sorted(feature["properties"]["name"] for feature in body["features"])


@pytest.mark.parametrize(
    ("cql", "expected"),
    [
        ("name = 'a'", ["a"]),
        ("name <> 'a'", ["B", "c_d", "it's"]),
        ("name > 'B'", ["a", "c_d", "it's"]),  # by code point: "B" < "a"
        ("name < 'a' AND NOT name = 'B'", []),
        ("name = 'a' OR (name = 'B' AND address = 'x')", ["B", "a"]),
        ("name LIKE 'c%'", ["c_d"]),
        ("name LIKE 'C%'", []),
        ("name LIKE '_'", ["B", "a"]),
        ("name LIKE 'c\\_d'", ["c_d"]),
        ("name LIKE 'b'", []),
        ("name IN ('a', 'B', 'zz')", ["B", "a"]),
        ("name BETWEEN 'B' AND 'b'", ["B", "a"]),
        ("categoryId IS NULL", ["B", "c_d", "it's"]),
        ("externalId IS NOT NULL", ["a"]),
        ("name = 'it''s'", ["it's"]),
        ("createdAt > TIMESTAMP('2000-01-01T00:00:00Z')", ["B", "a", "c_d", "it's"]),
        ("updatedAt < TIMESTAMP('2000-01-01T00:00:00Z')", []),
        ("S_INTERSECTS(geometry, BBOX(0.5, 0.5, 2, 2))", ["B", "c_d"]),
        ("S_INTERSECTS(geometry, POLYGON((0 0, 2 0, 2 2, 0 0)))", ["B", "a", "c_d"]),
        (
            "S_INTERSECTS(geometry, POLYGON((-1 -1, 4 -1, 4 4, -1 4, -1 -1), (0.5 0.5, 2.5 0.5, 2.5 2.5, 0.5 2.5, 0.5 0.5)))",
            ["a", "it's"],
        ),
        ("S_INTERSECTS(geometry, POINT(3 3))", ["it's"]),
    ],
)
def test_cql2_text_filters(ogc, map_id, named, cql, expected):
    assert names(ogc, map_id, cql) == expected


def test_cql2_json_filters_and_combination_with_parameters(ogc, map_id, named):
    cql = {"op": "like", "args": [{"property": "name"}, "%"]}
    assert names(ogc, map_id, cql, "cql2-json") == ["B", "a", "c_d", "it's"]
    body = ogc.items(map_id, filter="name <> 'a'", bbox="0,0,1.5,1.5")
    assert [feature["properties"]["name"] for feature in body["features"]] == ["B"]
    assert body["numberMatched"] == 1


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ({"filter": "name = "}, "filter"),
        ({"filter": "color = 'red'"}, "filter"),
        ({"filter": "name = 3"}, "filter"),
        ({"filter": "createdAt > 'not a time'"}, "filter"),
        ({"filter": "1 = 1"}, "filter"),
        ({"filter": "T_AFTER(createdAt, TIMESTAMP('2020-01-01T00:00:00Z'))"}, "filter"),
        ({"filter": "CASEI(name) = 'a'"}, "filter"),
        ({"filter": "S_INTERSECTS(geometry, LINESTRING(0 0, 1 1))"}, "filter"),
        ({"filter": "{", "filter-lang": "cql2-json"}, "filter"),
        ({"filter": "name = 'a'", "filter-lang": "cql-text"}, "filter-lang"),
    ],
)
def test_filters_not_built_are_validation_errors(ogc, map_id, query, parameter):
    details = validation_details(
        ogc.get(f"/collections/{map_id}/items", query_string=query)
    )
    assert list(details) == [parameter]


# --- paging ------------------------------------------------------------------------


def test_next_pages_by_cursor_see_each_location_once_under_writes(ogc, api, map_id):
    first = bulk(api, map_id, *({"name": f"n{n}"} for n in range(25)))
    seen, pages = [], 0
    page = ogc.items(map_id, limit="10", q="n")
    assert page["numberMatched"] == 25
    while True:
        pages += 1
        seen.extend(feature["id"] for feature in page["features"])
        # Between pages: one deleted ahead... none that existed throughout.
        bulk(api, map_id, {"name": f"new{pages}"})
        nexts = [link["href"] for link in page["links"] if link["rel"] == "next"]
        if not nexts:
            break
        assert "q=n" in nexts[0] and "limit=10" in nexts[0]
        response = ogc.get(nexts[0].split("/ogcapi", 1)[1])
        assert response.status_code == 200
        page = response.get_json()
        assert "numberMatched" not in page
    original = [location["id"] for location in first]
    assert [i for i in seen if i in original] == original
    assert len(seen) == len(set(seen))


# --- writes ------------------------------------------------------------------------


def feature(**properties):
    return {
        "type": "Feature",
        "geometry": {"type": "Point", "coordinates": [2.5, 48.5]},
        "properties": {"name": "new", **properties},
    }


def events(api, types="location.*"):
    return api.get("/events", query_string={"types": types}).get_json()["data"][
        "events"
    ]


def test_create_replace_patch_delete_record_events(ogc, api, map_id):
    tag = make_tag(api, map_id, name="T")["id"]
    response = ogc.request(
        "POST",
        f"/collections/{map_id}/items",
        json=feature(tagIds=[tag], color="red"),
        headers={"Content-Type": "application/geo+json"},
    )
    assert response.status_code == 201, response.get_json()
    created = response.get_json()
    location_id = created["id"]
    assert response.headers["Location"].endswith(
        f"/ogcapi/collections/{map_id}/items/{location_id}"
    )
    assert created["properties"]["properties"] == {"color": "red"}
    assert created["properties"]["tagIds"] == [tag]
    item = f"/collections/{map_id}/items/{location_id}"
    assert ogc.get(item).headers["ETag"] == response.headers["ETag"]
    stored = api.get(f"/maps/{map_id}/locations/{location_id}").get_json()["data"]
    assert stored["lat"] == 48.5 and stored["lng"] == 2.5 and stored["name"] == "new"

    replaced = ogc.request("PUT", item, json=feature(name="again", description="d"))
    assert replaced.status_code == 200, replaced.get_json()
    assert replaced.get_json()["properties"]["tagIds"] == []  # left out: its default
    assert replaced.get_json()["properties"]["properties"] == {}
    assert replaced.headers["ETag"] == ogc.get(item).headers["ETag"]

    patched = ogc.request(
        "PATCH",
        item,
        data=json.dumps({"properties": {"address": "here", "description": None}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.get_json()
    properties = patched.get_json()["properties"]
    assert (
        properties["name"] == "again"
        and properties["address"] == "here"
        and properties["description"] == ""
    )

    deleted = ogc.request("DELETE", item)
    assert deleted.status_code == 204 and deleted.get_data() == b""
    error(ogc.get(item), 404, "NOT_FOUND")
    kinds = [(event["type"], event["data"]["id"]) for event in events(api)]
    assert kinds == [
        ("location.created", location_id),
        ("location.updated", location_id),
        ("location.updated", location_id),
        ("location.deleted", location_id),
    ]


def test_bad_features_are_validation_errors_and_change_nothing(ogc, api, map_id):
    items = f"/collections/{map_id}/items"
    details = validation_details(
        ogc.request("POST", items, json={"type": "Feature", "properties": {}})
    )
    assert set(details) == {"geometry", "properties"}
    details = validation_details(
        ogc.request("POST", items, json=feature(categoryId="nope"))
    )
    assert details == {"properties": {"categoryId": ["Not a category of this map."]}}
    response = ogc.request(
        "POST", items, data="{", headers={"Content-Type": "application/json"}
    )
    error(response, 400, "VALIDATION_ERROR")
    response = ogc.request(
        "POST", items, data="{}", headers={"Content-Type": "text/plain"}
    )
    error(response, 400, "VALIDATION_ERROR")
    (location,) = bulk(api, map_id, {"name": "kept"})
    item = f"{items}/{location['id']}"
    patch = ogc.request(
        "PATCH",
        item,
        data=json.dumps({"properties": {"name": None}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    error(patch, 400, "VALIDATION_ERROR")
    assert events(api) == [] or all(
        event["type"] == "location.created" for event in events(api)
    )


def test_if_match_guards_writes(ogc, api, map_id):
    (location,) = bulk(api, map_id, {"name": "a"})
    item = f"/collections/{map_id}/items/{location['id']}"
    etag = ogc.get(item).headers["ETag"]
    api.put(f"/maps/{map_id}/locations/{location['id']}", json={"name": "changed"})
    for method, body in (
        ("PUT", feature()),
        ("PATCH", {"properties": {"name": "x"}}),
        ("DELETE", None),
    ):
        response = ogc.request(method, item, json=body, headers={"If-Match": etag})
        error(response, 412, "PRECONDITION_FAILED")
    fresh = ogc.get(item).headers["ETag"]
    assert (
        ogc.request(
            "PUT", item, json=feature(name="ok"), headers={"If-Match": fresh}
        ).status_code
        == 200
    )
    assert ogc.request("DELETE", item, headers={"If-Match": "*"}).status_code == 204


def test_idempotency_key_on_post_runs_once(ogc, api, map_id):
    items = f"/collections/{map_id}/items"
    headers = {"Idempotency-Key": "ogc-1"}
    first = ogc.request("POST", items, json=feature(), headers=headers)
    again = ogc.request("POST", items, json=feature(), headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json() == first.get_json()
    assert ogc.items(map_id)["numberMatched"] == 1
    error(
        ogc.request("POST", items, json=feature(name="other"), headers=headers),
        422,
        "IDEMPOTENCY_KEY_REUSED",
    )


def test_scopes_options_and_methods(app, client, ogc, api, map_id):
    (location,) = bulk(api, map_id, {"name": "a"})
    items = f"/collections/{map_id}/items"
    item = f"{items}/{location['id']}"
    reader = Ogc(client, create_key(app, "owner@example.com", scope="READ_ONLY"))
    assert ogc.request("OPTIONS", items).headers["Allow"] == "GET, HEAD, OPTIONS, POST"
    assert (
        ogc.request("OPTIONS", item).headers["Allow"]
        == "DELETE, GET, HEAD, OPTIONS, PATCH, PUT"
    )
    for path in (items, item):
        response = reader.request("OPTIONS", path)
        assert (
            response.status_code == 204
            and response.headers["Allow"] == "GET, HEAD, OPTIONS"
        )
    error(reader.request("POST", items, json=feature()), 403, "INSUFFICIENT_SCOPE")
    error(reader.request("DELETE", item), 403, "INSUFFICIENT_SCOPE")
    error(ogc.request("OPTIONS", f"{items}/nope"), 404, "NOT_FOUND")
    response = ogc.request("POST", "/collections")
    error(response, 405, "METHOD_NOT_ALLOWED")
    assert "GET" in response.headers["Allow"]
    error(ogc.get("/nowhere"), 404, "NOT_FOUND")


def test_writes_to_another_accounts_map_are_not_found(ogc, other_api):
    theirs = make_map(other_api, title="Theirs")["id"]
    (location,) = bulk(other_api, theirs, {"name": "a"})
    error(
        ogc.request("POST", f"/collections/{theirs}/items", json=feature()),
        404,
        "NOT_FOUND",
    )
    error(
        ogc.request("DELETE", f"/collections/{theirs}/items/{location['id']}"),
        404,
        "NOT_FOUND",
    )
    assert (
        other_api.get(f"/maps/{theirs}/locations/{location['id']}").status_code == 200
    )
