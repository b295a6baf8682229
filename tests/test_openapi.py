"""The OpenAPI document and the reference page: complete, valid, offline."""

import re

import pytest
from openapi_spec_validator import validate

from mapapi.http.auth import API_PREFIX

#: docs/api.md, every operation.
CONTRACT_OPERATIONS = {
    ("GET", "/grants"), ("DELETE", "/grants/{grantId}"),
    ("GET", "/maps"), ("POST", "/maps"),
    ("GET", "/maps/{mapId}"), ("PUT", "/maps/{mapId}"), ("DELETE", "/maps/{mapId}"),
    ("GET", "/maps/{mapId}/locations"), ("POST", "/maps/{mapId}/locations"),
    ("POST", "/maps/{mapId}/locations/bulk"),
    ("GET", "/maps/{mapId}/locations.geojson"), ("POST", "/maps/{mapId}/locations/import"),
    ("POST", "/maps/{mapId}/locations/upsert"), ("POST", "/maps/{mapId}/locations/bulk-delete"),
    ("GET", "/maps/{mapId}/locations/clusters"),
    ("GET", "/maps/{mapId}/locations/{locId}"), ("PUT", "/maps/{mapId}/locations/{locId}"),
    ("DELETE", "/maps/{mapId}/locations/{locId}"),
    ("PUT", "/maps/{mapId}/locations/{locId}/layers"),
    ("GET", "/maps/{mapId}/categories"), ("POST", "/maps/{mapId}/categories"),
    ("GET", "/maps/{mapId}/categories/{catId}"), ("PUT", "/maps/{mapId}/categories/{catId}"),
    ("DELETE", "/maps/{mapId}/categories/{catId}"),
    ("GET", "/maps/{mapId}/tags"), ("POST", "/maps/{mapId}/tags"),
    ("GET", "/maps/{mapId}/tags/{tagId}"), ("PUT", "/maps/{mapId}/tags/{tagId}"),
    ("DELETE", "/maps/{mapId}/tags/{tagId}"),
    ("GET", "/maps/{mapId}/layers"), ("POST", "/maps/{mapId}/layers"),
    ("GET", "/maps/{mapId}/layers/{layerId}"), ("PUT", "/maps/{mapId}/layers/{layerId}"),
    ("DELETE", "/maps/{mapId}/layers/{layerId}"),
    ("GET", "/keys"), ("POST", "/keys"), ("DELETE", "/keys/{keyId}"),
    ("GET", "/events"),
    ("GET", "/rate-limits"),
    ("GET", "/webhooks"), ("POST", "/webhooks"),
    ("GET", "/webhooks/{webhookId}"), ("PUT", "/webhooks/{webhookId}"),
    ("DELETE", "/webhooks/{webhookId}"),
    ("POST", "/webhooks/{webhookId}/ping"), ("GET", "/webhooks/{webhookId}/deliveries"),
}  # fmt: skip


@pytest.fixture
def document(client):
    response = client.get(f"{API_PREFIX}/openapi.json")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    return response.get_json()


def operations(document):
    for path, item in document["paths"].items():
        for method, described in item.items():
            if method != "parameters":
                yield method.upper(), path, described


def test_document_is_valid_openapi_3_1_without_a_key(document):
    validate(document)
    assert document["openapi"] == "3.1.0"
    assert document["servers"] == [{"url": API_PREFIX}]


def test_document_lists_exactly_the_contracts_operations(document):
    assert {(method, path) for method, path, _ in operations(document)} == CONTRACT_OPERATIONS


def test_every_api_route_is_documented(app, document):
    documented = {path for _, path, _ in operations(document)}
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith(API_PREFIX + "/") and rule.rule != f"{API_PREFIX}/openapi.json":
            assert hasattr(app.view_functions[rule.endpoint], "operation"), rule.rule
            path = re.sub(r"<\w+>", "{x}", rule.rule.removeprefix(API_PREFIX))
            assert path in {re.sub(r"{\w+}", "{x}", p) for p in documented}, rule.rule


def test_every_operation_has_a_summary_errors_and_headers(document):
    for method, path, described in operations(document):
        assert described["summary"] and "\n" not in described["summary"], (method, path)
        responses = described["responses"]
        for status in ("401", "403", "429", "500", "503"):
            assert status in responses, (method, path, status)
        if "{" in path:
            assert "404" in responses, (method, path)
        if "requestBody" in described:
            assert {"400", "413"} <= set(responses), (method, path)
        for status, response in responses.items():
            assert {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} <= set(
                response["headers"]
            ), (method, path, status)
            retry_after = status == "429" or (status == "409" and method == "POST")
            assert ("Retry-After" in response["headers"]) == retry_after
        success = [s for s in responses if s.startswith("2")]
        if path.endswith("/ping"):
            assert success == ["202"]
        elif path.endswith("/import"):  # 200 with upsert=true
            assert success == ["201", "200"]
        else:
            creates = method == "POST" and not path.endswith(("/upsert", "/bulk-delete"))
            assert success == (["201"] if creates else ["200"]), (method, path)


def test_conflicts_are_documented_where_they_happen(document):
    conflicting = {
        (m, p)
        for m, p, d in operations(document)
        if "CONFLICT," in d["responses"].get("409", {}).get("description", "")
        or d["responses"].get("409", {}).get("description", "").endswith("CONFLICT.")
    }
    assert conflicting == {
        ("POST", "/maps/{mapId}/locations"),
        ("POST", "/maps/{mapId}/locations/bulk"),
        ("POST", "/maps/{mapId}/locations/import"),
        ("PUT", "/maps/{mapId}/locations/{locId}"),
        ("POST", "/maps/{mapId}/tags"),
        ("PUT", "/maps/{mapId}/tags/{tagId}"),
        ("POST", "/keys"),
        ("POST", "/webhooks"),
    }


def test_security_pagination_and_error_shape_are_described(document):
    assert document["security"] == [{"bearerAuth": []}]
    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key: `mk_live_...`.",
    }
    listing = document["paths"]["/maps"]["get"]
    assert {p["name"] for p in listing["parameters"]} == {"page", "pageSize"}
    pagination = document["components"]["schemas"]["Pagination"]
    assert set(pagination["required"]) == {"total", "page", "pageSize", "totalPages"}
    codes = document["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]
    assert "RATE_LIMIT_EXCEEDED" in codes["enum"] and "VALIDATION_ERROR" in codes["enum"]


def test_documented_constraints_come_from_the_validating_schemas(document):
    schemas = document["components"]["schemas"]
    title = schemas["MapInput"]["properties"]["title"]
    assert (title["minLength"], title["maxLength"]) == (1, 200)
    assert schemas["MapInput"]["additionalProperties"] is False
    assert schemas["MapInput"]["required"] == ["title"]
    assert schemas["Map"]["properties"]["centerLat"]["type"] == ["number", "null"]
    bulk = schemas["BulkInput"]["properties"]["locations"]
    assert (bulk["minItems"], bulk["maxItems"]) == (1, 100)
    assert bulk["items"] == {"$ref": "#/components/schemas/LocationInput"}


def test_reference_page_is_served_from_the_package_not_a_cdn(client):
    page = client.get("/docs")
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets and all(asset.startswith("/docs/assets/") for asset in assets)
    assert "http://" not in html and "https://" not in html
    for asset in assets:
        assert client.get(asset).status_code == 200, asset


def test_safe_retries_and_conditional_requests_are_described(document):
    parameters = document["components"]["parameters"]
    assert {p["name"] for p in parameters.values()} == {"Idempotency-Key", "If-Match", "If-None-Match"}
    assert set(document["components"]["headers"]) >= {"ETag", "Idempotent-Replayed"}
    for method, path, described in operations(document):
        responses = described["responses"]
        named = {ref.rsplit("/", 1)[-1] for ref in described.get("parameters", []) if isinstance(ref, str)}
        named |= {
            p["$ref"].rsplit("/", 1)[-1] for p in described.get("parameters", []) if "$ref" in p
        }
        if method == "POST":
            assert "IdempotencyKey" in named, path
            assert {"409", "422"} <= set(responses), path
            assert "IDEMPOTENCY_KEY_IN_USE" in responses["409"]["description"]
            for success in (status for status in responses if status.startswith("2")):
                assert "Idempotent-Replayed" in responses[success]["headers"], path
        else:
            assert "IdempotencyKey" not in named and "422" not in responses, (method, path)
    location = "/maps/{mapId}/locations/{locId}"
    get = document["paths"][location]["get"]["responses"]
    assert "304" in get and "ETag" in get["200"]["headers"] and "content" not in get["304"]
    for method, path in [("put", location), ("delete", location), ("put", location + "/layers"),
                         ("put", "/maps/{mapId}"), ("delete", "/maps/{mapId}/layers/{layerId}")]:
        assert "412" in document["paths"][path][method]["responses"], (method, path)
    assert "412" not in document["paths"]["/keys/{keyId}"]["delete"]["responses"]
    assert "304" not in document["paths"]["/maps"]["get"]["responses"]
    assert "ETag" not in document["paths"]["/maps/{mapId}/locations/bulk"]["post"]["responses"]["201"]["headers"]
    assert "ETag" in document["paths"]["/maps"]["post"]["responses"]["201"]["headers"]


def test_sync_operations_and_fields_are_described(document):
    schemas = document["components"]["schemas"]
    for name in ("LocationInput", "UpsertItem"):
        assert {"externalId", "layerIds"} <= set(schemas[name]["properties"]), name
    external_id = schemas["LocationInput"]["properties"]["externalId"]
    assert (external_id["minLength"], external_id["maxLength"]) == (1, 200)
    assert external_id["type"] == ["string", "null"]
    assert schemas["UpsertItem"]["properties"]["externalId"]["type"] == "string"
    # name, lat and lng are required only to create: an update may leave them out.
    assert schemas["UpsertItem"]["required"] == ["externalId"]
    assert schemas["Location"]["properties"]["externalId"]["type"] == ["string", "null"]
    assert "layerIds" not in schemas["Location"]["properties"]
    assert set(schemas["UpsertResult"]["required"]) == {"locations", "created", "updated", "unchanged"}
    assert set(schemas["BulkDeleteInput"]["properties"]) == {"ids", "externalIds"}
    assert set(schemas["BulkDeleteResult"]["required"]) == {"deleted", "count"}
    upsert = document["paths"]["/maps/{mapId}/locations/upsert"]["post"]
    assert upsert["operationId"] == "locations_upsert_locations"
    assert set(upsert["responses"]) >= {"200", "400", "404", "429"}
    bulk_delete = document["paths"]["/maps/{mapId}/locations/bulk-delete"]["post"]
    assert bulk_delete["operationId"] == "locations_bulk_delete_locations"
    listing = document["paths"]["/maps/{mapId}/locations"]["get"]
    (filter_,) = [p for p in listing["parameters"] if p["name"] == "externalId"]
    assert filter_["in"] == "query" and filter_["schema"]["type"] == "array"
    assert filter_["schema"]["maxItems"] == 100
