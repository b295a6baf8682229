"""Accounts are isolated: another account's ids are NOT_FOUND and change nothing."""

import json
import secrets

import pytest

from .factories import make_category, make_layer, make_location, make_map, make_tag

LOCATION = {"name": "Intruder", "lat": 10, "lng": 20}

#: Every endpoint of docs/api.md that takes an id in its path, with a body that
#: would change something if the id were accepted.
ENDPOINTS = [
    ("GET", "/maps/{map}", None),
    ("PUT", "/maps/{map}", {"title": "Taken over"}),
    ("DELETE", "/maps/{map}", None),
    ("GET", "/maps/{map}/locations", None),
    ("POST", "/maps/{map}/locations", LOCATION),
    ("POST", "/maps/{map}/locations/bulk", {"locations": [LOCATION, LOCATION]}),
    ("GET", "/maps/{map}/locations/{location}", None),
    ("PUT", "/maps/{map}/locations/{location}", {"name": "Taken over", "lat": 0}),
    ("DELETE", "/maps/{map}/locations/{location}", None),
    ("PUT", "/maps/{map}/locations/{location}/layers", {"layerIds": []}),
    ("GET", "/maps/{map}/categories", None),
    ("POST", "/maps/{map}/categories", {"name": "Intruder"}),
    ("GET", "/maps/{map}/categories/{category}", None),
    ("PUT", "/maps/{map}/categories/{category}", {"name": "Taken over"}),
    ("DELETE", "/maps/{map}/categories/{category}", None),
    ("GET", "/maps/{map}/tags", None),
    ("POST", "/maps/{map}/tags", {"name": "Intruder"}),
    ("GET", "/maps/{map}/tags/{tag}", None),
    ("PUT", "/maps/{map}/tags/{tag}", {"name": "Taken over"}),
    ("DELETE", "/maps/{map}/tags/{tag}", None),
    ("GET", "/maps/{map}/layers", None),
    ("POST", "/maps/{map}/layers", {"name": "Intruder", "order": 0}),
    ("GET", "/maps/{map}/layers/{layer}", None),
    ("PUT", "/maps/{map}/layers/{layer}", {"name": "Taken over", "order": 5}),
    ("DELETE", "/maps/{map}/layers/{layer}", None),
    ("DELETE", "/keys/{key}", None),
]

#: The endpoints that address a resource inside a map.
CHILD_ENDPOINTS = [e for e in ENDPOINTS if e[1].count("{") == 2]


def endpoint_id(endpoint) -> str:
    method, path, _ = endpoint
    return f"{method} {path}"


def assert_not_found(response) -> None:
    assert response.status_code == 404, (response.status_code, response.data[:300])
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == "NOT_FOUND"


def assert_ok(response, status=200):
    assert response.status_code == status, (response.status_code, response.data[:300])
    body = response.get_json()
    assert set(body) == {"data"}, body
    return body["data"]


def fake_id() -> str:
    return secrets.token_urlsafe(16)


def send(api, method, path, body, ids):
    kwargs = {} if body is None else {"json": body}
    return api.request(method, path.format(**ids), **kwargs)


def same_answer(response, reference, replacements: dict) -> None:
    """``response`` tells no more than ``reference`` did for made-up ids."""
    text = json.dumps(response.get_json(), sort_keys=True)
    for real, fake in replacements.items():
        text = text.replace(real, fake)
    assert response.status_code == reference.status_code
    assert text == json.dumps(reference.get_json(), sort_keys=True)


class World:
    """The owner's map with one of everything, and what the owner sees of it."""

    def __init__(self, api):
        self.api = api
        map_ = make_map(api, title="Owner's map")
        category = make_category(api, map_["id"], name="Owner's category")
        tag = make_tag(api, map_["id"], name="Owner's tag")
        layer = make_layer(api, map_["id"], name="Owner's layer")
        location = make_location(api, map_["id"], categoryId=category["id"], tagIds=[tag["id"]])
        location = assert_ok(
            api.put(
                f"/maps/{map_['id']}/locations/{location['id']}/layers",
                json={"layerIds": [layer["id"]]},
            )
        )
        assert [entry["id"] for entry in location["layers"]] == [layer["id"]]
        keys = assert_ok(api.get("/keys"))["keys"]
        assert len(keys) == 1
        self.ids = {
            "map": map_["id"],
            "location": location["id"],
            "category": category["id"],
            "tag": tag["id"],
            "layer": layer["id"],
            "key": keys[0]["id"],
        }
        self.before = self.snapshot()

    def snapshot(self) -> dict:
        paths = [
            "/maps",
            "/keys",
            "/maps/{map}",
            "/maps/{map}/locations",
            "/maps/{map}/locations/{location}",
            "/maps/{map}/categories",
            "/maps/{map}/categories/{category}",
            "/maps/{map}/tags",
            "/maps/{map}/tags/{tag}",
            "/maps/{map}/layers",
            "/maps/{map}/layers/{layer}",
        ]
        return {path: assert_ok(self.api.get(path.format(**self.ids))) for path in paths}

    def assert_unchanged(self) -> None:
        after = self.snapshot()
        for path, before in self.before.items():
            assert after[path] == before, path


@pytest.fixture
def world(api):
    return World(api)


@pytest.fixture
def intruder_map(other_api):
    return make_map(other_api, title="Intruder's map")


def intruder_state(other_api, map_id) -> dict:
    return {
        resource: assert_ok(other_api.get(f"/maps/{map_id}/{resource}"))
        for resource in ("locations", "categories", "tags", "layers")
    }


@pytest.mark.parametrize("method, path, body", ENDPOINTS, ids=map(endpoint_id, ENDPOINTS))
def test_other_accounts_ids_are_not_found_and_change_nothing(world, other_api, method, path, body):
    response = send(other_api, method, path, body, world.ids)
    assert_not_found(response)
    world.assert_unchanged()
    # the answer is the one an id that exists nowhere gets: nothing leaks
    fakes = {name: fake_id() for name in world.ids}
    reference = send(other_api, method, path, body, fakes)
    same_answer(response, reference, {world.ids[name]: fakes[name] for name in world.ids})
    # and the owner's key still works
    assert_ok(world.api.get("/maps"))


@pytest.mark.parametrize(
    "method, path, body", CHILD_ENDPOINTS, ids=map(endpoint_id, CHILD_ENDPOINTS)
)
def test_other_accounts_child_ids_under_own_map_are_not_found(
    world, other_api, intruder_map, method, path, body
):
    ids = {**world.ids, "map": intruder_map["id"]}
    mine_before = intruder_state(other_api, intruder_map["id"])
    assert_not_found(send(other_api, method, path, body, ids))
    world.assert_unchanged()
    assert intruder_state(other_api, intruder_map["id"]) == mine_before


@pytest.mark.parametrize(
    "method, path, body", CHILD_ENDPOINTS, ids=map(endpoint_id, CHILD_ENDPOINTS)
)
def test_child_ids_of_own_other_map_are_not_found(world, method, path, body):
    """Even one account's resources are only found under their own map."""
    second = make_map(world.api, title="Second map")
    world.before["/maps"] = assert_ok(world.api.get("/maps"))
    assert_not_found(send(world.api, method, path, body, {**world.ids, "map": second["id"]}))
    world.assert_unchanged()


def test_lists_show_only_the_callers_own_resources(world, other_api, intruder_map):
    maps = assert_ok(other_api.get("/maps"))
    assert [m["id"] for m in maps["maps"]] == [intruder_map["id"]]
    assert maps["pagination"]["total"] == 1
    keys = assert_ok(other_api.get("/keys"))
    assert world.ids["key"] not in [k["id"] for k in keys["keys"]]
    assert keys["pagination"]["total"] == 1


# --- references to another account's resources in a body ----------------------------


def _reference_cases(ids):
    return {
        "categoryId": {**LOCATION, "categoryId": ids["category"]},
        "tagIds": {**LOCATION, "tagIds": [ids["tag"]]},
    }


@pytest.mark.parametrize("field", ["categoryId", "tagIds"])
def test_location_create_referring_to_other_accounts_resource_is_validation_error(
    world, other_api, intruder_map, field
):
    map_id = intruder_map["id"]
    body = _reference_cases(world.ids)[field]
    response = other_api.post(f"/maps/{map_id}/locations", json=body)
    assert response.status_code == 400, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and set(error["details"]) == {field}
    # exactly what an id that exists nowhere gets
    real = world.ids["category" if field == "categoryId" else "tag"]
    fake = fake_id()
    reference = other_api.post(
        f"/maps/{map_id}/locations", json=json.loads(json.dumps(body).replace(real, fake))
    )
    same_answer(response, reference, {real: fake})
    assert assert_ok(other_api.get(f"/maps/{map_id}/locations"))["locations"] == []
    world.assert_unchanged()


@pytest.mark.parametrize("field", ["categoryId", "tagIds"])
def test_location_update_referring_to_other_accounts_resource_is_validation_error(
    world, other_api, intruder_map, field
):
    map_id = intruder_map["id"]
    mine = make_location(other_api, map_id)
    body = {field: _reference_cases(world.ids)[field][field]}
    response = other_api.put(f"/maps/{map_id}/locations/{mine['id']}", json=body)
    assert response.status_code == 400, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and set(error["details"]) == {field}
    assert assert_ok(other_api.get(f"/maps/{map_id}/locations/{mine['id']}")) == mine
    world.assert_unchanged()


def test_bulk_referring_to_other_accounts_resources_is_validation_error(
    world, other_api, intruder_map
):
    map_id = intruder_map["id"]
    body = {
        "locations": [
            LOCATION,
            {**LOCATION, "categoryId": world.ids["category"]},
            {**LOCATION, "tagIds": [world.ids["tag"]]},
        ]
    }
    response = other_api.post(f"/maps/{map_id}/locations/bulk", json=body)
    assert response.status_code == 400, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert set(error["details"]) == {"locations"}
    assert set(error["details"]["locations"]) == {"1", "2"}
    assert set(error["details"]["locations"]["1"]) == {"categoryId"}
    assert set(error["details"]["locations"]["2"]) == {"tagIds"}
    assert assert_ok(other_api.get(f"/maps/{map_id}/locations"))["locations"] == []
    world.assert_unchanged()


def test_layer_memberships_with_other_accounts_layer_is_validation_error(
    world, other_api, intruder_map
):
    map_id = intruder_map["id"]
    own_layer = make_layer(other_api, map_id)
    mine = make_location(other_api, map_id)
    path = f"/maps/{map_id}/locations/{mine['id']}/layers"
    response = other_api.put(path, json={"layerIds": [own_layer["id"], world.ids["layer"]]})
    assert response.status_code == 400, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and set(error["details"]) == {"layerIds"}
    fake = fake_id()
    reference = other_api.put(path, json={"layerIds": [own_layer["id"], fake]})
    same_answer(response, reference, {world.ids["layer"]: fake})
    assert assert_ok(other_api.get(f"/maps/{map_id}/locations/{mine['id']}"))["layers"] == []
    world.assert_unchanged()
