"""The compiled dumpers give exactly what marshmallow's dump gives."""

import json
from datetime import timedelta

from sqlalchemy import select

from mapapi.contract.jsonprovider import encode
from mapapi.contract.pagination import paginate
from mapapi.contract.schemas import LocationSchema
from mapapi.extensions import db
from mapapi.oauth.storage import OAuthGrant
from mapapi.services.location_reads import location_page, read_location
from mapapi.services.locations import LOCATION_LOADS
from mapapi.storage.models import (
    ApiKey,
    Category,
    Layer,
    Location,
    Map,
    Tag,
    Webhook,
    WebhookDelivery,
)
from mapapi.timeutil import utcnow

from .factories import make_category, make_layer, make_location, make_map, make_tag


def seed(api):
    """One of everything, with nulls, nested layers and ordered tags."""
    bare = make_map(api)
    full = make_map(api, title="Full", centerLat=1.5, centerLng=-2, zoom=3)
    category = make_category(api, full["id"], color="#abcdef")
    first, second = make_tag(api, full["id"], name="b"), make_tag(api, full["id"], name="a")
    layers = [make_layer(api, full["id"], name=n) for n in ("x", "y")]
    located = make_location(
        api, full["id"], categoryId=category["id"], tagIds=[first["id"], second["id"]],
        properties={"n": 1, "deep": [1.5, None, {"t": True}]},
    )  # fmt: skip
    api.put(
        f"/maps/{full['id']}/locations/{located['id']}/layers",
        json={"layerIds": [layers[1]["id"], layers[0]["id"]]},
    )
    make_location(api, bare["id"])
    # More than ten tags, in an order neither of ids nor of creation.
    many = [make_tag(api, bare["id"], name=f"t{n}")["id"] for n in range(12)]
    scrambled = [many[n] for n in (7, 2, 11, 0, 9, 4, 1, 10, 3, 8, 5, 6)]
    make_location(api, bare["id"], tagIds=scrambled)
    # Floats whose shortest text has 16 or 17 digits, or is tiny.
    make_location(api, bare["id"], lat=0.30000000000000004, lng=-179.99999999999997)
    make_location(api, bare["id"], lat=5e-324, lng=1.0000000000000002e-300)
    layer = make_layer(api, bare["id"], routeEnabled=True)
    on_layer = make_location(api, bare["id"], lat=89.99999999999999, lng=2)
    api.put(
        f"/maps/{bare['id']}/locations/{on_layer['id']}/layers", json={"layerIds": [layer["id"]]}
    )
    api.post("/keys", json={"name": "soon", "scope": "READ_ONLY",
                            "expiresAt": (utcnow() + timedelta(days=1)).isoformat()})  # fmt: skip
    revoked = api.post("/keys", json={"name": "gone", "scope": "READ_WRITE"}).get_json()["data"]
    api.delete(f"/keys/{revoked['id']}")
    hook = api.post("/webhooks", json={"url": "https://93.184.215.14/h", "events": ["map.*"],
                                       "mapId": bare["id"]}).get_json()["data"]  # fmt: skip
    api.post("/webhooks", json={"url": "https://93.184.215.14/i", "events": ["*"], "enabled": False})
    api.post(f"/webhooks/{hook['id']}/ping")


def samples():
    """A value of every kind the views respond with, keyed by response schema name."""
    keys = db.session.scalars(select(ApiKey)).all()
    keys[0].secret = "mk_live_example"  # noqa: S105 - a made-up secret
    locations = db.session.scalars(select(Location).options(*LOCATION_LOADS)).all()
    page = {"page": 1, "page_size": 50}
    lists = {
        "MapList": select(Map).order_by(Map.pk),
        "CategoryList": select(Category),
        "TagList": select(Tag),
        "LayerList": select(Layer),
        "KeyList": select(ApiKey),
        "LocationList": select(Location).options(*LOCATION_LOADS),
        "WebhookList": select(Webhook),
        "DeliveryList": select(WebhookDelivery),
        "GrantList": select(OAuthGrant),
    }
    yield from (("MapSchema", m) for m in db.session.scalars(select(Map)))
    yield from (("LocationSchema", loc) for loc in locations)
    yield from (("CategorySchema", c) for c in db.session.scalars(select(Category)))
    yield from (("TagSchema", t) for t in db.session.scalars(select(Tag)))
    yield from (("LayerSchema", layer) for layer in db.session.scalars(select(Layer)))
    yield from (("KeySchema", key) for key in keys)
    yield "CreatedKeySchema", keys[0]
    yield "BulkResultSchema", {"created": locations, "count": len(locations)}
    yield "DeletedSchema", {"id": "x", "deleted": True}
    yield "UpsertResultSchema", {"locations": locations, "created": 1, "updated": 0, "unchanged": 2}
    yield "BulkDeleteResultSchema", {"deleted": ["x", "y"], "count": 2}
    webhooks = db.session.scalars(select(Webhook)).all()
    yield from (("WebhookSchema", webhook) for webhook in webhooks)
    yield "CreatedWebhookSchema", webhooks[0]
    deliveries = db.session.scalars(select(WebhookDelivery)).all()
    assert deliveries
    yield from (("PingSchema", delivery) for delivery in deliveries)
    event = {"id": "7", "type": "map.deleted", "created_at": utcnow(), "map_id": "m", "data": {}}
    yield "EventFeedSchema", {"events": [event], "next": "7", "has_more": False}
    bucket = {"limit": 100, "remaining": 40, "reset": 1796677210, "window": "100 per hour"}
    yield "RateLimitsSchema", {"buckets": {"general": bucket, "map_creation": bucket, "bulk": bucket, "sync": bucket}}
    cluster = {"lat": 1.5, "lng": 2.5, "count": 3, "bbox": [2.0, 1.0, 3.0, 2.0]}
    yield "ClustersSchema", {"clusters": [cluster], "locations": locations, "total": 3 + len(locations)}
    yield "FeatureCollectionSchema", {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "id": loc.id,
                "geometry": {"type": "Point", "coordinates": [loc.lng, loc.lat]},
                "properties": {
                    "name": loc.name,
                    "description": loc.description,
                    "address": loc.address,
                    "category_id": loc.category_id,
                    "tag_ids": loc.tag_ids,
                    "layer_ids": [layer.id for layer in loc.layers],
                    "properties": loc.properties,
                    "external_id": loc.external_id,
                    "created_at": loc.created_at,
                    "updated_at": loc.updated_at,
                },
            }
            for loc in locations
        ],
    }
    for name, statement in lists.items():
        yield f"{name}Schema", paginate(statement, page)


def test_every_response_schema_compiles_to_the_same_output(app, api):
    seed(api)
    operations = {
        type(view.operation.response).__name__: view.operation
        for view in app.view_functions.values()
        if hasattr(view, "operation")
    }
    covered = set()
    with app.app_context():
        for schema_name, value in samples():
            declared = operations[schema_name]
            # As JSON text: 1 and 1.0 differ there, and so does key order.
            compiled = json.dumps(declared.dump(value))
            assert compiled == json.dumps(declared.response.dump(value)), schema_name
            covered.add(schema_name)
    assert covered == set(operations)


def test_locations_read_in_core_are_what_the_schema_dumps(app, api):
    """The Core read path (lists and GET of locations) gives, key for key and
    in the same order, what LocationSchema dumps from the ORM objects."""
    seed(api)
    schema = LocationSchema()
    with app.test_request_context():
        locations = db.session.scalars(
            select(Location).options(*LOCATION_LOADS).order_by(Location.pk)
        ).all()
        expected = [schema.dump(location) for location in locations]
        read = [read_location(location.map_id, location.id) for location in locations]
        map_ids = list(dict.fromkeys(location.map_id for location in locations))
        # Pages are JSON the database wrote: compared as text, map by map.
        paged = [encode(location_page(m, 1, 100)["locations"]) for m in map_ids]
        by_map = [encode([d for d in expected if d["mapId"] == m]) for m in map_ids]
        missing = read_location(locations[0].map_id, "x" * 22)
    assert any(location["tagIds"] and location["layers"] for location in expected)
    # As JSON text: 1 and 1.0 differ there, and so do 1 and true.
    assert encode(read) == encode(expected)
    assert paged == by_map
    assert missing is None
