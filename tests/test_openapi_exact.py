"""The OpenAPI document says exactly what the service does: update bodies as
they load, read-only fields marked, every error code, a guide on /docs."""

import re
from pathlib import Path

import pytest
from openapi_schema_validator import OAS31Validator
from referencing import Registry, Resource

import mapapi
from mapapi.contract.openapi import BODY_EXAMPLES
from mapapi.http.auth import API_PREFIX
from mapapi.http.errors import HTTP_CODES

from .factories import make_map
from .helpers import data_of

UPDATES = {
    "/maps/{mapId}": ("MapInput", "MapUpdate"),
    "/maps/{mapId}/locations/{locId}": ("LocationInput", "LocationUpdate"),
    "/maps/{mapId}/categories/{catId}": ("CategoryInput", "CategoryUpdate"),
    "/maps/{mapId}/tags/{tagId}": ("TagInput", "TagUpdate"),
    "/maps/{mapId}/layers/{layerId}": ("LayerInput", "LayerUpdate"),
}
#: The read-only fields each resource's GET returns, accepted and ignored in bodies.
READ_ONLY = {
    "MapInput": {"id", "slug", "userId", "createdAt", "updatedAt"},
    "LocationInput": {"id", "mapId", "createdAt", "updatedAt", "layers"},
    "CategoryInput": {"id", "mapId", "createdAt", "updatedAt"},
    "TagInput": {"id", "mapId", "createdAt", "updatedAt"},
    "LayerInput": {"id", "mapId", "createdAt", "updatedAt"},
    "KeyInput": {"id", "status", "prefix", "createdAt", "lastUsedAt"},
    "WebhookInput": {"id", "disabledReason", "createdAt", "updatedAt"},
}


@pytest.fixture
def document(client):
    return client.get(f"{API_PREFIX}/openapi.json").get_json()


def operations(document):
    for path, item in document["paths"].items():
        for method, described in item.items():
            if method != "parameters":
                yield method.upper(), path, described


def body_schema_name(described) -> str:
    ref = described["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return ref.rsplit("/", 1)[1]


def test_put_bodies_require_nothing_and_keep_the_create_rules(document):
    schemas = document["components"]["schemas"]
    for path, (create, update) in UPDATES.items():
        assert body_schema_name(document["paths"][path]["put"]) == update, path
        created, updated = schemas[create], schemas[update]
        assert "required" in created and "required" not in updated, path
        assert updated["additionalProperties"] is False
        assert set(updated["properties"]) == set(created["properties"]), path
        for name, rule in created["properties"].items():
            without_default = {k: v for k, v in rule.items() if k != "default"}
            assert updated["properties"][name] == without_default, (path, name)


def test_a_put_that_sends_one_field_changes_only_that_one(api):
    map_ = make_map(api, description="kept", city="Paris", public=True)
    updated = data_of(api.put(f"/maps/{map_['id']}", json={"title": "Renamed"}))
    assert (updated["title"], updated["slug"]) == ("Renamed", "renamed")
    assert (updated["description"], updated["city"], updated["public"]) == ("kept", "Paris", True)


def test_read_only_fields_are_read_only_in_every_request_body(document):
    schemas = document["components"]["schemas"]
    bodies = {body_schema_name(d) for _, _, d in operations(document) if "requestBody" in d}
    assert {"MapUpdate", "LocationUpdate", "BulkInput", "KeyInput"} <= bodies
    for name, fields in READ_ONLY.items():
        for schema in (name, name.replace("Input", "Update")):
            if schema not in schemas:
                continue
            properties = schemas[schema]["properties"]
            marked = {field for field, rule in properties.items() if rule.get("readOnly")}
            assert marked == fields, schema
            assert not any(rule.get("writeOnly") for rule in properties.values()), schema


def test_the_webhook_switched_off_is_described(document):
    schemas = document["components"]["schemas"]
    reason = schemas["Webhook"]["properties"]["disabledReason"]
    assert "null" in reason["type"] and "MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS" in reason["description"]
    assert "disabledReason" in schemas["Webhook"]["required"]
    selectors = schemas["WebhookInput"]["properties"]["events"]["items"]["enum"]
    assert {"webhook.*", "webhook.disabled", "*"} <= set(selectors)
    assert "webhook.disabled" in schemas["Event"]["properties"]["type"]["enum"]
    created_at = schemas["Delivery"]["properties"]["createdAt"]
    assert "made" in created_at["description"] and "scheduled" in created_at["description"]


def test_every_request_body_has_an_example_that_its_schema_accepts(document):
    registry = Registry().with_resource("urn:doc", Resource.opaque(document))
    for method, path, described in operations(document):
        if "requestBody" not in described:
            continue
        media = described["requestBody"]["content"]["application/json"]
        assert "example" in media, (method, path)
        reference = "urn:doc" + media["schema"]["$ref"]
        validator = OAS31Validator({"$ref": reference}, registry=registry)
        assert not list(validator.iter_errors(media["example"])), (method, path)
    assert set(BODY_EXAMPLES) == {
        body_schema_name(d) for _, _, d in operations(document) if "requestBody" in d
    }


def test_the_body_examples_are_accepted_by_the_service(api):
    map_id = api.created("/maps", BODY_EXAMPLES["MapInput"])["id"]
    for path, name in [
        ("locations", "LocationInput"),
        ("categories", "CategoryInput"),
        ("tags", "TagInput"),
        ("layers", "LayerInput"),
    ]:
        created = api.created(f"/maps/{map_id}/{path}", BODY_EXAMPLES[name])
        update = BODY_EXAMPLES[name.replace("Input", "Update")]
        data_of(api.put(f"/maps/{map_id}/{path}/{created['id']}", json=update))
    data_of(api.post(f"/maps/{map_id}/locations/bulk", json=BODY_EXAMPLES["BulkInput"]), 201)
    data_of(api.put(f"/maps/{map_id}", json=BODY_EXAMPLES["MapUpdate"]))
    data_of(api.post("/keys", json=BODY_EXAMPLES["KeyInput"]), 201)


def raised_error_codes() -> set[tuple[int, str]]:
    """Every (status, code) the package raises as an APIError or werkzeug maps to."""
    found = {(status, code) for status, (code, _message) in HTTP_CODES.items()}
    for source in Path(mapapi.__file__).parent.rglob("*.py"):
        text = source.read_text()
        for status, code in re.findall(r'APIError\(\s*(\d{3}),\s*"([A-Z_]+)"', text):
            found.add((int(status), code))
    return found


def test_every_error_code_the_service_answers_is_in_the_document(document):
    raised = raised_error_codes()
    assert (405, "METHOD_NOT_ALLOWED") in raised and (403, "PRO_SUBSCRIPTION_REQUIRED") in raised
    error = document["components"]["schemas"]["Error"]["properties"]["error"]
    assert {code for _, code in raised} <= set(error["properties"]["code"]["enum"])
    described: dict[int, str] = {}
    for _, _, operation in operations(document):
        for status, response in operation["responses"].items():
            if status >= "400":
                described[int(status)] = described.get(int(status), "") + response["description"]
    described[405] = document["components"]["responses"]["MethodNotAllowed"]["description"]
    for status, code in raised:
        assert code in described[status], (status, code)


def test_method_not_allowed_is_described_with_its_allow_header(document):
    response = document["components"]["responses"]["MethodNotAllowed"]
    assert response["headers"]["Allow"] == {"$ref": "#/components/headers/Allow"}
    assert response["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    assert "METHOD_NOT_ALLOWED" in document["info"]["description"]


def test_every_operation_documents_a_body_too_large(document):
    for method, path, described in operations(document):
        assert "413" in described["responses"], (method, path)


def test_info_description_is_a_guide(document):
    description = document["info"]["description"]
    assert len(description.split("\n\n")) >= 4
    for words in [
        "Authorization: Bearer", "READ_ONLY", "READ_WRITE", "INSUFFICIENT_SCOPE",
        "X-RateLimit-Remaining", "Retry-After", "VALIDATION_ERROR", "details",
        "page", "pageSize", "totalPages", "docs/api.md",
    ]:  # fmt: skip
        assert words in description, words


def test_root_redirects_to_the_reference_page(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response.headers["Location"] == "/docs"
