"""Authentication, subscription and scope, and the order in which they are checked."""

import json
import time
from datetime import timedelta

import pytest
from sqlalchemy import select

from mapapi.extensions import db
from mapapi.storage.models import Account, ApiKey
from mapapi.timeutil import utcnow

from .factories import API, ApiClient, create_account, create_key, make_map

OVER_2_MIB = 2 * 1024 * 1024 + 1


def assert_error(response, status: int, code: str) -> dict:
    """The response is exactly the contract's error envelope, without details."""
    assert response.status_code == status, (response.status_code, response.data[:300])
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"].strip()
    return body["error"]


def assert_ok(response, status: int = 200):
    assert response.status_code == status, (response.status_code, response.data[:300])
    body = response.get_json()
    assert set(body) == {"data"}, body
    return body["data"]


def get_maps(client, authorization: str | None):
    headers = {} if authorization is None else {"Authorization": authorization}
    return client.get(f"{API}/maps", headers=headers)


def key_row(app, secret_prefix: str) -> ApiKey:
    with app.app_context():
        return db.session.scalar(select(ApiKey).where(ApiKey.prefix == secret_prefix[:12]))


def expire_key(app, secret: str) -> None:
    """Move a key's expiry into the past (the API refuses past expiries)."""
    with app.app_context():
        row = db.session.scalar(select(ApiKey).where(ApiKey.prefix == secret[:12]))
        row.expires_at = utcnow() - timedelta(seconds=1)
        db.session.commit()


# --- the Authorization header ------------------------------------------------


@pytest.mark.parametrize(
    "authorization", [None, "", "   ", "\t"], ids=["absent", "empty", "spaces", "tab"]
)
def test_missing_or_blank_authorization_is_missing_api_key(client, key, authorization):
    assert_error(get_maps(client, authorization), 401, "MISSING_API_KEY")


@pytest.mark.parametrize(
    "authorization",
    [
        "Basic x",
        "Bearer",
        "Bearer ",
        "Token abc",
        "Bearerabc",
        "bearer: abc",
        "Bearer mk_live_unknown0000000000000000000000000000",
    ],
    ids=[
        "basic",
        "bearer-no-token",
        "bearer-blank-token",
        "token-scheme",
        "no-space",
        "colon",
        "unknown-token",
    ],
)
def test_malformed_or_unknown_authorization_is_invalid_api_key(client, key, authorization):
    assert_error(get_maps(client, authorization), 401, "INVALID_API_KEY")


def test_valid_secret_under_another_scheme_is_invalid_api_key(client, key):
    assert_error(get_maps(client, f"Basic {key}"), 401, "INVALID_API_KEY")
    assert_error(get_maps(client, f"Token {key}"), 401, "INVALID_API_KEY")


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_bearer_scheme_is_case_insensitive(client, key, scheme):
    data = assert_ok(get_maps(client, f"{scheme} {key}"))
    assert data["maps"] == []


def test_secret_is_case_sensitive(client, key):
    assert_error(get_maps(client, f"Bearer {key.upper()}"), 401, "INVALID_API_KEY")


def test_revoked_key_is_invalid_at_once(api, client):
    created = api.created("/keys", {"name": "second", "scope": "READ_WRITE"})
    second = created["key"]
    assert_ok(get_maps(client, f"Bearer {second}"))

    revoked = assert_ok(api.delete(f"/keys/{created['id']}"))
    assert revoked["id"] == created["id"] and revoked["status"] == "revoked"

    assert_error(get_maps(client, f"Bearer {second}"), 401, "INVALID_API_KEY")
    # the revoking key is unaffected
    assert_ok(api.get("/maps"))


def test_key_may_revoke_itself_and_is_then_invalid(api, client):
    own = [k for k in assert_ok(api.get("/keys"))["keys"] if k["prefix"] == api.key[:12]]
    assert len(own) == 1
    assert assert_ok(api.delete(f"/keys/{own[0]['id']}"))["status"] == "revoked"
    assert_error(api.get("/maps"), 401, "INVALID_API_KEY")


def test_expired_key_is_api_key_expired(app, client, account):
    secret = create_key(app, "owner@example.com", expires_at=utcnow() + timedelta(milliseconds=600))
    assert_ok(get_maps(client, f"Bearer {secret}"))
    time.sleep(0.7)
    assert_error(get_maps(client, f"Bearer {secret}"), 401, "API_KEY_EXPIRED")


def test_key_expired_in_the_past_is_api_key_expired_on_every_method(app, client, account):
    secret = create_key(app, "owner@example.com")
    expire_key(app, secret)
    api = ApiClient(client, secret)
    assert_error(api.get("/maps"), 401, "API_KEY_EXPIRED")
    assert_error(api.post("/maps", json={"title": "x"}), 401, "API_KEY_EXPIRED")
    assert_error(api.get("/nope"), 401, "API_KEY_EXPIRED")


# --- subscription and scope --------------------------------------------------


def test_free_plan_account_is_refused_with_pro_subscription_required(app, client):
    create_account(app, "free@example.com", plan="free")
    api = ApiClient(client, create_key(app, "free@example.com"))
    assert_error(api.get("/maps"), 403, "PRO_SUBSCRIPTION_REQUIRED")
    assert_error(api.post("/maps", json={"title": "x"}), 403, "PRO_SUBSCRIPTION_REQUIRED")
    assert_error(api.get("/keys"), 403, "PRO_SUBSCRIPTION_REQUIRED")


def test_pro_plan_whose_end_has_passed_counts_as_free(app, client):
    create_account(app, "lapsed@example.com", plan="pro")
    api = ApiClient(client, create_key(app, "lapsed@example.com"))
    assert_ok(api.get("/maps"))
    with app.app_context():
        account = db.session.scalar(select(Account).where(Account.email == "lapsed@example.com"))
        account.plan_until = utcnow() - timedelta(minutes=1)
        db.session.commit()
    assert_error(api.get("/maps"), 403, "PRO_SUBSCRIPTION_REQUIRED")


def test_pro_plan_ending_soon_works_until_it_ends(app, client):
    create_account(
        app, "ending@example.com", plan="pro", until=utcnow() + timedelta(milliseconds=600)
    )
    api = ApiClient(client, create_key(app, "ending@example.com"))
    assert_ok(api.get("/maps"))
    time.sleep(0.7)
    assert_error(api.get("/maps"), 403, "PRO_SUBSCRIPTION_REQUIRED")


def test_pro_plan_with_future_end_may_use_the_api(app, client):
    create_account(app, "future@example.com", plan="pro", until=utcnow() + timedelta(days=30))
    api = ApiClient(client, create_key(app, "future@example.com"))
    assert_ok(api.get("/maps"))


@pytest.fixture
def read_only(app, client, account):
    return ApiClient(client, create_key(app, "owner@example.com", scope="READ_ONLY"))


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/maps", {"title": "x"}),
        ("PUT", "/maps/{map}", {"title": "changed"}),
        ("PATCH", "/maps/{map}", {"title": "changed"}),
        ("DELETE", "/maps/{map}", None),
        ("POST", "/maps/{map}/tags", {"name": "t"}),
        ("POST", "/keys", {"name": "k", "scope": "READ_WRITE"}),
    ],
)
def test_read_only_key_cannot_write(api, read_only, method, path, body):
    map_ = make_map(api, title="Kept")
    kwargs = {} if body is None else {"json": body}
    response = read_only.request(method, path.format(map=map_["id"]), **kwargs)
    assert_error(response, 403, "INSUFFICIENT_SCOPE")
    # nothing changed
    assert assert_ok(api.get(f"/maps/{map_['id']}")) == map_
    assert assert_ok(api.get("/maps"))["pagination"]["total"] == 1
    assert assert_ok(api.get(f"/maps/{map_['id']}/tags"))["tags"] == []
    assert assert_ok(api.get("/keys"))["pagination"]["total"] == 2


def test_read_only_key_can_read(api, read_only):
    map_ = make_map(api)
    assert assert_ok(read_only.get(f"/maps/{map_['id']}")) == map_
    assert [m["id"] for m in assert_ok(read_only.get("/maps"))["maps"]] == [map_["id"]]
    assert assert_ok(read_only.get("/keys"))["pagination"]["total"] == 2


# --- the order of checks (docs/api.md) ----------------------------------------


def test_unknown_path_without_key_is_401_before_404(client):
    assert_error(client.get(f"{API}/nope"), 401, "MISSING_API_KEY")
    assert_error(
        client.get(f"{API}/nope", headers={"Authorization": "Bearer wrong"}), 401, "INVALID_API_KEY"
    )


def test_wrong_method_without_key_is_401_before_405(client):
    assert_error(client.patch(f"{API}/maps"), 401, "MISSING_API_KEY")


def test_read_only_key_on_unknown_path_with_delete_is_403_before_404(read_only):
    assert_error(read_only.delete("/nope"), 403, "INSUFFICIENT_SCOPE")
    assert_error(read_only.delete("/maps/unknown-id"), 403, "INSUFFICIENT_SCOPE")


def test_read_only_key_with_wrong_method_is_403_before_405(read_only):
    assert_error(read_only.delete("/maps"), 403, "INSUFFICIENT_SCOPE")


def test_free_plan_with_read_only_key_writing_is_subscription_before_scope(app, client):
    create_account(app, "free@example.com", plan="free")
    api = ApiClient(client, create_key(app, "free@example.com", scope="READ_ONLY"))
    assert_error(api.post("/maps", json={"title": "x"}), 403, "PRO_SUBSCRIPTION_REQUIRED")
    assert_error(api.delete("/nope"), 403, "PRO_SUBSCRIPTION_REQUIRED")


def test_free_plan_on_unknown_path_is_403_before_404(app, client):
    create_account(app, "free@example.com", plan="free")
    api = ApiClient(client, create_key(app, "free@example.com"))
    assert_error(api.get("/nope"), 403, "PRO_SUBSCRIPTION_REQUIRED")


def allowed(response) -> set[str]:
    assert "Allow" in response.headers, dict(response.headers)
    # HEAD is implied by GET; the contract does not say whether to list it.
    return {m.strip() for m in response.headers["Allow"].split(",")} - {"HEAD"}


@pytest.mark.parametrize(
    "method, path, methods",
    [
        ("PATCH", "/maps", {"GET", "POST"}),
        ("DELETE", "/maps", {"GET", "POST"}),
        ("PATCH", "/maps/{map}", {"GET", "PUT", "DELETE"}),
        ("POST", "/maps/{map}", {"GET", "PUT", "DELETE"}),
        # (other methods on .../locations/bulk address a location whose id is "bulk")
        ("GET", "/maps/{map}/locations/some-location/layers", {"PUT"}),
        ("GET", "/keys/{key}", {"DELETE"}),
        ("PUT", "/keys", {"GET", "POST"}),
        ("OPTIONS", "/maps", {"GET", "POST"}),
    ],
)
def test_wrong_method_with_valid_key_is_405_with_allow(api, method, path, methods):
    map_ = make_map(api)
    response = api.request(method, path.format(map=map_["id"], key="some-key-id"))
    assert_error(response, 405, "METHOD_NOT_ALLOWED")
    assert allowed(response) == methods


def test_oversized_body_to_another_accounts_map_is_413_before_404(api, other_api):
    map_ = make_map(api)
    body = b'{"title": "' + b"a" * OVER_2_MIB + b'"}'
    response = other_api.put(f"/maps/{map_['id']}", data=body, content_type="application/json")
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")
    assert assert_ok(api.get(f"/maps/{map_['id']}")) == map_


def test_oversized_body_to_unknown_path_is_404_before_413(api):
    body = b"a" * OVER_2_MIB
    assert_error(api.post("/nope", data=body, content_type="application/json"), 404, "NOT_FOUND")


def test_oversized_body_with_wrong_method_is_405_before_413(api):
    body = b"a" * OVER_2_MIB
    response = api.request("PATCH", "/maps", data=body, content_type="application/json")
    assert_error(response, 405, "METHOD_NOT_ALLOWED")


def test_malformed_json_to_another_accounts_map_is_404_before_400(api, other_api):
    map_ = make_map(api)
    for path in (f"/maps/{map_['id']}", f"/maps/{map_['id']}/locations"):
        method = "PUT" if path.count("/") == 2 else "POST"
        response = other_api.request(
            method, path, data=b'{"title":', content_type="application/json"
        )
        assert_error(response, 404, "NOT_FOUND")
    assert assert_ok(api.get(f"/maps/{map_['id']}")) == map_


def test_invalid_body_to_unknown_map_is_404_before_400(api):
    response = api.put("/maps/does-not-exist", json={"title": 5, "bogus": True})
    assert_error(response, 404, "NOT_FOUND")


# --- outside /api/v1 --------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", "Basic x"])
def test_healthz_needs_no_key(client, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    response = client.get("/healthz", headers=headers)
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert json.loads(response.data) == {"data": {"status": "ok"}}


def test_unknown_path_outside_api_needs_no_key(client):
    assert_error(client.get("/nope"), 404, "NOT_FOUND")


# --- lastUsedAt --------------------------------------------------------------------


def test_last_used_at_is_written_at_most_once_a_minute(app, api, key):
    assert key_row(app, key).last_used_at is None

    before = utcnow()
    assert_ok(api.get("/maps"))
    first = key_row(app, key).last_used_at
    assert first is not None
    assert before - timedelta(seconds=1) <= first <= utcnow() + timedelta(seconds=1)

    time.sleep(0.01)
    assert_ok(api.get("/maps"))
    assert_ok(api.post("/maps", json={"title": "x"}), 201)
    assert key_row(app, key).last_used_at == first

    listed = [k for k in assert_ok(api.get("/keys"))["keys"] if k["prefix"] == key[:12]]
    assert (
        listed[0]["lastUsedAt"]
        == first.strftime("%Y-%m-%dT%H:%M:%S.") + f"{first.microsecond // 1000:03d}Z"
    )


def test_last_used_at_is_written_again_after_a_minute(app, api, key):
    assert_ok(api.get("/maps"))
    old = utcnow() - timedelta(minutes=2)
    with app.app_context():
        row = db.session.scalar(select(ApiKey).where(ApiKey.prefix == key[:12]))
        row.last_used_at = old
        db.session.commit()
    assert_ok(api.get("/maps"))
    assert key_row(app, key).last_used_at > old + timedelta(minutes=1)


def test_failed_authentication_does_not_touch_last_used_at(app, client, key):
    assert_error(get_maps(client, f"Basic {key}"), 401, "INVALID_API_KEY")
    assert key_row(app, key).last_used_at is None
