"""Pages of locations written as JSON by the database answer, byte for byte,
what LocationSchema's dump of the same locations, encoded by the API's
encoder, answers: unicode and control characters, nulls, integers beyond
64 bits in properties, floats of every length, tags in the order given and
layers by their order; plain pages and filtered ones, on both databases."""

from sqlalchemy import select

from mapapi.contract.documents import document_text
from mapapi.contract.jsonprovider import RawJSON, encode
from mapapi.contract.schemas import LocationSchema
from mapapi.extensions import db
from mapapi.services.location_reads import location_page
from mapapi.services.locations import LOCATION_LOADS
from mapapi.storage.models import Location

from .factories import make_category, make_layer, make_location, make_map, make_tag

TEXTS = [
    "Café ☕ 😀",
    'quote " and \\ backslash',
    "controls \x01\x1f\t\n\r\x7f",
    "\u2028 </script>",
    "",
]
# Whole, 15, 16 and 17 significant digits, zero and its negative, the edges.
COORDINATES = [
    (0.0, -0.0), (2.0, -3.0), (48.8566, 2.3522), (0.30000000000000004, -179.99999999999997),
    (0.7999999999999999, 179.99999999999997), (89.99999999999999, -90.0), (0.0001, -0.00012345),
]  # fmt: skip
PROPERTIES = [
    {},
    {
        "big": 2**70,
        "negative": -(2**65),
        "limit": 2**63,
        "nested": [{"deep": [None, True]}],
    },
    {
        "ü": "ünïcödé 😀",
        "float": 1.5e300,
        "whole": 2.0,
        "tiny": 5e-324,
        "text": "\x01\u2028",
    },
]


def expected_body(api, path: str, locations: list[Location]) -> bytes:
    """The answer as LocationSchema dumps ``locations``, with the answer's
    pagination; ``properties`` embedded as stored, as every answer has them
    (the encoder's fallback for integers beyond 64 bits would escape the
    rest of the body)."""
    pagination = api.get(path).get_json()["data"]["pagination"]
    dumped = [LocationSchema().dump(location) for location in locations]
    for location in dumped:
        location["properties"] = RawJSON(document_text(location["properties"]))
    return encode({"data": {"locations": dumped, "pagination": pagination}}) + b"\n"


def stored(map_id: str, order=Location.pk) -> list[Location]:
    statement = select(Location).options(*LOCATION_LOADS).where(Location.map_id == map_id)
    return db.session.scalars(statement.order_by(order, Location.pk)).all()


def seed_variety(api) -> str:
    map_id = make_map(api)["id"]
    category = make_category(api, map_id)
    tags = [make_tag(api, map_id, name=f"t{n}")["id"] for n in range(12)]
    layers = [make_layer(api, map_id, name=f"l{n}", routeEnabled=n == 1)["id"] for n in range(3)]
    number = 0
    for text in TEXTS:
        for lat, lng in COORDINATES:
            number += 1
            fields = {
                "name": f"{text or 'x'} {number}", "lat": lat, "lng": lng, "description": text,
                "address": text[::-1], "properties": PROPERTIES[number % len(PROPERTIES)],
                "tagIds": [tags[(number * 5 + k) % 12] for k in range(number % 5)],
                "layerIds": [layers[(number + k) % 3] for k in range(number % 4)],
            }  # fmt: skip
            if number % 3 == 0:
                fields["categoryId"] = category["id"]
            if number % 4 == 0:
                fields["externalId"] = f"ext-{text} {number}"
            make_location(api, map_id, **fields)
    # Layers' order changed after the memberships were made.
    assert api.put(f"/maps/{map_id}/layers/{layers[2]}", json={"order": 0}).status_code == 200
    return map_id


def test_pages_written_by_the_database_are_the_schema_dump(app, api):
    map_id = seed_variety(api)
    category = api.get(f"/maps/{map_id}/categories").get_json()["data"]["categories"][0]["id"]
    base = f"/maps/{map_id}/locations"
    with app.test_request_context():
        everything = stored(map_id)
        by_name = sorted(everything, key=lambda loc: (loc.name.lower(), loc.pk))
        in_category = [loc for loc in everything if loc.category_id == category]
        cases = {
            f"{base}?pageSize=100": everything,
            f"{base}?pageSize=7&page=2": everything[7:14],
            f"{base}?pageSize=10&sort=name": by_name[:10],
            f"{base}?sort=-createdAt&pageSize=5": everything[::-1][:5],
            f"{base}?categoryId={category}": in_category,
            f"{base}?pageSize=100&page=9": [],
        }
        # Written by the database: one JSON value, not dicts dumped here.
        assert isinstance(location_page(map_id, 1, 100)["locations"], RawJSON)
    assert any(loc.tag_ids and loc.layers for loc in everything)
    for path, locations in cases.items():
        response = api.get(path)
        assert response.status_code == 200
        assert response.data == expected_body(api, path, locations), path


def test_a_filtered_page_of_many_is_written_by_the_database(app, api):
    """More than the filtered page reads the keys of at once (500): the
    database counts, orders and writes the page."""
    map_id = make_map(api)["id"]
    category = make_category(api, map_id)["id"]
    layer = make_layer(api, map_id)["id"]
    for batch in range(6):
        items = [
            {"name": f"Ünï {batch * 100 + n}", "lat": 10 + n / 7, "lng": -n / 3,
             "categoryId": category, "layerIds": [layer] if n % 2 else [],
             "properties": {"n": 2**64 + n}}
            for n in range(100)
        ]  # fmt: skip
        assert (
            api.post(f"/maps/{map_id}/locations/bulk", json={"locations": items}).status_code == 201
        )
    path = f"/maps/{map_id}/locations?categoryId={category}&sort=-name&pageSize=100&page=2"
    with app.test_request_context():
        ordered = stored(map_id, Location.name.desc())
        ordered.sort(key=lambda loc: loc.name.lower(), reverse=True)
    response = api.get(path)
    assert response.get_json()["data"]["pagination"]["total"] == 600
    assert response.data == expected_body(api, path, ordered[100:200])


def test_coordinates_the_database_cannot_write_alike_fall_back_to_the_dump(app, api):
    """Below 0.0001 the databases write an exponent where the API's encoder
    does not: such a page is dumped as before, and answers the same bytes."""
    map_id = make_map(api)["id"]
    make_location(api, map_id, lat=1e-05, lng=-3.5e-07, properties={"big": 2**80})
    make_location(api, map_id, lat=1.5, lng=2.5)
    path = f"/maps/{map_id}/locations"
    with app.test_request_context():
        everything = stored(map_id)
        assert not isinstance(location_page(map_id, 1, 50)["locations"], RawJSON)
    assert api.get(path).data == expected_body(api, path, everything)
