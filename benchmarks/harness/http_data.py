"""The same data on any version of mapapi, seeded through its HTTP API.

``--baseline`` serves two versions whose schemas differ, so the in-process
seeding of data.py (the current models) cannot fill the older one's
database. Both answer the v1 API alike: maps, categories, tags, layers,
bulk creates and layer memberships go in through it, the same requests in
the same order (one seeded random generator) on each.
"""

from __future__ import annotations

import http.client
import json
import random
from urllib.parse import urlsplit

from .data import (
    CATEGORY_NAMES,
    CITIES,
    LAYER_COLORS,
    LAYER_NAMES,
    TAG_NAMES,
    THEMES,
    Seeded,
    SeededMap,
    location_fields,
    membership_sets,
)
from .settings import API, BULK_SIZE, LOCATIONS_PER_MAP


class ApiClient:
    """One keep-alive connection to a server, with the account's key."""

    def __init__(self, base_url: str, secret: str):
        address = urlsplit(base_url)
        self.connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
        self.headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}

    def send(self, method: str, path: str, body: dict, expected: int) -> dict:
        """The answer's ``data``; anything but the ``expected`` status stops the run."""
        self.connection.request(method, API + path, json.dumps(body), self.headers)
        response = self.connection.getresponse()
        answer = response.read()
        if response.status != expected:
            raise SystemExit(
                f"seeding over HTTP: {method} {API}{path} answered {response.status}, "
                f"not {expected}: {answer[:400]!r}"
            )
        return json.loads(answer)["data"]

    def close(self) -> None:
        self.connection.close()


def seed_over_http(base_url: str, secret: str) -> Seeded:
    """A map of LOCATIONS_PER_MAP locations to read, and one with no location to write into."""
    rng = random.Random(20261121)
    client = ApiClient(base_url, secret)
    counts = {"maps": 0, "locations": 0, "location_tags": 0, "location_layers": 0}
    try:
        reads = add_map(client, rng, LOCATIONS_PER_MAP, counts)
        writes = add_map(client, rng, 0, counts)
        first = client.send("GET", f"/maps/{reads.id}/locations/{reads.location_ids[0]}", {}, 200)
    finally:
        client.close()
    # build_scenarios also wants the big map of the main table: the comparison
    # runs none of its scenarios, so the map to read stands in for it.
    return Seeded(
        secret=secret,
        rich=reads,
        writes=writes,
        big=reads,
        layer_sets=membership_sets(writes.layer_ids),
        counts=counts,
        big_point=(first["lng"], first["lat"]),
        rare_tag=reads.tag_ids[-1],
    )


def add_map(client: ApiClient, rng: random.Random, locations: int, counts: dict) -> SeededMap:
    """A map with data.py's tags, layers and categories, then ``locations`` locations."""
    city, country, lat, lng = rng.choice(CITIES)
    title = f"{rng.choice(THEMES)} {counts['maps'] + 1}"
    body = {
        "title": title,
        "description": f"{title}: our picks in {city}.",
        "country": country,
        "city": city,
        "centerLat": lat,
        "centerLng": lng,
        "zoom": 12.5,
    }
    map_id = client.send("POST", "/maps", body, 201)["id"]

    def children(kind: str, bodies: list[dict]) -> list[str]:
        return [client.send("POST", f"/maps/{map_id}/{kind}", one, 201)["id"] for one in bodies]

    layer_bodies = [
        {"name": name, "color": color, "routeEnabled": position == 0}
        for position, (name, color) in enumerate(zip(LAYER_NAMES, LAYER_COLORS, strict=True))
    ]
    seeded = SeededMap(
        id=map_id,
        tag_ids=children("tags", [{"name": name} for name in TAG_NAMES]),
        layer_ids=children("layers", layer_bodies),
        category_ids=children(
            "categories",
            [{"name": name, "color": "#111827", "icon": name.lower()} for name in CATEGORY_NAMES],
        ),
    )
    counts["maps"] += 1
    add_locations(client, rng, seeded, (lat, lng, city), locations, counts)
    return seeded


def add_locations(client, rng, seeded: SeededMap, where: tuple, count: int, counts: dict):
    """Bulk creates of 100 locations with 1-4 tags each, then 1-3 layers for each
    location (a create takes no layers: PUT .../layers sets them)."""
    for start in range(0, count, BULK_SIZE):
        items = [location_item(rng, where, seeded) for _ in range(min(BULK_SIZE, count - start))]
        path = f"/maps/{seeded.id}/locations/bulk"
        created = client.send("POST", path, {"locations": items}, 201)["created"]
        seeded.location_ids += [location["id"] for location in created]
        counts["locations"] += len(items)
        counts["location_tags"] += sum(len(item["tagIds"]) for item in items)
    for location_id in seeded.location_ids:
        layers = rng.sample(seeded.layer_ids, rng.randint(1, 3))
        path = f"/maps/{seeded.id}/locations/{location_id}/layers"
        client.send("PUT", path, {"layerIds": layers}, 200)
        counts["location_layers"] += len(layers)


def location_item(rng: random.Random, where: tuple, seeded: SeededMap) -> dict:
    """One item of a bulk create: data.py's fields under the API's names, with 1-4 tags."""
    fields = location_fields(rng, where, seeded.category_ids)
    fields["categoryId"] = fields.pop("category_id")
    return fields | {"tagIds": rng.sample(seeded.tag_ids, rng.randint(1, 4))}
