"""Soak: a bounded mixed workload of 32 clients against a waitress server.

Several accounts, each with eight client threads, read, create, update and
delete maps, locations, categories, tags and layers, send bulks (some with a
bad item, which must create nothing), replace layer memberships, move layers,
race each other creating the same tag names on a shared map, create, move and
delete the layers of another shared map all at once, and race past the limit
of 10 active API keys. Every thread owns the maps it creates, so a client-side
ledger of the acknowledged writes says exactly what the database must hold
(down to each map's layer order and each location's memberships); shared
things (the race map's tags, the shared map's layers, the keys) are ledgered
as sets of acknowledged creations minus acknowledged deletions.

At the end: no 5xx, no unexpected status, and the database, read through the
API as each account, matches the ledger exactly.

``MAPAPI_SOAK_SECONDS`` sets the duration (default 60). On
``MAPAPI_TEST_BACKEND=postgres`` the server runs on PostgreSQL with rate
limits in Redis.
"""

import os
import random
import threading
import time
import uuid
from collections import Counter

import pytest
import requests

from .factories import create_account, create_key

API = "/api/v1"
SOAK_SECONDS = float(os.environ.get("MAPAPI_SOAK_SECONDS", "60"))
CLIENTS = 32
ACCOUNTS = 4
MAPS_PER_CLIENT = 3
RACE_TAG_NAMES = [f"race-{number}" for number in range(12)]
MAX_ACTIVE_KEYS = 10
HTTP_TIMEOUT = (5, 60)
MIN_REQUESTS_PER_SECOND = 20  # a tenth of what this serves on a small machine


@pytest.fixture
def soak_config(app_config):
    """Limits far above what the soak sends, so none of its requests is a 429."""
    app_config.update(
        RATELIMIT_GENERAL="100000000 per hour",
        RATELIMIT_MAP_CREATE="100000000 per hour",
        RATELIMIT_BULK="100000000 per hour",
    )
    return app_config


# --- the ledger ---------------------------------------------------------------------


class MapModel:
    """One map as its owning thread knows it from acknowledged writes."""

    def __init__(self, map_id: str, title: str):
        self.id = map_id
        self.title = title
        self.locations: dict[str, dict] = {}  # id -> {"category", "tags", "layers", "name"}
        self.layers: list[str] = []  # ids by order
        self.tags: dict[str, str] = {}  # name -> id
        self.categories: set[str] = set()


class Account:
    def __init__(self, index: int, email: str, secret: str):
        self.index = index
        self.email = email
        self.secret = secret
        self.lock = threading.Lock()
        self.race_map = None
        self.layer_map = None
        self.shared_layers_created: set[str] = set()
        self.shared_layers_deleted: set[str] = set()
        self.primary_key_id = None
        self.race_tags_created: dict[str, str] = {}  # id -> name
        self.race_tags_deleted: set[str] = set()
        self.keys_created: set[str] = set()
        self.keys_revoked: set[str] = set()
        self.maps_by_client: dict[int, list[str]] = {}
        self.deleted_maps: set[str] = set()

    def live_race_tags(self) -> dict[str, str]:
        with self.lock:
            return {i: n for i, n in self.race_tags_created.items() if i not in self.race_tags_deleted}

    def live_shared_layers(self) -> set[str]:
        with self.lock:
            return self.shared_layers_created - self.shared_layers_deleted

    def live_keys(self) -> set[str]:
        with self.lock:
            return self.keys_created - self.keys_revoked

    def some_map(self, rng) -> str | None:
        with self.lock:
            maps = [m for ids in self.maps_by_client.values() for m in ids]
        return rng.choice(maps) if maps else None


class Tally:
    """What every client saw, shared by all threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.statuses = Counter()
        self.server_errors: list = []
        self.unexpected: list = []
        self.transport_errors: list = []
        self.expected_4xx = Counter()

    def seen(self, method, path, status, text, expected) -> None:
        with self.lock:
            self.requests += 1
            self.statuses[status] += 1
            if status >= 500:
                self.server_errors.append((method, path, status, text[:300]))
            elif status not in expected:
                self.unexpected.append((method, path, status, text[:300], sorted(expected)))
            elif status >= 400:
                self.expected_4xx[status] += 1

    def wrong(self, what) -> None:
        with self.lock:
            self.unexpected.append(what)


# --- one client thread ----------------------------------------------------------------


class Client:
    def __init__(self, index, account, accounts, base, tally, deadline, seed):
        self.index = index
        self.account = account
        self.accounts = accounts
        self.base = base
        self.tally = tally
        self.deadline = deadline
        self.rng = random.Random(seed)
        self.maps: list[MapModel] = []
        self.session = None
        self.failed = False

    # transport

    def call(self, method: str, path: str, expected, body=None, session=None):
        """The response's data (or error code) when the status was expected, else None."""
        try:
            response = (session or self.session).request(
                method, self.base + API + path, json=body, timeout=HTTP_TIMEOUT
            )
        except requests.RequestException as error:
            with self.tally.lock:
                self.tally.transport_errors.append((method, path, repr(error)))
            self.failed = True
            return None
        self.tally.seen(method, path, response.status_code, response.text, expected)
        if response.status_code not in expected:
            return None
        payload = response.json()
        if response.status_code >= 400:
            return payload["error"]["code"]
        return payload["data"]

    def together(self, calls) -> list:
        """Send ``calls`` (method, path, expected, body) at the same moment, each on a
        connection of its own; their results in order."""
        barrier = threading.Barrier(len(calls))
        results = [None] * len(calls)

        def fire(index, call):
            with requests.Session() as session:
                session.headers["Authorization"] = f"Bearer {self.account.secret}"
                try:
                    barrier.wait(timeout=10)
                except threading.BrokenBarrierError:
                    pass
                results[index] = self.call(*call, session=session)

        threads = [threading.Thread(target=fire, args=item, daemon=True) for item in enumerate(calls)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=HTTP_TIMEOUT[1] + 20)
        if any(thread.is_alive() for thread in threads):
            self.tally.wrong(("a racing request hung", calls[0][:2]))
            self.failed = True
        return results

    def check(self, condition: bool, what) -> bool:
        if not condition:
            self.tally.wrong(what)
        return condition

    def run(self) -> None:
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {self.account.secret}"
        operations, weights = zip(*self.operations(), strict=True)
        try:
            for _ in range(1_000_000):
                if time.monotonic() >= self.deadline or self.failed:
                    return
                self.rng.choices(operations, weights)[0]()
        except Exception as error:  # noqa: BLE001 - reported, never swallowed
            self.tally.wrong(("client crashed", self.index, repr(error)))
        finally:
            self.session.close()

    def operations(self):
        if self.index < len(self.accounts):
            # One client per account also starts races: several requests released at once.
            storms = [(self.tag_storm, 4), (self.key_storm, 3)]
        else:
            storms = []
        return storms + [
            (self.list_maps, 4), (self.get_map, 4), (self.list_locations, 5),
            (self.get_location, 5), (self.list_layers, 3), (self.list_race_tags, 3),
            (self.read_sibling_map, 3), (self.read_foreign_map, 2), (self.list_keys, 1),
            (self.create_or_delete_map, 2), (self.update_map, 2),
            (self.create_location, 8), (self.bulk_create, 3), (self.bad_bulk, 1),
            (self.update_location, 5), (self.delete_location, 3),
            (self.create_category, 2), (self.update_category, 1), (self.delete_category, 1),
            (self.create_tag, 2), (self.delete_tag, 1),
            (self.create_layer, 3), (self.move_layer, 4), (self.delete_layer, 1),
            (self.replace_memberships, 5),
            (self.race_tag_create, 5), (self.race_tag_delete, 2),
            (self.race_key_create, 2), (self.race_key_revoke, 1),
            (self.shared_layer_create, 2), (self.shared_layer_move, 4),
            (self.shared_layer_delete, 1), (self.shared_layer_list, 2),
        ]

    def own_map(self) -> MapModel:
        if not self.maps:
            self.create_map()
        return self.rng.choice(self.maps) if self.maps else None

    def publish_maps(self) -> None:
        with self.account.lock:
            self.account.maps_by_client[self.index] = [m.id for m in self.maps]

    # reads

    def list_maps(self):
        self.call("GET", f"/maps?pageSize={self.rng.randint(1, 100)}", {200})

    def get_map(self):
        model = self.own_map()
        if model:
            data = self.call("GET", f"/maps/{model.id}", {200})
            if data:
                self.check(data["title"] == model.title, ("map title", model.id, data["title"]))

    def list_locations(self):
        model = self.own_map()
        if model:
            data = self.call("GET", f"/maps/{model.id}/locations?page={self.rng.randint(1, 3)}", {200})
            if data:
                total = data["pagination"]["total"]
                self.check(total == len(model.locations), ("location count", model.id, total))

    def get_location(self):
        model = self.own_map()
        if model and model.locations:
            location_id = self.rng.choice(list(model.locations))
            data = self.call("GET", f"/maps/{model.id}/locations/{location_id}", {200})
            if data:
                self.check_location(model, data)

    def list_layers(self):
        model = self.own_map()
        if model:
            data = self.call("GET", f"/maps/{model.id}/layers?pageSize=100", {200})
            if data:
                self.check([layer["id"] for layer in data["layers"]] == model.layers,
                           ("layer order", model.id))
                self.check([layer["order"] for layer in data["layers"]] == list(range(len(model.layers))),
                           ("layer positions", model.id))

    def list_race_tags(self):
        data = self.call("GET", f"/maps/{self.account.race_map}/tags?pageSize=100", {200})
        if data:
            names = [tag["name"] for tag in data["tags"]]
            self.check(len(names) == len(set(names)), ("duplicate tag names", names))

    def read_sibling_map(self):
        """A map of another thread of this account: it may just have been deleted."""
        map_id = self.account.some_map(self.rng)
        if map_id:
            self.call("GET", f"/maps/{map_id}/locations?pageSize=5", {200, 404})

    def read_foreign_map(self):
        """Another account's map is never visible, however busy the server is."""
        other = self.rng.choice([a for a in self.accounts if a is not self.account])
        map_id = other.some_map(self.rng) or other.race_map
        code = self.call("GET", f"/maps/{map_id}", {404})
        if code:
            self.check(code == "NOT_FOUND", ("foreign map", code))

    def list_keys(self):
        data = self.call("GET", "/keys?pageSize=100", {200})
        if data:
            active = [k for k in data["keys"] if k["status"] == "active"]
            self.check(len(active) <= MAX_ACTIVE_KEYS, ("more than 10 active keys", len(active)))

    # maps

    def create_map(self):
        title = f"Map {uuid.uuid4().hex[:10]}"
        data = self.call("POST", "/maps", {201}, {"title": title, "city": "Soak"})
        if data:
            self.maps.append(MapModel(data["id"], title))
            self.publish_maps()

    def create_or_delete_map(self):
        if len(self.maps) < MAPS_PER_CLIENT:
            self.create_map()
            return
        model = self.maps[0]
        data = self.call("DELETE", f"/maps/{model.id}", {200})
        if data:
            self.maps.pop(0)
            self.publish_maps()
            with self.account.lock:
                self.account.deleted_maps.add(model.id)

    def update_map(self):
        model = self.own_map()
        if model:
            title = f"Renamed {uuid.uuid4().hex[:10]}"
            data = self.call("PUT", f"/maps/{model.id}", {200}, {"title": title, "public": True})
            if data:
                model.title = title

    # locations

    def location_body(self, model: MapModel) -> dict:
        body = {
            "name": f"Spot {uuid.uuid4().hex[:8]}",
            "lat": self.rng.uniform(-90, 90),
            "lng": self.rng.uniform(-180, 180),
        }
        if model.categories and self.rng.random() < 0.5:
            body["categoryId"] = self.rng.choice(sorted(model.categories))
        if model.tags and self.rng.random() < 0.5:
            body["tagIds"] = self.rng.sample(sorted(model.tags.values()), min(3, len(model.tags)))
        return body

    def remember_location(self, model: MapModel, body: dict, data: dict) -> None:
        model.locations[data["id"]] = {
            "name": body["name"],
            "category": body.get("categoryId"),
            "tags": list(body.get("tagIds", [])),
            "layers": set(),
        }
        self.check_location(model, data)

    def check_location(self, model: MapModel, data: dict) -> None:
        expected = model.locations[data["id"]]
        layer_ids = {layer["id"] for layer in data["layers"]}
        self.check(
            (data["name"], data["categoryId"], data["tagIds"], layer_ids)
            == (expected["name"], expected["category"], expected["tags"], expected["layers"]),
            ("location", model.id, data["id"], data, expected),
        )

    def create_location(self):
        model = self.own_map()
        if model:
            body = self.location_body(model)
            data = self.call("POST", f"/maps/{model.id}/locations", {201}, body)
            if data:
                self.remember_location(model, body, data)

    def bulk_create(self):
        model = self.own_map()
        if model:
            bodies = [self.location_body(model) for _ in range(self.rng.randint(1, 20))]
            data = self.call("POST", f"/maps/{model.id}/locations/bulk", {201}, {"locations": bodies})
            if data and self.check(data["count"] == len(bodies), ("bulk count", data["count"])):
                for body, created in zip(bodies, data["created"], strict=True):
                    self.remember_location(model, body, created)

    def bad_bulk(self):
        """One bad item among good ones: nothing is created (the final counts show it)."""
        model = self.own_map()
        if model:
            bodies = [self.location_body(model) for _ in range(self.rng.randint(2, 20))]
            bodies[self.rng.randrange(len(bodies))]["lat"] = 91
            code = self.call("POST", f"/maps/{model.id}/locations/bulk", {400}, {"locations": bodies})
            if code:
                self.check(code == "VALIDATION_ERROR", ("bad bulk", code))

    def update_location(self):
        model = self.own_map()
        if model and model.locations:
            location_id = self.rng.choice(list(model.locations))
            body = {"name": f"Moved {uuid.uuid4().hex[:8]}", "lat": self.rng.uniform(-90, 90)}
            if self.rng.random() < 0.3:
                body["categoryId"] = (
                    self.rng.choice(sorted(model.categories)) if model.categories else None
                )
            data = self.call("PUT", f"/maps/{model.id}/locations/{location_id}", {200}, body)
            if data:
                expected = model.locations[location_id]
                expected["name"] = body["name"]
                expected["category"] = body.get("categoryId", expected["category"])
                self.check_location(model, data)

    def delete_location(self):
        model = self.own_map()
        if model and model.locations:
            location_id = self.rng.choice(list(model.locations))
            if self.call("DELETE", f"/maps/{model.id}/locations/{location_id}", {200}):
                del model.locations[location_id]

    def replace_memberships(self):
        model = self.own_map()
        if model and model.locations:
            location_id = self.rng.choice(list(model.locations))
            # Duplicates collapse; none at all empties the set.
            count = self.rng.randint(0, 4) if model.layers else 0
            chosen = [self.rng.choice(model.layers) for _ in range(count)]
            data = self.call(
                "PUT", f"/maps/{model.id}/locations/{location_id}/layers", {200}, {"layerIds": chosen}
            )
            if data:
                model.locations[location_id]["layers"] = set(chosen)
                self.check_location(model, data)
                orders = [layer["order"] for layer in data["layers"]]
                self.check(orders == sorted(orders), ("membership layers by order", orders))

    # categories and the map's own tags

    def create_category(self):
        model = self.own_map()
        if model:
            data = self.call("POST", f"/maps/{model.id}/categories", {201},
                             {"name": f"Cat {uuid.uuid4().hex[:6]}", "color": "#aabbcc"})
            if data:
                model.categories.add(data["id"])

    def update_category(self):
        model = self.own_map()
        if model and model.categories:
            category_id = self.rng.choice(sorted(model.categories))
            self.call("PUT", f"/maps/{model.id}/categories/{category_id}", {200}, {"icon": "pin"})

    def delete_category(self):
        model = self.own_map()
        if model and model.categories:
            category_id = self.rng.choice(sorted(model.categories))
            if self.call("DELETE", f"/maps/{model.id}/categories/{category_id}", {200}):
                model.categories.discard(category_id)
                for location in model.locations.values():
                    if location["category"] == category_id:
                        location["category"] = None

    def create_tag(self):
        """A new name, or (sometimes) one the map has: that one is a CONFLICT."""
        model = self.own_map()
        if not model:
            return
        if model.tags and self.rng.random() < 0.25:
            name = self.rng.choice(sorted(model.tags))
            code = self.call("POST", f"/maps/{model.id}/tags", {409}, {"name": f"  {name} "})
            if code:
                self.check(code == "CONFLICT", ("duplicate tag", code))
            return
        name = f"tag-{uuid.uuid4().hex[:8]}"
        data = self.call("POST", f"/maps/{model.id}/tags", {201}, {"name": name})
        if data:
            model.tags[name] = data["id"]

    def delete_tag(self):
        model = self.own_map()
        if model and model.tags:
            name = self.rng.choice(sorted(model.tags))
            tag_id = model.tags[name]
            if self.call("DELETE", f"/maps/{model.id}/tags/{tag_id}", {200}):
                del model.tags[name]
                for location in model.locations.values():
                    if tag_id in location["tags"]:
                        location["tags"].remove(tag_id)

    # layers

    def create_layer(self):
        model = self.own_map()
        if not model:
            return
        body = {"name": f"Layer {uuid.uuid4().hex[:6]}"}
        position = len(model.layers)
        if self.rng.random() < 0.5:
            body["order"] = self.rng.randint(0, len(model.layers) + 2)
            position = min(body["order"], len(model.layers))
        data = self.call("POST", f"/maps/{model.id}/layers", {201}, body)
        if data:
            model.layers.insert(position, data["id"])
            self.check(data["order"] == position, ("layer created at", data["order"], position))

    def move_layer(self):
        model = self.own_map()
        if not model or not model.layers:
            return
        layer_id = self.rng.choice(model.layers)
        order = self.rng.randint(0, len(model.layers) + 1)
        data = self.call("PUT", f"/maps/{model.id}/layers/{layer_id}", {200}, {"order": order})
        if data:
            model.layers.remove(layer_id)
            model.layers.insert(min(order, len(model.layers)), layer_id)
            self.check(data["order"] == model.layers.index(layer_id), ("layer moved to", data["order"]))

    def delete_layer(self):
        model = self.own_map()
        if model and model.layers:
            layer_id = self.rng.choice(model.layers)
            if self.call("DELETE", f"/maps/{model.id}/layers/{layer_id}", {200}):
                model.layers.remove(layer_id)
                for location in model.locations.values():
                    location["layers"].discard(layer_id)

    # races between the threads of one account

    def race_tag_create(self):
        name = self.rng.choice(RACE_TAG_NAMES)
        if self.rng.random() < 0.3:
            name = f"  {name}\t"  # the same name, once trimmed
        self.record_race_tags(
            [self.call("POST", f"/maps/{self.account.race_map}/tags", {201, 409}, {"name": name})]
        )

    def race_tag_delete(self):
        self.delete_one_of(
            self.account.live_race_tags(),
            f"/maps/{self.account.race_map}/tags/{{}}",
            self.account.race_tags_deleted,
        )

    def shared_layer_create(self):
        body = {"name": f"Shared {uuid.uuid4().hex[:6]}"}
        if self.rng.random() < 0.5:
            body["order"] = self.rng.randint(0, 12)
        data = self.call("POST", f"/maps/{self.account.layer_map}/layers", {201}, body)
        if data:
            with self.account.lock:
                self.account.shared_layers_created.add(data["id"])

    def shared_layer_move(self):
        live = self.account.live_shared_layers()
        if live:
            layer_id = self.rng.choice(sorted(live))
            body = {"order": self.rng.randint(0, 12), "color": self.rng.choice(["#112233", "#445566"])}
            # Another thread may have deleted it a moment ago.
            self.call("PUT", f"/maps/{self.account.layer_map}/layers/{layer_id}", {200, 404}, body)

    def shared_layer_delete(self):
        live = self.account.live_shared_layers()
        if len(live) > 3:
            layer_id = self.rng.choice(sorted(live))
            result = self.call("DELETE", f"/maps/{self.account.layer_map}/layers/{layer_id}", {200, 404})
            if isinstance(result, dict):
                with self.account.lock:
                    self.account.shared_layers_deleted.add(layer_id)

    def shared_layer_list(self):
        data = self.call("GET", f"/maps/{self.account.layer_map}/layers?pageSize=100", {200})
        if data:
            orders = [layer["order"] for layer in data["layers"]]
            self.check(orders == list(range(len(orders))), ("shared layer positions", orders))

    def tag_storm(self):
        """Six creations of one name on the race map, released together: one wins."""
        name = self.rng.choice(RACE_TAG_NAMES)
        for tag_id, existing in self.account.live_race_tags().items():
            if existing == name:
                if isinstance(self.call("DELETE", f"/maps/{self.account.race_map}/tags/{tag_id}",
                                        {200, 404}), dict):
                    with self.account.lock:
                        self.account.race_tags_deleted.add(tag_id)
        bodies = [{"name": name if number % 2 else f" {name} "} for number in range(6)]
        results = self.together(
            [("POST", f"/maps/{self.account.race_map}/tags", {201, 409}, body) for body in bodies]
        )
        self.record_race_tags(results)

    def record_race_tags(self, results) -> None:
        for result in results:
            if isinstance(result, dict):
                with self.account.lock:
                    self.account.race_tags_created[result["id"]] = result["name"]
            elif result is not None:
                self.check(result == "CONFLICT", ("race tag", result))

    def key_storm(self):
        """Free up to three places, then ask for six keys at once: never an 11th."""
        for key_id in sorted(self.account.live_keys())[:3]:
            if isinstance(self.call("DELETE", f"/keys/{key_id}", {200, 404}), dict):
                with self.account.lock:
                    self.account.keys_revoked.add(key_id)
        body = {"name": f"storm {self.index}", "scope": "READ_ONLY"}
        self.record_keys(self.together([("POST", "/keys", {201, 409}, body)] * 6))

    def record_keys(self, results) -> None:
        for result in results:
            if isinstance(result, dict):
                with self.account.lock:
                    self.account.keys_created.add(result["id"])
            elif result is not None:
                self.check(result == "CONFLICT", ("key race", result))

    def race_key_create(self):
        body = {"name": f"soak {self.index}", "scope": self.rng.choice(["READ_ONLY", "READ_WRITE"])}
        self.record_keys([self.call("POST", "/keys", {201, 409}, body)])

    def race_key_revoke(self):
        self.delete_one_of(self.account.live_keys(), "/keys/{}", self.account.keys_revoked)

    def delete_one_of(self, live, path: str, deleted: set[str]) -> None:
        """DELETE one of the ``live`` ids at ``path``; note it in ``deleted`` if it went."""
        if live:
            item_id = self.rng.choice(sorted(live))
            if isinstance(self.call("DELETE", path.format(item_id), {200, 404}), dict):
                with self.account.lock:
                    deleted.add(item_id)


# --- checking the database against the ledger ---------------------------------------------


class Reader:
    """Reads everything an account has, through the API."""

    def __init__(self, base: str, secret: str):
        self.base = base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {secret}"
        self.requests = 0

    def get(self, path: str, expected: int = 200):
        response = self.session.get(self.base + API + path, timeout=HTTP_TIMEOUT)
        self.requests += 1
        assert response.status_code == expected, (path, response.status_code, response.text[:300])
        return response.json()

    def all(self, path: str, plural: str) -> list:
        items = []
        for page in range(1, 10_001):
            data = self.get(f"{path}?page={page}&pageSize=100")["data"]
            items.extend(data[plural])
            if page >= data["pagination"]["totalPages"]:
                assert len(items) == data["pagination"]["total"], path
                return items
        raise AssertionError(f"{path}: too many pages")


def check_account_against_ledger(base: str, account: Account, clients: list) -> dict:
    reader = Reader(base, account.secret)
    owned = [model for client in clients if client.account is account for model in client.maps]
    figures = Counter()
    try:
        maps = reader.all("/maps", "maps")
        assert sorted(m["id"] for m in maps) == sorted(
            [m.id for m in owned] + [account.race_map, account.layer_map]
        )
        for map_id in account.deleted_maps:
            assert reader.get(f"/maps/{map_id}", 404)["error"]["code"] == "NOT_FOUND"

        for model in owned:
            stored_map = reader.get(f"/maps/{model.id}")["data"]
            assert stored_map["title"] == model.title

            locations = reader.all(f"/maps/{model.id}/locations", "locations")
            assert sorted(loc["id"] for loc in locations) == sorted(model.locations), model.id
            for location in locations:
                expected = model.locations[location["id"]]
                assert location["name"] == expected["name"]
                assert location["categoryId"] == expected["category"], location["id"]
                assert location["tagIds"] == expected["tags"], location["id"]
                assert {layer["id"] for layer in location["layers"]} == expected["layers"]

            layers = reader.all(f"/maps/{model.id}/layers", "layers")
            assert [layer["order"] for layer in layers] == list(range(len(layers))), model.id
            assert [layer["id"] for layer in layers] == model.layers, model.id

            tags = reader.all(f"/maps/{model.id}/tags", "tags")
            assert len({tag["name"] for tag in tags}) == len(tags), "tag names repeat"
            assert {tag["name"]: tag["id"] for tag in tags} == model.tags, model.id

            categories = reader.all(f"/maps/{model.id}/categories", "categories")
            assert {category["id"] for category in categories} == model.categories, model.id
            figures["locations"] += len(locations)
            figures["layers"] += len(layers)

        race_tags = reader.all(f"/maps/{account.race_map}/tags", "tags")
        names = [tag["name"] for tag in race_tags]
        assert len(names) == len(set(names)), f"tag names repeat on the race map: {sorted(names)}"
        assert {tag["id"]: tag["name"] for tag in race_tags} == account.live_race_tags()
        assert set(names) <= set(RACE_TAG_NAMES)

        shared_layers = reader.all(f"/maps/{account.layer_map}/layers", "layers")
        orders = [layer["order"] for layer in shared_layers]
        assert orders == list(range(len(orders))), f"shared map's layer orders: {orders}"
        assert {layer["id"] for layer in shared_layers} == account.live_shared_layers()
        figures["layers"] += len(shared_layers)

        keys = reader.all("/keys", "keys")
        active = {key["id"] for key in keys if key["status"] == "active"}
        assert len(active) <= MAX_ACTIVE_KEYS, f"{len(active)} active keys"
        assert active == {account.primary_key_id} | account.live_keys()
        assert len(keys) == len(active)
    finally:
        reader.session.close()
    figures["maps"] = len(owned)
    figures["reads"] = reader.requests
    figures["keys created"] = len(account.keys_created)
    figures["race tags created"] = len(account.race_tags_created)
    return figures


# --- the test ---------------------------------------------------------------------------


def test_soak_mixed_workload_has_no_server_errors_and_leaves_exactly_the_acknowledged_data(
    soak_config, app, live_server, capsys
):
    accounts = []
    for index in range(ACCOUNTS):
        email = f"soak{index}@example.com"
        create_account(app, email)
        accounts.append(Account(index, email, create_key(app, email, name="primary")))
    with requests.Session() as session:
        for account in accounts:
            headers = {"Authorization": f"Bearer {account.secret}"}
            for attribute, title in (("race_map", "Race"), ("layer_map", "Shared layers")):
                made = session.post(live_server + API + "/maps", json={"title": title},
                                    headers=headers, timeout=HTTP_TIMEOUT)
                assert made.status_code == 201, made.text
                setattr(account, attribute, made.json()["data"]["id"])
            (primary,) = session.get(live_server + API + "/keys", headers=headers,
                                     timeout=HTTP_TIMEOUT).json()["data"]["keys"]
            account.primary_key_id = primary["id"]

    tally = Tally()
    seed = int(os.environ.get("MAPAPI_SOAK_SEED", random.randrange(1 << 30)))
    started = time.monotonic()
    deadline = started + SOAK_SECONDS
    clients = [
        Client(index, accounts[index % ACCOUNTS], accounts, live_server, tally, deadline, seed + index)
        for index in range(CLIENTS)
    ]
    threads = [threading.Thread(target=client.run, name=f"soak-{i}", daemon=True)
               for i, client in enumerate(clients)]
    try:
        for thread in threads:
            thread.start()
    finally:
        for thread in threads:
            if thread.ident is not None:
                thread.join(timeout=max(0.0, deadline - time.monotonic()) + 120)
    elapsed = time.monotonic() - started
    assert not any(thread.is_alive() for thread in threads), "a client thread hung"

    figures = Counter()
    ledger_mismatch = None
    if not (tally.server_errors or tally.transport_errors):
        try:
            for account in accounts:
                figures.update(check_account_against_ledger(live_server, account, clients))
        except AssertionError as error:
            ledger_mismatch = error

    expected_4xx = sum(tally.expected_4xx.values())
    with capsys.disabled():
        print(
            f"\nsoak (seed {seed}): {tally.requests} requests in {elapsed:.1f} s "
            f"({tally.requests / elapsed:.0f}/s) by {CLIENTS} clients of {ACCOUNTS} accounts, "
            f"{len(tally.server_errors)} server errors, {expected_4xx} expected 4xx "
            f"({dict(sorted(tally.expected_4xx.items()))}), {len(tally.unexpected)} unexpected, "
            f"{len(tally.transport_errors)} transport errors; at the end "
            + (
                f"the database did NOT match the ledger: {ledger_mismatch}"
                if ledger_mismatch
                else f"{figures['maps']} maps, {figures['locations']} locations, "
                f"{figures['layers']} layers matched the ledger ({figures['keys created']} keys "
                f"and {figures['race tags created']} race tags created on the way)"
            )
        )

    assert not tally.server_errors, (len(tally.server_errors), tally.server_errors[:5])
    assert not tally.transport_errors, tally.transport_errors[:5]
    assert not tally.unexpected, (len(tally.unexpected), tally.unexpected[:5])
    if ledger_mismatch:
        raise ledger_mismatch
    # Over 1000 at the default 60 s: a client loop that silently stopped cannot pass.
    assert tally.requests > MIN_REQUESTS_PER_SECOND * SOAK_SECONDS, (
        f"only {tally.requests} requests in {elapsed:.1f} s: the clients did not really run"
    )
    # The races happened: some tag names and some 11th keys were refused.
    assert tally.expected_4xx[409] > 0
    assert figures["maps"] > 0 and figures["locations"] > 0
