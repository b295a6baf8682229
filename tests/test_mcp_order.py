"""``/mcp`` checks in the API's order: Origin, key, buckets, then the body's size."""

import json

import pytest

from .factories import create_key

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LISTING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
HUGE = b"x" * (2 * 1024 * 1024 + 1)


@pytest.fixture
def allowed_origin(app_config):
    app_config["CORS_ORIGINS"] = "https://app.example"
    app_config["RATELIMIT_GENERAL"] = "3 per hour"


def test_a_huge_body_without_a_key_is_401_not_413(allowed_origin, client):
    answer = client.post("/mcp", data=HUGE, headers=MCP_HEADERS)
    assert answer.status_code == 401 and answer.get_json()["error"]["code"] == "MISSING_API_KEY"


def test_a_foreign_origin_comes_before_the_key(allowed_origin, client):
    answer = client.post("/mcp", data=HUGE, headers={**MCP_HEADERS, "Origin": "https://evil.example"})
    assert answer.status_code == 403 and answer.get_json()["error"]["code"] == -32600


def test_a_huge_body_with_a_key_is_413_and_to_an_empty_bucket_429(allowed_origin, app, client, account):
    key = create_key(app, "owner@example.com")
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}"}
    answers = [client.post("/mcp", data=HUGE, headers=headers) for _ in range(4)]
    assert [answer.status_code for answer in answers] == [413, 413, 413, 429]
    assert answers[0].get_json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert answers[3].get_json()["error"]["code"] == "RATE_LIMIT_EXCEEDED" and "Retry-After" in answers[3].headers


@pytest.mark.parametrize("query", ["readOnly=true&readOnly=true", "readOnly=true&readOnly=false", "readOnly=yes"])
def test_read_only_given_twice_or_wrong_is_a_validation_error(client, key, query):
    answer = client.post(f"/mcp?{query}", data=LISTING, headers={**MCP_HEADERS, "Authorization": f"Bearer {key}"})
    assert answer.status_code == 400
    assert answer.get_json()["error"]["details"] == {"readOnly": ["Must be true or false."]}


def test_read_only_given_twice_without_a_key_is_401(client):
    answer = client.post("/mcp?readOnly=true&readOnly=true", data=LISTING, headers=MCP_HEADERS)
    assert answer.status_code == 401


def test_a_preflight_to_mcp_from_an_allowed_origin_is_answered_as_the_apis(allowed_origin, client):
    answer = client.options(
        "/mcp",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, mcp-protocol-version"},
    )  # fmt: skip
    assert answer.status_code == 204 and answer.get_data() == b""
    assert answer.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert "POST" in answer.headers["Access-Control-Allow-Methods"]
    allowed = {name.strip().lower() for name in answer.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "accept", "mcp-protocol-version", "mcp-session-id", "last-event-id"} <= allowed
    foreign = client.options("/mcp", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert "Access-Control-Allow-Origin" not in foreign.headers
