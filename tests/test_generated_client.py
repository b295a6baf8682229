"""A client generated from the OpenAPI document, driven against a live server.

openapi-python-client writes a typed client from ``/api/v1/openapi.json``
(warnings are failures); the test then creates, updates, reads and deletes
with it over HTTP, as a client developer would. An update that sends one
field must leave the others as they were.
"""

import importlib
import json
import subprocess
import sys

import pytest
import requests

PACKAGE = "mapapi_generated_client"


@pytest.fixture
def generated(live_server, tmp_path):
    """The generated package, imported; removed from ``sys.modules`` after."""
    document = requests.get(f"{live_server}/api/v1/openapi.json", timeout=10).json()
    (tmp_path / "openapi.json").write_text(json.dumps(document))
    (tmp_path / "config.yaml").write_text(f"package_name_override: {PACKAGE}\npost_hooks: []\n")
    subprocess.run(
        [
            sys.executable, "-m", "openapi_python_client", "generate",
            "--path", str(tmp_path / "openapi.json"),
            "--config", str(tmp_path / "config.yaml"),
            "--output-path", str(tmp_path / PACKAGE),
            "--meta", "none", "--fail-on-warning",
        ],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    sys.path.insert(0, str(tmp_path))
    try:
        yield lambda name: importlib.import_module(f"{PACKAGE}.{name}")
    finally:
        sys.path.remove(str(tmp_path))
        for module in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[module]


@pytest.fixture
def client(generated, live_server, key):
    client_module = generated("client")
    with client_module.AuthenticatedClient(base_url=f"{live_server}/api/v1", token=key) as client:
        yield client


def parsed(response, status: int):
    assert response.status_code == status, response.content
    return response.parsed


def test_create_update_get_delete_a_map(generated, client):
    models = generated("models")

    def maps(verb, *args, **kwargs):
        return generated(f"api.maps.maps_{verb}_map").sync_detailed(*args, client=client, **kwargs)

    body = models.MapInput(title="Coffee in Paris", city="Paris", description="Quiet", zoom=12)
    made = parsed(maps("create", body=body), 201).data
    assert (made.title, made.slug, made.city, made.zoom) == (
        "Coffee in Paris", "coffee-in-paris", "Paris", 12,
    )  # fmt: skip

    changed = parsed(maps("update", made.id, body=models.MapUpdate(title="Tea in Paris")), 200).data
    assert (changed.title, changed.slug) == ("Tea in Paris", "tea-in-paris")
    read = parsed(maps("get", made.id), 200).data
    for got in (changed, read):
        assert (got.city, got.description, got.zoom, got.style) == ("Paris", "Quiet", 12, "streets")
        assert got.created_at == made.created_at

    gone = parsed(maps("delete", made.id), 200).data
    assert (gone.id, gone.deleted) == (made.id, True)
    assert parsed(maps("get", made.id), 404).error.code.value == "NOT_FOUND"


def test_create_update_get_delete_a_location_and_a_tag_conflict(generated, client):
    models = generated("models")

    def call(resource, verb, *args, **kwargs):
        module = generated(f"api.{resource}s.{resource}s_{verb}_{resource}")
        return module.sync_detailed(*args, client=client, **kwargs)

    map_id = parsed(call("map", "create", body=models.MapInput(title="Places")), 201).data.id
    tag = parsed(call("tag", "create", map_id, body=models.TagInput(name="terrace")), 201).data
    taken = parsed(call("tag", "create", map_id, body=models.TagInput(name="terrace")), 409)
    assert taken.error.code.value == "CONFLICT"

    body = models.LocationInput(
        name="Café de Flore", lat=48.8542, lng=2.3326, tag_ids=[tag.id],
        properties=models.LocationInputProperties.from_dict({"sourceId": "A1"}),
    )  # fmt: skip
    made = parsed(call("location", "create", map_id, body=body), 201).data
    change = models.LocationUpdate(address="172 Bd Saint-Germain")
    changed = parsed(call("location", "update", map_id, made.id, body=change), 200).data
    read = parsed(call("location", "get", map_id, made.id), 200).data
    for got in (changed, read):
        assert got.address == "172 Bd Saint-Germain"
        assert (got.name, got.lat, got.lng) == ("Café de Flore", 48.8542, 2.3326)
        assert (got.tag_ids, got.layers) == ([tag.id], [])
        assert got.properties.to_dict() == {"sourceId": "A1"}

    assert parsed(call("location", "delete", map_id, made.id), 200).data.deleted is True
    missing = parsed(call("location", "get", map_id, made.id), 404)
    assert missing.error.code.value == "NOT_FOUND"
