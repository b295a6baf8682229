"""CORS (MAPAPI_CORS_ORIGINS): preflights answered before authentication,
answers readable by the allowed origins only, nothing when it is off."""

import pytest
import requests
from limits import parse

API = "/api/v1"
ORIGIN = "https://app.example.com"
ALLOW_HEADERS = {
    "authorization", "content-type", "idempotency-key", "if-match", "if-none-match", "x-request-id",
}  # fmt: skip
EXPOSED = {
    "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after", "etag",
    "x-request-id", "idempotent-replayed",
}  # fmt: skip


def names(header: str) -> set[str]:
    return {name.strip().lower() for name in header.split(",")}


def preflight(client, path, origin=ORIGIN, method="POST"):
    return client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )


@pytest.fixture
def app_config(app_config):
    app_config["CORS_ORIGINS"] = f"{ORIGIN}, http://localhost:3000"
    return app_config


@pytest.mark.parametrize(
    "path, methods",
    [
        ("/maps", {"GET", "HEAD", "POST"}),
        ("/maps/abc", {"GET", "HEAD", "PUT", "DELETE"}),
        ("/keys/abc", {"DELETE"}),
    ],
)
def test_a_preflight_from_an_allowed_origin_is_204_with_the_path_s_methods(client, path, methods):
    response = preflight(client, API + path)
    assert response.status_code == 204, response.data
    assert response.data == b""
    assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert names(response.headers["Access-Control-Allow-Methods"]) == {m.lower() for m in methods}
    assert names(response.headers["Access-Control-Allow-Headers"]) == ALLOW_HEADERS
    assert int(response.headers["Access-Control-Max-Age"]) > 0
    assert "Access-Control-Allow-Credentials" not in response.headers
    assert "Origin" in response.headers["Vary"]


def test_a_preflight_needs_no_key_but_is_rate_limited_first(app, client):
    app.extensions["mapapi.buckets"].items["general"] = parse("2 per hour")
    first = preflight(client, f"{API}/maps")
    assert first.status_code == 204 and first.headers["X-RateLimit-Remaining"] == "1"
    assert preflight(client, f"{API}/maps").status_code == 204
    refused = preflight(client, f"{API}/maps")
    assert refused.status_code == 429  # check 1 comes before the preflight's answer
    assert refused.get_json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    assert refused.headers["Access-Control-Allow-Origin"] == ORIGIN  # the browser can read why


def test_every_other_answer_to_an_allowed_origin_is_readable(api, client):
    created = api.post("/maps", json={"title": "x"}, headers={"Origin": ORIGIN})
    refused = client.get(f"{API}/maps", headers={"Origin": "http://localhost:3000"})
    missing = api.get("/maps/nothing", headers={"Origin": ORIGIN})
    for response, origin in [(created, ORIGIN), (refused, "http://localhost:3000"), (missing, ORIGIN)]:
        assert response.headers["Access-Control-Allow-Origin"] == origin
        assert names(response.headers["Access-Control-Expose-Headers"]) == EXPOSED
        assert "Origin" in response.headers["Vary"]
        assert "Access-Control-Allow-Credentials" not in response.headers
    assert created.status_code == 201 and refused.status_code == 401 and missing.status_code == 404


def test_other_origins_and_requests_without_origin_get_no_cors_headers(api, client):
    for response in [
        api.get("/maps", headers={"Origin": "https://evil.example.com"}),
        api.get("/maps"),
        preflight(client, f"{API}/maps", origin="https://evil.example.com"),
    ]:
        assert not [h for h, _value in response.headers if h.lower().startswith("access-control-")]
    # A preflight from another origin is an ordinary OPTIONS: the contract's checks answer it.
    assert preflight(client, f"{API}/maps", origin="https://evil.example.com").status_code == 401


def test_an_options_request_that_is_no_preflight_is_answered_as_before(api):
    response = api.request("OPTIONS", "/maps", headers={"Origin": ORIGIN})
    assert response.status_code == 405
    assert response.headers["Allow"]
    assert response.headers["Access-Control-Allow-Origin"] == ORIGIN


def test_star_allows_any_origin(app_config, tmp_path):
    from mapapi import create_app

    app_config["CORS_ORIGINS"] = "*"
    client = create_app(app_config).test_client()
    response = preflight(client, f"{API}/maps", origin="https://anything.example.org")
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == "*"


def test_cors_is_off_by_default(app_config):
    from mapapi import create_app

    del app_config["CORS_ORIGINS"]
    client = create_app(app_config).test_client()
    response = preflight(client, f"{API}/maps")
    assert response.status_code == 401
    assert "Access-Control-Allow-Origin" not in response.headers


def test_a_preflight_over_http(live_server, key):
    response = requests.options(
        f"{live_server}{API}/maps",
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
        timeout=5,
    )
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
    created = requests.post(
        f"{live_server}{API}/maps",
        json={"title": "from a browser"},
        headers={"Origin": ORIGIN, "Authorization": f"Bearer {key}"},
        timeout=5,
    )
    assert created.status_code == 201
    assert "x-ratelimit-remaining" in names(created.headers["Access-Control-Expose-Headers"])
