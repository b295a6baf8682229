"""OGC API - Features at /ogcapi (contract section 14): documents, collections,
items and their filters, paging, keys, and Part 4's writes with their events."""

import base64
import json
import threading

import pytest

from mapapi.ogcapi.documents import CONFORMS_TO

from .factories import create_account, create_key, make_category, make_layer, make_map, make_tag
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
            sent["Authorization"] = "Basic " + base64.b64encode(self.scheme.format(key=self.key).encode()).decode()
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
        assert rels["service-desc"]["type"] == "application/vnd.oai.openapi+json;version=3.0"
        assert rels["data"]["href"].endswith("/ogcapi/collections")
        assert body["title"] and body["description"]


def test_conformance_declares_exactly_what_is_built(client):
    body = client.get(OGC + "/conformance").get_json()
    assert body == {"conformsTo": CONFORMS_TO}
    assert len(CONFORMS_TO) == 14
    assert "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core" in CONFORMS_TO
    assert "http://www.opengis.net/spec/ogcapi-features-4/1.0/conf/update" in CONFORMS_TO


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
    assert {"limit", "bbox", "datetime", "filter", "filter-lang", "cursor", "q", "name"} <= names
    limit = next(p for p in items["parameters"] if p["name"] == "limit")
    assert limit["schema"]["maximum"] == 10000


def test_another_format_is_a_validation_error(client, ogc, map_id):
    assert validation_details(client.get(OGC + "/conformance?f=html")) == {"f": ["Must be json."]}
    assert "f" in validation_details(ogc.get(f"/collections/{map_id}/items?f=xml"))
    assert ogc.get(f"/collections/{map_id}/items?f=geojson").status_code == 200


# --- keys --------------------------------------------------------------------------


def test_a_key_is_needed_and_both_schemes_are_offered(client, map_id):
    response = client.get(OGC + "/collections")
    error(response, 401, "MISSING_API_KEY")
    challenge = response.headers["WWW-Authenticate"]
    assert 'Bearer realm="mapapi"' in challenge and 'Basic realm="mapapi"' in challenge
    response = client.get(OGC + "/collections", headers={"Authorization": "Bearer mk_live_nope"})
    error(response, 401, "INVALID_API_KEY")
    assert 'Basic realm="mapapi"' in response.headers["WWW-Authenticate"]


@pytest.mark.parametrize("scheme", ["{key}:", "{key}:anything", ":{key}", "qgis:{key}"])
def test_basic_authentication_with_the_key_as_user_or_password(client, key, map_id, scheme):
    response = Ogc(client, key, scheme).get(f"/collections/{map_id}")
    assert response.status_code == 200, response.get_json()


def test_basic_authentication_elsewhere_and_keys_in_the_query_are_refused(client, key, map_id):
    basic = "Basic " + base64.b64encode(f"{key}:".encode()).decode()
    error(client.get("/api/v1/maps", headers={"Authorization": basic}), 401, "INVALID_API_KEY")
    error(client.get(OGC + "/collections", headers={"Authorization": "Basic %%%"}), 401, "INVALID_API_KEY")
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
    first, second = bulk(api, map_id, {"name": "a", "lat": 10, "lng": -5}, {"name": "b", "lat": 20, "lng": 7.5})
    api.put(f"/maps/{map_id}/locations/{first['id']}", json={"name": "a2"})
    updated = api.get(f"/maps/{map_id}/locations/{first['id']}").get_json()["data"]["updatedAt"]
    body = ogc.get(f"/collections/{map_id}").get_json()
    assert body["id"] == map_id and body["title"] == "Cafés" and body["description"] == "Where to sit"
    assert body["itemType"] == "feature"
    assert body["crs"] == ["http://www.opengis.net/def/crs/OGC/1.3/CRS84"]
    assert body["extent"]["spatial"]["bbox"] == [[-5, 10, 7.5, 20]]
    assert body["extent"]["temporal"]["interval"] == [[first["createdAt"], updated]]
    rels = {item["rel"]: item["type"] for item in body["links"]}
    assert rels["items"] == "application/geo+json" and rels["self"] == "application/json"
    assert any(rel.endswith("queryables") for rel in rels)


def test_queryables_are_a_closed_json_schema(ogc, map_id):
    response = ogc.get(f"/collections/{map_id}/queryables")
    assert response.mimetype == "application/schema+json"
    schema = response.get_json()
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {
        "geometry", "name", "description", "address", "externalId", "categoryId", "createdAt", "updatedAt",
    }
    assert schema["properties"]["categoryId"]["type"] == ["string", "null"]


# --- items -------------------------------------------------------------------------


def test_items_are_the_exports_features(ogc, api, map_id):
    layer = make_layer(api, map_id, name="L")["id"]
    tag = make_tag(api, map_id, name="T")["id"]
    bulk(
        api,
        map_id,
        {"name": "a", "lat": 48.123456789012345, "lng": 2.3, "tagIds": [tag], "layerIds": [layer],
         "properties": {"z": 1, "a": [True, None]}, "externalId": "x-1"},
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
        "name", "description", "address", "categoryId", "tagIds", "layerIds", "properties",
        "externalId", "createdAt", "updatedAt",
    ]


def test_one_item_with_links_and_etag(ogc, api, map_id):
    (location,) = bulk(api, map_id, {"name": "a"})
    response = ogc.get(f"/collections/{map_id}/items/{location['id']}")
    assert response.status_code == 200 and response.mimetype == "application/geo+json"
    feature = response.get_json()
    assert feature["id"] == location["id"] and feature["properties"]["name"] == "a"
    assert {link["rel"] for link in feature["links"]} == {"self", "collection"}
    etag = response.headers["ETag"]
    again = ogc.get(f"/collections/{map_id}/items/{location['id']}", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.headers["ETag"] == etag and again.get_data() == b""
    error(ogc.get(f"/collections/{map_id}/items/nope"), 404, "NOT_FOUND")


def test_limit_is_clamped_and_bad_parameters_are_named(ogc, api, map_id):
    bulk(api, map_id, {"name": "a"}, {"name": "b"}, {"name": "c"})
    assert ogc.items(map_id, limit="100000")["numberReturned"] == 3
    details = validation_details(
        ogc.get(f"/collections/{map_id}/items?limit=0&bbox=1,2,3&datetime=yesterday&sort=name&foo=1")
    )
    assert set(details) == {"limit", "bbox", "datetime", "sort", "foo"}
    assert set(validation_details(ogc.get(f"/collections/{map_id}/items?limit=-1&bbox=0,10,1,5"))) == {
        "limit", "bbox",
    }
    assert "cursor" in validation_details(ogc.get(f"/collections/{map_id}/items?cursor=abc"))


def test_bbox_datetime_list_filters_and_equality(ogc, api, map_id):
    category = make_category(api, map_id, name="C")["id"]
    a, b, c = bulk(
        api,
        map_id,
        {"name": "Alpha", "lat": 10, "lng": 179.5, "categoryId": category, "address": "1 Rue"},
        {"name": "beta", "lat": 11, "lng": -179.5, "description": "ALPHA inside"},
        {"name": "gamma", "lat": 50, "lng": 0},
    )
    ids = lambda body: [feature["id"] for feature in body["features"]]  # noqa: E731
    assert ids(ogc.items(map_id, bbox="179,9,-179,12")) == [a["id"], b["id"]]
    assert ids(ogc.items(map_id, bbox="-1,49,0,50")) == [c["id"]]
    assert ids(ogc.items(map_id, bbox="-1,49,0,0,50,100")) == [c["id"]]
    assert ids(ogc.items(map_id, q="alpha")) == [a["id"], b["id"]]
    assert ids(ogc.items(map_id, categoryId=category)) == [a["id"]]
    assert ids(ogc.items(map_id, name="Alpha")) == [a["id"]]
    assert ids(ogc.items(map_id, name="alpha")) == []
    assert ids(ogc.items(map_id, address="1 Rue", q="alpha")) == [a["id"]]
    created = a["createdAt"]
    assert len(ids(ogc.items(map_id, datetime=created))) == 3
    assert len(ids(ogc.items(map_id, datetime=f"{created}/.."))) == 3
    assert ids(ogc.items(map_id, datetime="../2000-01-01T00:00:00Z")) == []
    assert ids(ogc.items(map_id, datetime="2000-01-01T00:00:00Z/")) == [a["id"], b["id"], c["id"]]
