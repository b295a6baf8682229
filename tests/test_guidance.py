"""Errors that guide: every 401 says what to send (RFC 6750), a key that
expires makes no key that outlives it, request ids tell nothing of the traffic."""

import re
from datetime import datetime, timedelta, timezone

import pytest
import requests

from .factories import ApiClient, create_key, error_code
from .helpers import data_of, field_errors

API = "/api/v1"
OWNER = "owner@example.com"


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def soon(**delta) -> datetime:
    """A moment ahead of now, naive UTC to the millisecond, as the service stores it."""
    moment = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(**delta)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def expired_key(app) -> str:
    from mapapi.extensions import db
    from mapapi.storage.models import ApiKey

    secret = create_key(app, OWNER, expires_at=soon(hours=1))
    with app.app_context():
        key = db.session.scalars(db.select(ApiKey).where(ApiKey.prefix == secret[:12])).one()
        key.expires_at = soon(hours=-1)
        db.session.commit()
    return secret


@pytest.mark.parametrize(
    "authorization, code, invalid_token",
    [
        (None, "MISSING_API_KEY", False),
        ("", "MISSING_API_KEY", False),
        ("Basic dXNlcjpwYXNz", "INVALID_API_KEY", True),
        ("Bearer", "INVALID_API_KEY", True),
        ("Bearer mk_live_unknown", "INVALID_API_KEY", True),
    ],
)
def test_every_401_carries_the_bearer_challenge_and_says_what_to_send(
    client, key, authorization, code, invalid_token
):
    headers = {} if authorization is None else {"Authorization": authorization}
    response = client.get(f"{API}/maps", headers=headers)
    assert response.status_code == 401
    assert error_code(response) == code
    expected = 'Bearer realm="mapapi"' + (', error="invalid_token"' if invalid_token else "")
    assert response.headers["WWW-Authenticate"] == expected
    assert "Authorization: Bearer <key>" in response.get_json()["error"]["message"]


def test_a_revoked_and_an_expired_key_get_invalid_token(app, api, client):
    expired = expired_key(app)
    response = ApiClient(client, expired).get("/maps")
    assert error_code(response) == "API_KEY_EXPIRED"
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="mapapi", error="invalid_token"'
    assert "Authorization: Bearer <key>" in response.get_json()["error"]["message"]

    doomed = create_key(app, OWNER)
    doomed_api = ApiClient(client, doomed)
    (record,) = [k for k in data_of(api.get("/keys"))["keys"] if k["prefix"] == doomed[:12]]
    assert api.delete(f"/keys/{record['id']}").status_code == 200
    response = doomed_api.get("/maps")
    assert error_code(response) == "INVALID_API_KEY"
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="mapapi", error="invalid_token"'


def test_other_errors_carry_no_challenge(app, api, client):
    read_only = ApiClient(client, create_key(app, OWNER, scope="READ_ONLY"))
    refused = read_only.post("/maps", json={"title": "x"})
    assert refused.status_code == 403 and "WWW-Authenticate" not in refused.headers
    missing = api.get("/maps/nothing-here")
    assert missing.status_code == 404 and "WWW-Authenticate" not in missing.headers


def test_the_challenge_travels_over_http(live_server):
    response = requests.get(f"{live_server}{API}/maps", timeout=5)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="mapapi"'


# --- a key that expires cannot make a key that outlives it --------------------


@pytest.fixture
def expiring(app, account, client):
    """A key of the owner that expires in a day, and that moment."""
    moment = soon(days=1)
    return ApiClient(client, create_key(app, OWNER, expires_at=moment)), moment


def test_a_key_made_without_expiry_by_an_expiring_key_expires_with_it(expiring):
    maker, moment = expiring
    made = data_of(maker.post("/keys", json={"name": "child", "scope": "READ_ONLY"}), 201)
    assert made["expiresAt"] == iso(moment)
    (listed,) = [k for k in data_of(maker.get("/keys"))["keys"] if k["id"] == made["id"]]
    assert listed["expiresAt"] == iso(moment)


def test_an_expiring_key_may_make_one_that_expires_sooner_or_at_the_same_time(expiring):
    maker, moment = expiring
    sooner = soon(hours=1)
    made = data_of(maker.post("/keys", json={"name": "a", "scope": "READ_WRITE", "expiresAt": iso(sooner)}), 201)
    assert made["expiresAt"] == iso(sooner)
    same = data_of(maker.post("/keys", json={"name": "b", "scope": "READ_WRITE", "expiresAt": iso(moment)}), 201)
    assert same["expiresAt"] == iso(moment)


@pytest.mark.parametrize("later", [None, "later"])
def test_an_expiring_key_cannot_make_a_permanent_or_later_key(expiring, later):
    maker, moment = expiring
    before = len(data_of(maker.get("/keys"))["keys"])
    expires = None if later is None else iso(moment + timedelta(milliseconds=1))
    response = maker.post("/keys", json={"name": "c", "scope": "READ_WRITE", "expiresAt": expires})
    details = field_errors(response)
    assert set(details) == {"expiresAt"}
    assert iso(moment) in details["expiresAt"][0]
    assert len(data_of(maker.get("/keys"))["keys"]) == before  # nothing was made


def test_a_key_that_never_expires_still_makes_keys_that_never_expire(api):
    made = data_of(api.post("/keys", json={"name": "forever", "scope": "READ_WRITE"}), 201)
    assert made["expiresAt"] is None


# --- request ids ---------------------------------------------------------------


def test_generated_request_ids_are_random_not_a_counter(client):
    ids = [client.get("/healthz").headers["X-Request-Id"] for _ in range(50)]
    assert len(set(ids)) == 50
    assert all(re.fullmatch(r"[0-9a-f]{32}", one) for one in ids)
    # A counter (or a fixed prefix and a counter) shares most of its digits
    # from one id to the next; random ids share about 2 of 32.
    shared = [sum(a == b for a, b in zip(x, y)) for x, y in zip(ids, ids[1:])]
    assert sum(shared) / len(shared) < 6, shared
    prefixes = {one[:16] for one in ids}
    assert len(prefixes) == 50
