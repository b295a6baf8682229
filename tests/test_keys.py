"""API keys: issuing, listing, revoking, the 10-key limit, scopes, last use."""

import re
import time
from datetime import datetime, timedelta, timezone

import pytest

from .factories import ApiClient, create_key, error_code
from .helpers import data_of, field_errors, outcome

KEY_FIELDS = {"id", "name", "scope", "expiresAt", "status", "prefix", "createdAt", "lastUsedAt"}
SECRET = re.compile(r"mk_live_[A-Za-z0-9_-]{32,}")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
OWNER = "owner@example.com"


def assert_error(response, status, code):
    assert response.status_code == status, response.get_json()
    assert error_code(response) == code
    assert "details" not in response.get_json()["error"]


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse(timestamp: str) -> datetime:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def new_key(api, **fields) -> dict:
    return data_of(api.post("/keys", json={"name": "k", "scope": "READ_WRITE", **fields}), 201)


def listed(api) -> list[dict]:
    body = data_of(api.get("/keys", query_string={"pageSize": 100}))
    assert body["pagination"]["total"] == len(body["keys"])
    for record in body["keys"]:
        assert set(record) == KEY_FIELDS, record
    return body["keys"]


def by_id(api) -> dict[str, dict]:
    return {record["id"]: record for record in listed(api)}


def own_key_id(api) -> str:
    """The id of the key ``api`` speaks with, found by its prefix."""
    (record,) = [r for r in listed(api) if r["prefix"] == api.key[:12]]
    return record["id"]


# --- create -----------------------------------------------------------------


@pytest.mark.parametrize("scope", ["READ_ONLY", "READ_WRITE"])
def test_create_key_returns_the_record_and_the_secret(api, scope):
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    created = data_of(api.post("/keys", json={"name": "  CI deploy  ", "scope": scope}), 201)
    assert set(created) == KEY_FIELDS | {"key"}
    assert SECRET.fullmatch(created["key"]), created["key"]
    assert created["prefix"] == created["key"][:12]
    assert created["name"] == "CI deploy" and created["scope"] == scope
    assert created["status"] == "active" and created["expiresAt"] is None
    assert created["lastUsedAt"] is None or TIMESTAMP.fullmatch(created["lastUsedAt"])
    assert TIMESTAMP.fullmatch(created["createdAt"])
    after = datetime.now(timezone.utc) + timedelta(seconds=1)
    assert before <= parse(created["createdAt"]) <= after
    assert re.fullmatch(r"[A-Za-z0-9_-]{22,}", created["id"])
    record = {name: value for name, value in created.items() if name != "key"}
    assert by_id(api)[created["id"]] == record


def test_secrets_and_ids_are_distinct(api):
    first, second = new_key(api), new_key(api)
    assert first["key"] != second["key"] and first["id"] != second["id"]


def test_the_new_secret_authenticates_as_the_same_account(api, client):
    created = new_key(api)
    as_new = ApiClient(client, created["key"])
    map_ = data_of(as_new.post("/maps", json={"title": "Via new key"}), 201)
    assert [m["id"] for m in data_of(api.get("/maps"))["maps"]] == [map_["id"]]
    assert {record["id"] for record in listed(as_new)} == {created["id"], own_key_id(api)}


def test_the_secret_never_shows_again(api):
    created = new_key(api)
    body = api.get("/keys").get_data(as_text=True)
    assert created["key"] not in body and '"key"' not in body
    revoked = api.delete(f"/keys/{created['id']}").get_data(as_text=True)
    assert created["key"] not in revoked and '"key"' not in revoked


EXPIRY_INPUTS = {
    "2099-01-02T03:04:05Z": "2099-01-02T03:04:05.000Z",
    "2099-01-02T03:04:05.678Z": "2099-01-02T03:04:05.678Z",
    "2099-01-02T03:04:05.678+02:00": "2099-01-02T01:04:05.678Z",
    "2099-01-02T03:04:05.123-05:30": "2099-01-02T08:34:05.123Z",
    "2099-01-02T03:04:05+00:00": "2099-01-02T03:04:05.000Z",
    "2099-01-02T03:04:05": "2099-01-02T03:04:05.000Z",
    "2099-01-02T03:04:05.250": "2099-01-02T03:04:05.250Z",
    "2099-01-02T03:04Z": "2099-01-02T03:04:00.000Z",
    "20990102T030405Z": "2099-01-02T03:04:05.000Z",
}


def test_expires_at_accepts_iso_8601_and_returns_utc(api):
    created = {sent: new_key(api, expiresAt=sent) for sent in EXPIRY_INPUTS}
    assert {sent: key["expiresAt"] for sent, key in created.items()} == EXPIRY_INPUTS
    assert all(key["status"] == "active" for key in created.values())
    records = by_id(api)
    assert {sent: records[key["id"]]["expiresAt"] for sent, key in created.items()} == EXPIRY_INPUTS


def test_expires_at_without_offset_is_read_as_utc(api):
    soon = datetime.now(timezone.utc) + timedelta(hours=1)
    naive = soon.replace(tzinfo=None).isoformat(timespec="milliseconds")
    created = new_key(api, expiresAt=naive)
    assert created["expiresAt"] == iso(soon)


def test_expires_at_null_means_never(api):
    assert new_key(api, expiresAt=None)["expiresAt"] is None


INVALID_VALUES = {
    "name": ["", "   ", "n" * 101, None, 5],
    "scope": ["read_only", " READ_ONLY ", "READ_WRITE ", "ADMIN", "", None, 1],
    "expiresAt": [
        "2000-01-01T00:00:00Z",
        "1999-12-31T23:59:59",
        "tomorrow",
        "",
        "2099-13-01T00:00:00Z",
        "2099-01-02T25:00:00Z",
        "2099/01/02 03:04:05",
        4102444800,
        True,
        {},
    ],
}


@pytest.mark.parametrize("name", INVALID_VALUES)
def test_create_refuses_invalid_values_naming_the_field(api, name):
    before = listed(api)
    values = INVALID_VALUES[name]
    outcomes = {
        repr(v): outcome(api.post("/keys", json={"name": "k", "scope": "READ_ONLY", name: v}))
        for v in values
    }
    assert outcomes == {repr(v): (400, "VALIDATION_ERROR", [name]) for v in values}
    assert listed(api) == before


def test_expires_at_a_moment_ago_is_refused(api):
    moment_ago = iso(datetime.now(timezone.utc) - timedelta(seconds=2))
    body = {"name": "k", "scope": "READ_ONLY", "expiresAt": moment_ago}
    assert field_errors(api.post("/keys", json=body)).keys() == {"expiresAt"}
    assert len(listed(api)) == 1


def test_expires_at_in_the_distant_past_is_refused_not_a_crash(api):
    # 0001-01-01T00:00:00+01:00 is 0000-12-31T23:00Z: in the past, so a field error.
    body = {"name": "k", "scope": "READ_ONLY", "expiresAt": "0001-01-01T00:00:00+01:00"}
    assert outcome(api.post("/keys", json=body)) == (400, "VALIDATION_ERROR", ["expiresAt"])
    assert len(listed(api)) == 1


def test_expires_at_beyond_year_9999_in_utc_is_refused_not_a_crash(api):
    # A valid ISO 8601 date-time whose UTC instant (10000-01-01T00:59:59Z) no
    # timestamp of the service can hold: the client's error, never a 500.
    body = {"name": "k", "scope": "READ_ONLY", "expiresAt": "9999-12-31T23:59:59-01:00"}
    assert outcome(api.post("/keys", json=body)) == (400, "VALIDATION_ERROR", ["expiresAt"])
    assert len(listed(api)) == 1


@pytest.mark.parametrize(
    "written, meant",
    [
        ("2031-06-01T10.5Z", "2031-06-01T10:30:00.000Z"),  # a fraction of an hour
        ("2031-06-01T10,25Z", "2031-06-01T10:15:00.000Z"),
        ("2031-06-01T10:30.5Z", "2031-06-01T10:30:30.000Z"),  # of a minute
        ("20310601T1030.25+02:00", "2031-06-01T08:30:15.000Z"),
        ("2031-06-01T10:30:00.5Z", "2031-06-01T10:30:00.500Z"),  # of a second
        ("2031-152T10:00:00Z", "2031-06-01T10:00:00.000Z"),  # an ordinal date
        ("2032152T10:00Z", "2032-05-31T10:00:00.000Z"),
        ("2032-366T10:00Z", "2032-12-31T10:00:00.000Z"),
        ("2031-W22-1T10.5Z", "2031-05-26T10:30:00.000Z"),  # a week date
        ("2031-06-01t10:00:00z", "2031-06-01T10:00:00.000Z"),  # RFC 3339's lower case
        ("2031-06-01T10." + "9" * 40 + "Z", "2031-06-01T10:59:59.999Z"),  # cut, not rounded
    ],
)
def test_expires_at_reads_every_iso_8601_form_as_the_moment_it_means(api, written, meant):
    body = {"name": "k", "scope": "READ_ONLY", "expiresAt": written}
    created = data_of(api.post("/keys", json=body), 201)
    assert created["expiresAt"] == meant


@pytest.mark.parametrize(
    "written",
    [
        "2031-366T10:00Z",
        "2031-000T10:00Z",
        "2031-06-01T10.5:30Z",
        "2031-06-01T10:00+01.5",  # a fraction in the offset
        "2031-06-01T10.Z",  # a decimal sign without digits
        "2031-06-01T10:00:00,Z",
        "2031-06-01T10:00:00zZ",
    ],
)
def test_expires_at_on_no_such_day_or_time_is_refused(api, written):
    body = {"name": "k", "scope": "READ_ONLY", "expiresAt": written}
    assert outcome(api.post("/keys", json=body)) == (400, "VALIDATION_ERROR", ["expiresAt"])
    assert len(listed(api)) == 1


def test_name_and_scope_are_required(api):
    assert field_errors(api.post("/keys", json={"name": "k"})).keys() == {"scope"}
    assert field_errors(api.post("/keys", json={"scope": "READ_ONLY"})).keys() == {"name"}
    assert field_errors(api.post("/keys", json={})).keys() == {"name", "scope"}
    assert len(listed(api)) == 1


def test_unknown_fields_are_refused_by_name(api):
    body = {
        "name": "k",
        "scope": "READ_ONLY",
        "key": "mk_live_" + "a" * 43,
        "userId": "someone",
        "updatedAt": "2000-01-01T00:00:00Z",
    }
    assert field_errors(api.post("/keys", json=body)).keys() == {"key", "userId", "updatedAt"}
    assert len(listed(api)) == 1


def test_read_only_fields_are_accepted_and_ignored(api):
    fixture_id = own_key_id(api)
    body = {
        "name": "k",
        "scope": "READ_ONLY",
        "id": fixture_id,
        "status": "revoked",
        "prefix": "mk_live_abcd",
        "createdAt": "2000-01-01T00:00:00.000Z",
        "lastUsedAt": 17,
    }
    created = data_of(api.post("/keys", json=body), 201)
    assert created["id"] != fixture_id
    assert created["status"] == "active"
    assert created["prefix"] == created["key"][:12]
    assert not created["createdAt"].startswith("2000")
    assert created["lastUsedAt"] is None or TIMESTAMP.fullmatch(created["lastUsedAt"])
    assert set(by_id(api)) == {fixture_id, created["id"]}


# --- list -------------------------------------------------------------------


def test_list_keys_newest_first_without_secrets(api, other_api):
    fixture_id = own_key_id(api)
    created = [new_key(api, name=name) for name in ("first", "second", "third")]
    new_key(other_api, name="theirs")
    body = data_of(api.get("/keys"))
    assert set(body) == {"keys", "pagination"}
    assert [record["id"] for record in body["keys"]] == [
        created[2]["id"],
        created[1]["id"],
        created[0]["id"],
        fixture_id,
    ]
    assert body["pagination"] == {"total": 4, "page": 1, "pageSize": 50, "totalPages": 1}
    for record in body["keys"]:
        assert set(record) == KEY_FIELDS
    assert body["keys"][0] == {name: value for name, value in created[2].items() if name != "key"}


def test_list_keys_shows_expired_but_not_revoked_keys(api):
    soon = iso(datetime.now(timezone.utc) + timedelta(milliseconds=500))
    short = new_key(api, name="short", expiresAt=soon)
    revoked = new_key(api, name="revoked")
    data_of(api.delete(f"/keys/{revoked['id']}"))
    time.sleep(0.55)
    records = by_id(api)
    assert revoked["id"] not in records
    assert records[short["id"]]["status"] == "expired"
    assert [record["status"] for record in records.values()] == ["expired", "active"]


# --- revoke -----------------------------------------------------------------


def test_revoke_key_answers_the_record_and_refuses_it_at_once(api, client):
    created = new_key(api, name="doomed", scope="READ_ONLY")
    doomed = ApiClient(client, created["key"])
    data_of(doomed.get("/maps"))

    revoked = data_of(api.delete(f"/keys/{created['id']}"))
    assert set(revoked) == KEY_FIELDS
    assert revoked["status"] == "revoked"
    expected = {
        name: value
        for name, value in created.items()
        if name not in {"key", "status", "lastUsedAt"}
    }
    assert {name: revoked[name] for name in expected} == expected

    assert_error(doomed.get("/maps"), 401, "INVALID_API_KEY")
    assert created["id"] not in by_id(api)


def test_a_key_may_revoke_itself(api):
    own_id = own_key_id(api)
    revoked = data_of(api.delete(f"/keys/{own_id}"))
    assert revoked["id"] == own_id and revoked["status"] == "revoked"
    assert_error(api.get("/keys"), 401, "INVALID_API_KEY")


def test_revoking_twice_is_not_found(api):
    created = new_key(api)
    data_of(api.delete(f"/keys/{created['id']}"))
    assert_error(api.delete(f"/keys/{created['id']}"), 404, "NOT_FOUND")


def test_revoking_an_unknown_key_is_not_found(api):
    before = listed(api)
    key_ids = ["unknown", "x" * 200, "0", api.key, api.key[:12]]
    outcomes = {key_id: outcome(api.delete(f"/keys/{key_id}")) for key_id in key_ids}
    assert outcomes == {key_id: (404, "NOT_FOUND", []) for key_id in key_ids}
    assert listed(api) == before


def test_another_accounts_key_cannot_be_revoked(api, other_api):
    theirs = own_key_id(other_api)
    assert_error(api.delete(f"/keys/{theirs}"), 404, "NOT_FOUND")
    assert by_id(other_api)[theirs]["status"] == "active"


def test_revoking_an_expired_key_works(api):
    soon = iso(datetime.now(timezone.utc) + timedelta(milliseconds=400))
    short = new_key(api, expiresAt=soon)
    time.sleep(0.45)
    revoked = data_of(api.delete(f"/keys/{short['id']}"))
    assert revoked["status"] == "revoked"
    assert short["id"] not in by_id(api)


def test_a_single_key_has_only_delete(api):
    created = new_key(api)
    for method in ("GET", "PUT", "PATCH", "POST"):
        response = api.request(method, f"/keys/{created['id']}", json={"name": "renamed"})
        assert outcome(response) == (405, "METHOD_NOT_ALLOWED", []), method
        assert "DELETE" in response.headers["Allow"]
    assert by_id(api)[created["id"]] == {k: v for k, v in created.items() if k != "key"}


# --- the ten-key limit ------------------------------------------------------


def test_an_eleventh_active_key_is_a_conflict(api):
    # The fixture's key is the first active key.
    for n in range(9):
        new_key(api, name=f"k{n}")
    response = api.post("/keys", json={"name": "eleventh", "scope": "READ_ONLY"})
    assert_error(response, 409, "CONFLICT")
    assert len(listed(api)) == 10
    assert "eleventh" not in {record["name"] for record in listed(api)}


def test_revoked_keys_do_not_count(api):
    created = [new_key(api, name=f"k{n}") for n in range(9)]
    assert_error(api.post("/keys", json={"name": "x", "scope": "READ_ONLY"}), 409, "CONFLICT")
    data_of(api.delete(f"/keys/{created[0]['id']}"))
    replacement = new_key(api, name="replacement")
    assert replacement["id"] in by_id(api)
    assert len(listed(api)) == 10
    assert_error(api.post("/keys", json={"name": "x", "scope": "READ_ONLY"}), 409, "CONFLICT")


def test_expired_keys_do_not_count(api, client):
    for n in range(8):
        new_key(api, name=f"k{n}")
    expires = datetime.now(timezone.utc) + timedelta(seconds=1)
    short = new_key(api, name="short", expiresAt=iso(expires))
    assert short["status"] == "active"
    assert_error(api.post("/keys", json={"name": "x", "scope": "READ_ONLY"}), 409, "CONFLICT")

    time.sleep(max(0.0, (expires - datetime.now(timezone.utc)).total_seconds()) + 0.05)

    assert by_id(api)[short["id"]]["status"] == "expired"
    assert_error(ApiClient(client, short["key"]).get("/maps"), 401, "API_KEY_EXPIRED")
    later = new_key(api, name="later")
    records = listed(api)
    assert len(records) == 11
    assert records[0]["id"] == later["id"]
    assert [r["status"] for r in records].count("active") == 10
    assert_error(api.post("/keys", json={"name": "x", "scope": "READ_ONLY"}), 409, "CONFLICT")


def test_keys_made_with_the_command_count(app, api):
    for n in range(5):
        create_key(app, OWNER, name=f"cli{n}")
    for n in range(4):
        new_key(api, name=f"api{n}")
    assert_error(api.post("/keys", json={"name": "x", "scope": "READ_ONLY"}), 409, "CONFLICT")
    names = [record["name"] for record in listed(api)]
    assert len(names) == 10 and "x" not in names


def test_each_account_has_its_own_ten(api, other_api):
    for n in range(9):
        new_key(api, name=f"k{n}")
    assert_error(api.post("/keys", json={"name": "x", "scope": "READ_ONLY"}), 409, "CONFLICT")
    theirs = new_key(other_api, name="theirs")
    assert theirs["id"] in by_id(other_api)


# --- scope ------------------------------------------------------------------


def test_read_only_key_can_list_but_not_create_or_revoke_keys(api, client):
    read_only = new_key(api, name="ro", scope="READ_ONLY")
    other = new_key(api, name="other")
    ro = ApiClient(client, read_only["key"])

    assert {record["id"] for record in listed(ro)} == {record["id"] for record in listed(api)}
    body = {"name": "x", "scope": "READ_ONLY"}
    assert_error(ro.post("/keys", json=body), 403, "INSUFFICIENT_SCOPE")
    assert_error(ro.post("/keys", json={"bogus": True}), 403, "INSUFFICIENT_SCOPE")
    assert_error(ro.delete(f"/keys/{other['id']}"), 403, "INSUFFICIENT_SCOPE")
    assert_error(ro.delete(f"/keys/{read_only['id']}"), 403, "INSUFFICIENT_SCOPE")

    records = by_id(api)
    assert len(records) == 3
    assert records[other["id"]]["status"] == records[read_only["id"]]["status"] == "active"


# --- last use ---------------------------------------------------------------


def test_last_used_at_is_set_when_the_key_is_used(api, client):
    created = new_key(api)
    assert by_id(api)[created["id"]]["lastUsedAt"] in (None, created["lastUsedAt"])
    before = datetime.now(timezone.utc) - timedelta(seconds=1)

    data_of(ApiClient(client, created["key"]).get("/maps"))

    used = by_id(api)[created["id"]]["lastUsedAt"]
    assert used is not None and TIMESTAMP.fullmatch(used)
    assert before <= parse(used) <= datetime.now(timezone.utc) + timedelta(seconds=1)
    assert parse(used) >= parse(created["createdAt"])


def test_last_used_at_is_written_at_most_once_a_minute(api, client):
    created = new_key(api)
    user = ApiClient(client, created["key"])
    data_of(user.get("/maps"))
    first = by_id(api)[created["id"]]["lastUsedAt"]
    assert first is not None
    time.sleep(0.01)
    data_of(user.get("/maps"))
    assert by_id(api)[created["id"]]["lastUsedAt"] == first


def test_a_request_records_the_callers_own_last_use(api):
    records = listed(api)
    assert len(records) == 1 and records[0]["prefix"] == api.key[:12]
    assert records[0]["lastUsedAt"] is not None
