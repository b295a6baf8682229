"""A key refused for good is answered without a lookup the next time; every
other key is looked up on every request (http.refused_keys)."""

from mapapi.extensions import db
from mapapi.http.refused_keys import RefusedKeys
from mapapi.services import accounts

from .factories import API, create_account, create_key
from .test_auth import assert_error, assert_ok, expire_key, get_maps

UNKNOWN = "Bearer mk_live_" + "u" * 43


def refused_twice(client, statements, authorization: str, code: str) -> int:
    """Send the refused key twice: the same answer, and the second's statement count."""
    first = get_maps(client, authorization)
    assert_error(first, 401, code)
    statements.reset()
    second = get_maps(client, authorization)
    assert_error(second, 401, code)
    assert second.data == first.data
    assert second.headers["WWW-Authenticate"] == first.headers["WWW-Authenticate"]
    return statements.count


def test_unknown_key_is_refused_without_a_lookup_the_second_time(client, key, statements):
    statements.reset()
    assert_error(get_maps(client, UNKNOWN), 401, "INVALID_API_KEY")
    assert statements.count == 1
    assert refused_twice(client, statements, UNKNOWN, "INVALID_API_KEY") == 0


def test_revoked_key_is_refused_without_a_lookup_once_refused(api, client, statements):
    created = api.created("/keys", {"name": "second", "scope": "READ_WRITE"})
    assert_ok(get_maps(client, f"Bearer {created['key']}"))
    assert_ok(api.delete(f"/keys/{created['id']}"))
    assert refused_twice(client, statements, f"Bearer {created['key']}", "INVALID_API_KEY") == 0
    assert_ok(api.get("/maps"))


def test_expired_key_is_refused_without_a_lookup_once_refused(app, client, account, statements):
    secret = create_key(app, "owner@example.com")
    expire_key(app, secret)
    assert refused_twice(client, statements, f"Bearer {secret}", "API_KEY_EXPIRED") == 0


def test_refused_key_on_a_map_read_is_refused_alike(client, api, statements):
    map_id = api.created("/maps", {"title": "Mine"})["id"]
    path = f"{API}/maps/{map_id}"
    first = client.get(path, headers={"Authorization": UNKNOWN})
    statements.reset()
    second = client.get(path, headers={"Authorization": UNKNOWN})
    assert_error(second, 401, "INVALID_API_KEY")
    assert second.data == first.data and statements.count == 0


def test_key_refused_for_its_plan_is_looked_up_again(app, client, statements):
    create_account(app, "free@example.com", plan="free")
    secret = create_key(app, "free@example.com")
    assert_error(get_maps(client, f"Bearer {secret}"), 403, "PRO_SUBSCRIPTION_REQUIRED")
    with app.app_context():
        accounts.set_plan("free@example.com", "pro")
        db.session.commit()
    statements.reset()
    assert_ok(get_maps(client, f"Bearer {secret}"))
    assert statements.count >= 1


def test_accepted_keys_are_not_remembered(app, api):
    for _ in range(3):
        assert_ok(api.get("/maps"))
    assert len(app.extensions["mapapi.refused_keys"]) == 0


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_at_most_max_keys_are_kept_the_oldest_dropped_first():
    refused = RefusedKeys(max_keys=3)
    for name in "abcd":
        refused.add(name, "INVALID_API_KEY")
    assert len(refused) == 3
    assert refused.code("a") is None
    assert [refused.code(name) for name in "bcd"] == ["INVALID_API_KEY"] * 3


def test_a_key_refused_again_becomes_the_newest():
    refused = RefusedKeys(max_keys=2)
    refused.add("a", "INVALID_API_KEY")
    refused.add("b", "INVALID_API_KEY")
    refused.add("a", "API_KEY_EXPIRED")
    refused.add("c", "INVALID_API_KEY")
    assert refused.code("b") is None
    assert refused.code("a") == "API_KEY_EXPIRED"


def test_a_refusal_is_forgotten_after_its_seconds():
    clock = Clock()
    refused = RefusedKeys(seconds=300.0, clock=clock)
    refused.add("a", "INVALID_API_KEY")
    clock.now += 299.9
    assert refused.code("a") == "INVALID_API_KEY"
    clock.now += 0.1
    assert refused.code("a") is None
