"""Rate limits: the general, map-creation, bulk and sync buckets, their headers and order."""

import time
from datetime import timedelta

import pytest
import requests
from sqlalchemy import select

from mapapi import config
from mapapi.extensions import db
from mapapi.storage.models import ApiKey, Map
from mapapi.timeutil import utcnow

from .factories import API, ApiClient, create_account, create_key, make_map

GENERAL, MAP_CREATE, BULK, SYNC = 5, 2, 2, 3
TWO_MIB = 2 * 1024 * 1024


@pytest.fixture
def app_config(app_config):
    app_config.update(
        RATELIMIT_GENERAL=f"{GENERAL} per minute",
        RATELIMIT_MAP_CREATE=f"{MAP_CREATE} per minute",
        RATELIMIT_BULK=f"{BULK} per minute",
        RATELIMIT_SYNC=f"{SYNC} per minute",
    )
    return app_config


def limits(response) -> tuple[int, int, int]:
    """(limit, remaining, reset) from the X-RateLimit-* headers, checked for form."""
    values = []
    for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"):
        raw = response.headers.get(name)
        assert raw is not None and raw.isdigit(), (name, raw, response.status_code)
        values.append(int(raw))
    limit, remaining, reset = values
    now = time.time()
    assert now < reset <= now + 61, (reset, now)
    return limit, remaining, reset


def assert_ok(response, status=200):
    assert response.status_code == status, (response.status_code, response.data[:300])
    assert set(response.get_json()) == {"data"}
    assert "Retry-After" not in response.headers
    return response.get_json()["data"]


def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.data[:300])
    body = response.get_json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code
    assert body["error"]["message"].strip()
    if status != 429:
        assert "Retry-After" not in response.headers


def assert_limited(response) -> int:
    """A 429 RATE_LIMIT_EXCEEDED with consistent headers; returns Retry-After."""
    assert_error(response, 429, "RATE_LIMIT_EXCEEDED")
    _, remaining, reset = limits(response)
    assert remaining == 0
    raw = response.headers.get("Retry-After")
    assert raw is not None and raw.isdigit(), raw
    retry_after = int(raw)
    assert 1 <= retry_after <= 60
    assert abs(retry_after - (reset - time.time())) <= 2
    return retry_after


def spend(api, count: int) -> None:
    for _ in range(count):
        assert_ok(api.get("/maps"))


@pytest.fixture
def map_id(app, account):
    """A map of the owner, made directly so that no request is counted."""
    with app.app_context():
        map_ = Map(account_id=account, title="Limited", slug="limited")
        db.session.add(map_)
        db.session.commit()
        return map_.id


@pytest.fixture
def read_only(app, client, account):
    return ApiClient(client, create_key(app, "owner@example.com", scope="READ_ONLY"))


# --- the general bucket ----------------------------------------------------------


def test_remaining_counts_down_to_zero_then_429_with_retry_after(api):
    seen = []
    for expected_remaining in range(GENERAL - 1, -1, -1):
        response = api.get("/maps")
        assert_ok(response)
        limit, remaining, reset = limits(response)
        assert (limit, remaining) == (GENERAL, expected_remaining)
        seen.append(reset)
    assert max(seen) - min(seen) <= 1  # the window started with the first request
    assert_limited(api.get("/maps"))
    assert_limited(api.get("/maps"))


def test_every_kind_of_api_response_counts_and_carries_headers(api, map_id):
    responses = [
        api.get("/maps"),  # 200
        api.get("/maps/unknown"),  # 404 unknown id
        api.get("/nope"),  # 404 unknown route
        api.request("PATCH", "/maps"),  # 405
        api.post(f"/maps/{map_id}/tags", json={}),  # 400
    ]
    assert [r.status_code for r in responses] == [200, 404, 404, 405, 400]
    for expected_remaining, response in zip(range(GENERAL - 1, -1, -1), responses):
        assert limits(response)[:2] == (GENERAL, expected_remaining), response.status_code
        assert "Retry-After" not in response.headers
    assert_limited(api.get("/maps"))


def test_rate_limit_counts_403s_and_answers_429_before_scope(read_only):
    for expected_remaining in range(GENERAL - 1, -1, -1):
        response = read_only.post("/maps", json={"title": "x"})
        assert_error(response, 403, "INSUFFICIENT_SCOPE")
        assert limits(response)[:2] == (GENERAL, expected_remaining)
    assert_limited(read_only.post("/maps", json={"title": "x"}))
    assert_limited(read_only.get("/maps"))


def test_rate_limit_answers_429_before_subscription_check(app, client):
    create_account(app, "free@example.com", plan="free")
    free = ApiClient(client, create_key(app, "free@example.com"))
    for _ in range(GENERAL):
        assert_error(free.get("/maps"), 403, "PRO_SUBSCRIPTION_REQUIRED")
    assert_limited(free.get("/maps"))


def test_rate_limit_answers_429_before_routing(api):
    spend(api, GENERAL)
    assert_limited(api.get("/nope"))
    assert_limited(api.request("PATCH", "/maps"))


def test_keys_of_one_account_share_its_bucket(app, client, api):
    second = ApiClient(client, create_key(app, "owner@example.com", name="second"))
    spend(api, 3)
    response = second.get("/maps")
    assert limits(response)[:2] == (GENERAL, 1)
    spend(second, 1)
    assert_limited(api.get("/maps"))
    assert_limited(second.get("/maps"))


def test_another_account_has_its_own_bucket(api, other_api):
    spend(api, GENERAL)
    assert_limited(api.get("/maps"))
    response = other_api.get("/maps")
    assert_ok(response)
    assert limits(response)[:2] == (GENERAL, GENERAL - 1)


# --- requests without a valid key --------------------------------------------------


def test_unauthenticated_requests_are_limited_per_address(client):
    headers_each = [
        {},
        {"Authorization": ""},
        {"Authorization": "Basic x"},
        {"Authorization": "Bearer unknown"},
        {},
    ]
    for expected_remaining, headers in zip(range(GENERAL - 1, -1, -1), headers_each):
        response = client.get(f"{API}/maps", headers=headers)
        assert response.status_code == 401
        assert limits(response)[:2] == (GENERAL, expected_remaining)
    assert_limited(client.get(f"{API}/maps"))
    assert_limited(client.get(f"{API}/nope"))


def test_other_client_addresses_have_their_own_bucket(client):
    for _ in range(GENERAL):
        client.get(f"{API}/maps")
    assert_limited(client.get(f"{API}/maps"))
    response = client.get(f"{API}/maps", environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert_error(response, 401, "MISSING_API_KEY")
    assert limits(response)[:2] == (GENERAL, GENERAL - 1)


def test_unauthenticated_requests_do_not_use_the_accounts_bucket(api, client):
    for _ in range(GENERAL):
        assert client.get(f"{API}/maps").status_code == 401
    assert_limited(client.get(f"{API}/maps"))
    response = api.get("/maps")
    assert_ok(response)
    assert limits(response)[:2] == (GENERAL, GENERAL - 1)


def test_an_exhausted_account_does_not_block_unauthenticated_requests(api, client):
    spend(api, GENERAL)
    assert_limited(api.get("/maps"))
    response = client.get(f"{API}/maps")
    assert_error(response, 401, "MISSING_API_KEY")
    assert limits(response)[:2] == (GENERAL, GENERAL - 1)


def test_expired_and_revoked_keys_count_against_the_address(app, client, api):
    expired = create_key(app, "owner@example.com", name="expired")
    with app.app_context():
        row = db.session.scalar(select(ApiKey).where(ApiKey.prefix == expired[:12]))
        row.expires_at = utcnow() - timedelta(seconds=1)
        db.session.commit()
    spend(api, GENERAL)  # the account's bucket is empty
    response = client.get(f"{API}/maps", headers={"Authorization": f"Bearer {expired}"})
    assert_error(response, 401, "API_KEY_EXPIRED")
    assert limits(response)[:2] == (GENERAL, GENERAL - 1)


# --- the map-creation bucket ---------------------------------------------------------


def test_third_map_creation_is_limited_while_reads_go_on(api):
    for expected_remaining in range(MAP_CREATE - 1, -1, -1):
        response = api.post("/maps", json={"title": "x"})
        assert_ok(response, 201)
        # the map bucket has fewer left than the general one: it is shown
        assert limits(response)[:2] == (MAP_CREATE, expected_remaining)
    assert_limited(api.post("/maps", json={"title": "x"}))
    response = api.get("/maps")
    assert assert_ok(response)["pagination"]["total"] == MAP_CREATE


def test_request_refused_by_map_bucket_uses_nothing_of_general(api):
    for _ in range(MAP_CREATE):
        assert_ok(api.post("/maps", json={"title": "x"}), 201)
    assert_limited(api.post("/maps", json={"title": "x"}))
    assert_limited(api.post("/maps", json={"title": "x"}))
    response = api.get("/maps")
    assert_ok(response)
    # 2 creations + this GET; the two refused creations took nothing
    assert limits(response)[:2] == (GENERAL, GENERAL - MAP_CREATE - 1)


def test_map_creation_also_counts_against_general(api):
    assert_ok(api.post("/maps", json={"title": "x"}), 201)
    spend(api, GENERAL - 2)
    response = api.get("/maps")
    assert_ok(response)
    assert limits(response)[:2] == (GENERAL, 0)
    # the general bucket refuses before the map bucket is looked at
    assert_limited(api.post("/maps", json={"title": "x"}))


def test_map_creation_refused_by_general_creates_nothing(app, api):
    spend(api, GENERAL)
    assert_limited(api.post("/maps", json={"title": "x"}))
    with app.app_context():
        assert db.session.scalar(select(db.func.count()).select_from(Map)) == 0


@pytest.mark.parametrize(
    "body, content_type, status",
    [
        (b"{}", "application/json", 400),
        (b'{"title":', "application/json", 400),
        (b'{"title": "x"}', "text/plain", 400),
        (b'{"title": "' + b"a" * TWO_MIB + b'"}', "application/json", 413),
    ],
    ids=["invalid", "malformed", "content-type", "too-large"],
)
def test_refused_map_creations_still_use_the_map_bucket(api, body, content_type, status):
    response = api.post("/maps", data=body, content_type=content_type)
    assert response.status_code == status, response.get_json()
    assert limits(response)[:2] == (MAP_CREATE, MAP_CREATE - 1)
    assert_ok(api.post("/maps", json={"title": "x"}), 201)
    assert_limited(api.post("/maps", json={"title": "x"}))


def test_403_map_creation_does_not_reach_the_map_bucket(api, read_only):
    for _ in range(MAP_CREATE):
        assert_error(read_only.post("/maps", json={"title": "x"}), 403, "INSUFFICIENT_SCOPE")
    response = api.post("/maps", json={"title": "x"})
    assert_ok(response, 201)
    assert limits(response)[:2] == (MAP_CREATE, MAP_CREATE - 1)


def test_headers_describe_general_when_it_has_fewer_left_than_map_bucket(api):
    spend(api, GENERAL - 1)
    response = api.post("/maps", json={"title": "x"})
    assert_ok(response, 201)
    # general: 0 left; map creation: 1 left
    assert limits(response)[:2] == (GENERAL, 0)


# --- the bulk bucket --------------------------------------------------------------------


def bulk_body(n=1):
    return {"locations": [{"name": f"p{i}", "lat": 1, "lng": 2} for i in range(n)]}


def test_third_bulk_is_limited_while_single_creation_goes_on(api, map_id):
    for expected_remaining in range(BULK - 1, -1, -1):
        response = api.post(f"/maps/{map_id}/locations/bulk", json=bulk_body(2))
        assert_ok(response, 201)
        assert limits(response)[:2] == (BULK, expected_remaining)
    assert_limited(api.post(f"/maps/{map_id}/locations/bulk", json=bulk_body(2)))
    response = api.post(f"/maps/{map_id}/locations", json={"name": "single", "lat": 1, "lng": 2})
    assert_ok(response, 201)
    # 2 bulks + this creation count; the refused bulk took nothing
    assert limits(response)[:2] == (GENERAL, GENERAL - BULK - 1)
    assert assert_ok(api.get(f"/maps/{map_id}/locations"))["pagination"]["total"] == 2 * 2 + 1


@pytest.mark.parametrize("target", ["unknown-map", "other-map", "invalid-body", "too-large"])
def test_refused_bulks_still_use_the_bulk_bucket(app, client, api, map_id, target):
    path, kwargs, status = f"/maps/{map_id}/locations/bulk", {"json": {"locations": []}}, 400
    if target == "unknown-map":
        path, kwargs, status = "/maps/unknown/locations/bulk", {"json": bulk_body()}, 404
    elif target == "other-map":
        create_account(app, "other@example.com")
        other = ApiClient(client, create_key(app, "other@example.com"))
        other_map = make_map(other)["id"]
        path, kwargs, status = f"/maps/{other_map}/locations/bulk", {"json": bulk_body()}, 404
    elif target == "too-large":
        kwargs, status = {
            "data": b"{" + b" " * TWO_MIB + b"}",
            "content_type": "application/json",
        }, 413
    response = api.post(path, **kwargs)
    assert response.status_code == status, response.get_json()
    assert limits(response)[:2] == (BULK, BULK - 1)
    assert_ok(api.post(f"/maps/{map_id}/locations/bulk", json=bulk_body()), 201)
    assert_limited(api.post(f"/maps/{map_id}/locations/bulk", json=bulk_body()))


def feature_collection(external_id: str | None = None) -> dict:
    properties = {"name": "n"} if external_id is None else {"name": "n", "externalId": external_id}
    feature = {
        "type": "Feature",
        "geometry": {"type": "Point", "coordinates": [2, 1]},
        "properties": properties,
    }
    return {"type": "FeatureCollection", "features": [feature]}


#: Each write that counts in the bulk or sync bucket: (path after the map, body, status).
SYNC_WRITES = {
    "upsert": ("upsert", {"locations": [{"externalId": "e", "name": "n", "lat": 1, "lng": 2}]}, 200),
    "bulk-delete": ("bulk-delete", {"externalIds": ["e"]}, 200),
    "import-upsert": ("import?upsert=true", feature_collection("e"), 200),
}
BULK_WRITES = {
    "bulk": ("bulk", bulk_body(), 201),
    "import": ("import", feature_collection(), 201),
}


def write(api, map_id, kind):
    path, body, _status = {**SYNC_WRITES, **BULK_WRITES}[kind]
    return api.post(f"/maps/{map_id}/locations/{path}", json=body)


@pytest.mark.parametrize(
    "kinds",
    [
        ("upsert", "bulk-delete", "import-upsert"),
        ("import-upsert", "upsert", "upsert"),
        ("bulk-delete", "bulk-delete", "upsert"),
    ],
)
def test_upsert_bulk_delete_and_upserting_import_share_the_sync_bucket(api, map_id, kinds):
    for expected_remaining, kind in zip(range(SYNC - 1, -1, -1), kinds, strict=True):
        response = write(api, map_id, kind)
        assert_ok(response, SYNC_WRITES[kind][2])
        assert limits(response)[:2] == (SYNC, expected_remaining)
    for kind in SYNC_WRITES:
        assert_limited(write(api, map_id, kind))
    # The refused ones used nothing of the general bucket (SYNC taken of GENERAL, + this GET).
    assert limits(api.get("/maps"))[:2] == (GENERAL, GENERAL - SYNC - 1)


def test_the_bulk_and_the_plain_import_stay_in_the_bulk_bucket(api, map_id):
    for expected_remaining, kind in zip((BULK - 1, BULK - 2), ("import", "bulk"), strict=True):
        response = write(api, map_id, kind)
        assert_ok(response, 201)
        assert limits(response)[:2] == (BULK, expected_remaining)
    for kind in BULK_WRITES:
        assert_limited(write(api, map_id, kind))
    # The sync bucket is untouched by them; the bulk one by it.
    response = write(api, map_id, "upsert")
    assert_ok(response, 200)
    # Its first in the sync bucket (SYNC - 1 left); the general has as many left.
    assert limits(response)[1] == SYNC - 1 == GENERAL - BULK - 1
    assert_limited(write(api, map_id, "bulk"))


def test_the_sync_bucket_allows_100_an_hour_by_default():
    assert config.defaults("instance")["RATELIMIT_SYNC"] == "100 per hour"
    assert config.ENVIRONMENT["MAPAPI_RATELIMIT_SYNC"] == "RATELIMIT_SYNC"


@pytest.mark.parametrize("query", ["upsert=false", "upsert=0", "upsert=maybe", "nameProperty=name"])
def test_an_import_that_does_not_upsert_counts_in_the_bulk_bucket(api, map_id, query):
    response = api.post(f"/maps/{map_id}/locations/import?{query}", json=feature_collection())
    assert response.status_code == (400 if query == "upsert=maybe" else 201), response.get_json()
    assert limits(response)[:2] == (BULK, BULK - 1)


@pytest.mark.parametrize("kind", list(SYNC_WRITES))
def test_refused_sync_writes_still_use_the_sync_bucket(api, map_id, kind):
    path = SYNC_WRITES[kind][0]
    response = api.post(f"/maps/{map_id}/locations/{path}", json={})
    assert response.status_code == 400
    assert limits(response)[:2] == (SYNC, SYNC - 1)
    response = api.post(f"/maps/unknown/locations/{path}", json={})
    assert response.status_code == 404
    assert limits(response)[:2] == (SYNC, SYNC - 2)
    too_large = api.post(
        f"/maps/{map_id}/locations/{path}",
        data=b"{" + b" " * TWO_MIB + b"}",
        content_type="application/json",
    )
    assert too_large.status_code == 413
    assert_limited(api.post(f"/maps/{map_id}/locations/{path}", json={}))


def test_bulk_is_refused_by_general_before_its_own_bucket(read_only, map_id):
    for _ in range(GENERAL):
        read_only.get("/maps")
    assert_limited(read_only.post(f"/maps/{map_id}/locations/bulk", json=bulk_body()))


# --- outside /api/v1 ---------------------------------------------------------------------


def test_healthz_is_not_rate_limited(client):
    for _ in range(GENERAL * 2):
        response = client.get("/healthz")
        assert response.status_code == 200
        assert response.get_json() == {"data": {"status": "ok"}}
        assert not any(h.lower().startswith("x-ratelimit") for h in response.headers.keys())
        assert "Retry-After" not in response.headers
    # nor does it use the address's bucket
    response = client.get(f"{API}/maps")
    assert limits(response)[:2] == (GENERAL, GENERAL - 1)


def test_unknown_paths_outside_api_are_not_rate_limited(client):
    for _ in range(GENERAL + 1):
        assert client.get("/nope").status_code == 404
    assert limits(client.get(f"{API}/maps"))[:2] == (GENERAL, GENERAL - 1)


# --- over real HTTP ------------------------------------------------------------------------


def test_limits_and_headers_over_http(api, live_server):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {api.key}"
    url = f"{live_server}{API}/maps"
    for expected_remaining in range(GENERAL - 1, -1, -1):
        response = session.get(url, timeout=10)
        assert response.status_code == 200
        # header names are case-insensitive (waitress writes X-Ratelimit-Limit)
        assert response.headers["x-ratelimit-limit"] == str(GENERAL)
        assert response.headers["X-RATELIMIT-REMAINING"] == str(expected_remaining)
        assert int(response.headers["X-RateLimit-Reset"]) > time.time()
        assert "retry-after" not in response.headers
    response = session.get(url, timeout=10)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    assert set(response.json()) == {"error"} and set(response.json()["error"]) == {
        "code",
        "message",
    }
    assert int(response.headers["retry-after"]) >= 1
    assert response.headers["x-ratelimit-remaining"] == "0"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-content-type-options"] == "nosniff"
    health = requests.get(f"{live_server}/healthz", timeout=10)
    assert health.status_code == 200 and health.json() == {"data": {"status": "ok"}}


# --- GET /rate-limits: what a client has left, using up none of it ----------------------


def bucket_report(api) -> dict:
    response = api.get("/rate-limits")
    data = assert_ok(response)
    assert set(data) == {"buckets"}
    assert set(data["buckets"]) == {"general", "mapCreation", "bulk", "sync"}
    for bucket in data["buckets"].values():
        assert set(bucket) == {"limit", "remaining", "reset", "window"}
    return data["buckets"]


def test_rate_limits_reports_every_bucket_and_uses_up_none(api, read_only, map_id):
    now = time.time()
    fresh = bucket_report(api)
    assert fresh == {
        "general": {"limit": GENERAL, "remaining": GENERAL, "reset": fresh["general"]["reset"],
                    "window": f"{GENERAL} per minute"},
        "mapCreation": {"limit": MAP_CREATE, "remaining": MAP_CREATE, "reset": fresh["mapCreation"]["reset"],
                        "window": f"{MAP_CREATE} per minute"},
        "bulk": {"limit": BULK, "remaining": BULK, "reset": fresh["bulk"]["reset"], "window": f"{BULK} per minute"},
        "sync": {"limit": SYNC, "remaining": SYNC, "reset": fresh["sync"]["reset"], "window": f"{SYNC} per minute"},
    }  # fmt: skip
    for bucket in fresh.values():  # a full bucket: now
        assert now - 1 <= bucket["reset"] <= time.time() + 1
    upsert = {"locations": [{"externalId": "A", "name": "a", "lat": 1, "lng": 2}]}
    assert_ok(api.post(f"/maps/{map_id}/locations/upsert", json=upsert))
    after = bucket_report(read_only)  # any scope; the same account's buckets
    assert (after["general"]["remaining"], after["sync"]["remaining"]) == (GENERAL - 1, SYNC - 1)
    assert after["mapCreation"]["remaining"] == MAP_CREATE
    assert time.time() + 50 <= after["sync"]["reset"] <= time.time() + 61
    spend(api, GENERAL - 1)
    assert_limited(api.get("/maps"))
    empty = api.get("/rate-limits")  # answered when it is needed most
    assert empty.status_code == 200
    assert empty.get_json()["data"]["buckets"]["general"]["remaining"] == 0
    assert limits(empty)[:2] == (GENERAL, 0)  # its headers: the general bucket as it stands
    assert "Retry-After" not in empty.headers


def test_rate_limits_without_a_valid_key_counts_against_the_address(client):
    anonymous = ApiClient(client, None)
    for expected_remaining in range(GENERAL - 1, -1, -1):
        response = anonymous.get("/rate-limits")
        assert_error(response, 401, "MISSING_API_KEY")
        assert limits(response)[:2] == (GENERAL, expected_remaining)
    assert_limited(anonymous.get("/rate-limits"))


def test_a_429_names_the_bucket_and_its_window(api, map_id):
    upsert = {"locations": [{"externalId": "A", "name": "a", "lat": 1, "lng": 2}]}
    for _ in range(SYNC):
        assert_ok(api.post(f"/maps/{map_id}/locations/upsert", json=upsert))
    refused = api.post(f"/maps/{map_id}/locations/upsert", json=upsert)
    assert_limited(refused)
    assert refused.get_json()["error"]["message"] == (
        f"Too many requests: the sync limit ({SYNC} per minute) is reached."
    )
