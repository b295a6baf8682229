"""What is stored is what comes back, exactly, on SQLite and PostgreSQL alike."""

import json

import pytest
from sqlalchemy import Text, cast, select

from mapapi.extensions import db
from mapapi.storage.models import Location

from .factories import error_code, make_location, make_map, make_tag

EXTREME_PROPERTIES = {
    "bigInt": 10**30,
    "negativeBigInt": -(2**64) - 1,
    "largeFloat": 1.7976931348623157e308,
    "tinyFloat": 5e-324,
    "negativeZero": -0.0,
    "float": 1.0,
    "int": 1,
    "bool": True,
    "null": None,
    "text": "Zürich 東京 مرحبا e\u0301 👩🏽‍💻 \\ \" \n",
    "nested": {"list": [1, [2, [3, {"deep": "yes"}]]], "empty": {}},
    "zKeyOrder": {"b": 1, "a": 2},
}


def test_properties_with_extreme_numbers_and_unicode_round_trip(api):
    map_ = make_map(api)
    created = make_location(api, map_["id"], properties=EXTREME_PROPERTIES)
    fetched = api.get(f"/maps/{map_['id']}/locations/{created['id']}")
    raw = fetched.get_data(as_text=True)
    properties = fetched.get_json()["data"]["properties"]
    assert json.dumps(properties) == json.dumps(EXTREME_PROPERTIES)
    assert "1000000000000000000000000000000" in raw and "-0.0" in raw


def properties_text(response) -> str:
    """The ``properties`` of a location response, as the bytes sent."""
    raw = response.get_data(as_text=True)
    start = raw.index('"properties":') + len('"properties":')
    end = raw.index(',"externalId":', start)
    return raw[start:end]


def test_properties_are_stored_and_sent_as_compact_utf8_json(app, api):
    map_ = make_map(api)
    sent = {"Zürich": ["東京", 1.5, {"k": None}], "b": True}
    created = api.post(
        f"/maps/{map_['id']}/locations", json={"name": "n", "lat": 1, "lng": 2, "properties": sent}
    )
    compact = '{"Zürich":["東京",1.5,{"k":null}],"b":true}'
    with app.app_context():
        stored = db.session.scalar(select(cast(Location.properties, Text)))
    fetched = api.get(f"/maps/{map_['id']}/locations/{created.get_json()['data']['id']}")
    listed = api.get(f"/maps/{map_['id']}/locations")
    assert stored == compact
    assert properties_text(created) == properties_text(fetched) == compact
    assert properties_text(listed) == compact


@pytest.mark.parametrize("field, length", [("description", 10_000), ("title", 200)])
def test_longest_strings_are_stored_whole(api, field, length):
    value = ("é東👍" * length)[:length]
    created = make_map(api, **{field: value})
    fetched = api.get(f"/maps/{created['id']}").get_json()["data"]
    assert fetched[field] == value and len(fetched[field]) == length


def test_one_character_over_is_refused_the_same_way(api):
    response = api.post("/maps", json={"title": "t", "description": "é" * 10_001})
    assert response.status_code == 400
    assert error_code(response) == "VALIDATION_ERROR"
    assert list(response.get_json()["error"]["details"]) == ["description"]


def test_coordinates_keep_their_full_precision(api):
    map_ = make_map(api, centerLat=-89.99999999999999, centerLng=179.12345678901234, zoom=22)
    assert (map_["centerLat"], map_["centerLng"], map_["zoom"]) == (-89.99999999999999, 179.12345678901234, 22.0)
    location = make_location(api, map_["id"], lat=1e-300, lng=-180)
    fetched = api.get(f"/maps/{map_['id']}/locations/{location['id']}").get_json()["data"]
    assert (fetched["lat"], fetched["lng"]) == (1e-300, -180.0)


def test_text_is_not_normalized(api):
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    map_ = make_map(api)
    first = make_tag(api, map_["id"], name=composed)
    second = make_tag(api, map_["id"], name=decomposed)
    assert (first["name"], second["name"]) == (composed, decomposed)


@pytest.mark.parametrize(
    "body, field",
    [({"title": "a\u0000b"}, "title"), ({"title": "ok", "description": "\u0000"}, "description")],
)
def test_nul_is_refused_before_it_reaches_the_database(api, body, field):
    response = api.post("/maps", json=body)
    assert response.status_code == 400
    assert error_code(response) == "VALIDATION_ERROR"
    assert list(response.get_json()["error"]["details"]) == [field]
    assert api.get("/maps").get_json()["data"]["pagination"]["total"] == 0


def test_tag_names_compare_exactly_after_trimming(api):
    map_ = make_map(api)
    make_tag(api, map_["id"], name="Cafe")
    assert make_tag(api, map_["id"], name=" cafe ")["name"] == "cafe"
    duplicate = api.post(f"/maps/{map_['id']}/tags", json={"name": "  Cafe\t"})
    assert duplicate.status_code == 409 and error_code(duplicate) == "CONFLICT"
    names = [tag["name"] for tag in api.get(f"/maps/{map_['id']}/tags").get_json()["data"]["tags"]]
    assert names == ["Cafe", "cafe"]
