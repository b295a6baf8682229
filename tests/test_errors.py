"""The error envelope, every error code, malformed bodies, and the common headers."""

import json
import logging
import os
import re
from datetime import timedelta

import pytest
import requests
from sqlalchemy import select

from mapapi import create_app
from mapapi.extensions import db
from mapapi.http.headers import new_request_id
from mapapi.storage.models import ApiKey
from mapapi.timeutil import utcnow

from .factories import API, ApiClient, create_account, create_key, make_map, make_tag

TWO_MIB = 2 * 1024 * 1024
REQUEST_ID_CHARS = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def assert_clean(response) -> None:
    """JSON only: no HTML page, no stack trace."""
    assert response.mimetype == "application/json", response.data[:200]
    text = response.get_data(as_text=True)
    assert "Traceback" not in text
    assert "<html" not in text.lower() and "<!doctype" not in text.lower()


def assert_error(response, status: int, code: str) -> dict:
    """Exactly ``{"error": {"code", "message"}}``: no details, no other key."""
    assert response.status_code == status, (response.status_code, response.data[:300])
    assert_clean(response)
    body = response.get_json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"].strip()
    return body["error"]


def assert_field_error(response, *fields: str) -> dict:
    """400 VALIDATION_ERROR whose details name exactly ``fields``."""
    assert response.status_code == 400, (response.status_code, response.data[:300])
    assert_clean(response)
    body = response.get_json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == "VALIDATION_ERROR"
    assert isinstance(body["error"]["message"], str) and body["error"]["message"].strip()
    details = body["error"]["details"]
    assert set(details) == set(fields), details
    for messages in details.values():
        assert messages, details
    return details


def assert_malformed(response) -> dict:
    """A body the service cannot read: 400 VALIDATION_ERROR without details."""
    return assert_error(response, 400, "VALIDATION_ERROR")


@pytest.fixture
def app_config(app_config, request):
    """Tests may pass settings through ``indirect`` parametrization."""
    app_config.update(getattr(request, "param", {}))
    return app_config


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


# --- every code of the table ----------------------------------------------------


def test_missing_api_key_envelope(client):
    assert_error(client.get(f"{API}/maps"), 401, "MISSING_API_KEY")


def test_invalid_api_key_envelope_does_not_echo_the_token(client):
    token = "mk_live_" + "s3cr3t" * 8
    response = client.get(f"{API}/maps", headers={"Authorization": f"Bearer {token}"})
    assert_error(response, 401, "INVALID_API_KEY")
    assert "s3cr3t" not in response.get_data(as_text=True)


def test_api_key_expired_envelope(app, client, account):
    secret = create_key(app, "owner@example.com")
    with app.app_context():
        row = db.session.scalar(select(ApiKey).where(ApiKey.prefix == secret[:12]))
        row.expires_at = utcnow() - timedelta(seconds=5)
        db.session.commit()
    response = ApiClient(client, secret).get("/maps")
    error = assert_error(response, 401, "API_KEY_EXPIRED")
    assert secret not in response.get_data(as_text=True) and secret not in error["message"]


def test_pro_subscription_required_envelope(app, client):
    create_account(app, "free@example.com", plan="free")
    assert_error(
        ApiClient(client, create_key(app, "free@example.com")).get("/maps"),
        403,
        "PRO_SUBSCRIPTION_REQUIRED",
    )


def test_insufficient_scope_envelope(app, client, account):
    read_only = ApiClient(client, create_key(app, "owner@example.com", scope="READ_ONLY"))
    assert_error(read_only.post("/maps", json={"title": "x"}), 403, "INSUFFICIENT_SCOPE")


@pytest.mark.parametrize(
    "path", ["/maps/unknown", "/maps/{map}/locations/unknown", "/nope", "/maps/{map}/nope", ""]
)
def test_not_found_envelope_under_api(api, map_id, path):
    assert_error(api.get(path.format(map=map_id)), 404, "NOT_FOUND")


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "//maps"),
        ("POST", "//maps"),
        ("GET", "/maps//locations"),  # merged, the path of another route
        ("POST", "/maps//locations"),
        ("POST", "/maps/{map}//locations/bulk"),
        ("PUT", "/maps/{map}/locations//layers"),
        ("DELETE", "/maps/{map}//locations"),
    ],
)
def test_doubled_slashes_are_not_found_not_redirected(api, map_id, method, path):
    """An empty path segment is no route: a JSON 404, never a 308 to the merged path."""
    body = {"locations": [{"name": "x", "lat": 0, "lng": 0}], "layerIds": []}
    response = api.request(method, path.format(map=map_id), json=body)
    assert_error(response, 404, "NOT_FOUND")
    assert "Location" not in response.headers


@pytest.mark.parametrize(
    "path", ["/nope", "/api", "/api/v2/maps", "/healthz/x", "/favicon.ico"]
)
def test_unknown_path_outside_api_is_json_not_found(client, path):
    assert_error(client.get(path), 404, "NOT_FOUND")
    assert_error(client.post(path, data=b"x"), 404, "NOT_FOUND")


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_no_static_file_route_outside_the_contract(client, method):
    """docs/api.md: only /healthz lives outside /api/v1; /static/... is an unknown path."""
    assert_error(client.open("/static/x.js", method=method), 404, "NOT_FOUND")


def test_method_not_allowed_envelope_has_allow(api):
    response = api.request("PATCH", "/maps")
    assert_error(response, 405, "METHOD_NOT_ALLOWED")
    assert {m.strip() for m in response.headers["Allow"].split(",")} - {"HEAD"} == {"GET", "POST"}


def test_wrong_method_outside_api_is_json_405(client):
    response = client.post("/healthz")
    assert_error(response, 405, "METHOD_NOT_ALLOWED")
    assert "GET" in response.headers["Allow"]


def test_conflict_envelope_for_duplicate_tag(api, map_id):
    make_tag(api, map_id, name="cafe")
    assert_error(api.post(f"/maps/{map_id}/tags", json={"name": " cafe "}), 409, "CONFLICT")


def test_conflict_envelope_for_eleventh_key(api):
    for n in range(9):  # the fixture's key is the first
        api.created("/keys", {"name": f"k{n}", "scope": "READ_ONLY"})
    assert_error(api.post("/keys", json={"name": "k10", "scope": "READ_ONLY"}), 409, "CONFLICT")


def test_validation_error_names_body_fields(api):
    details = assert_field_error(
        api.post("/maps", json={"title": "", "style": " dark ", "bogus": 1}),
        "title",
        "style",
        "bogus",
    )
    assert all(isinstance(m, list) and all(isinstance(s, str) for s in m) for m in details.values())


def test_validation_error_names_query_fields(api):
    assert_field_error(api.get("/maps?pageSize=0"), "pageSize")
    assert_field_error(api.get("/maps?page=abc"), "page")


def test_validation_error_keys_bulk_items_by_index(api, map_id):
    good = {"name": "ok", "lat": 1, "lng": 2}
    body = {"locations": [good, good, {"name": "bad", "lat": 91, "lng": 2}, good]}
    details = assert_field_error(api.post(f"/maps/{map_id}/locations/bulk", json=body), "locations")
    assert set(details["locations"]) == {"2"}
    assert set(details["locations"]["2"]) == {"lat"}


def test_payload_too_large_envelope(api):
    body = b'{"title": "' + b"a" * TWO_MIB + b'"}'
    assert_error(
        api.post("/maps", data=body, content_type="application/json"), 413, "PAYLOAD_TOO_LARGE"
    )


@pytest.mark.parametrize(
    "app_config", [{"RATELIMIT_GENERAL": "1 per minute"}], indirect=True, ids=["1-per-minute"]
)
def test_rate_limit_exceeded_envelope(api):
    assert api.get("/maps").status_code == 200
    response = api.get("/maps")
    assert_error(response, 429, "RATE_LIMIT_EXCEEDED")
    assert int(response.headers["Retry-After"]) >= 1


def test_internal_error_is_logged_with_request_id_and_hides_internals(app, api, caplog):
    def boom():
        raise RuntimeError("secret internals: SELECT * FROM api_keys")

    app.add_url_rule(f"{API}/boom", "boom", boom)
    with caplog.at_level(logging.ERROR):
        response = api.get("/boom", headers={"X-Request-Id": "boom-request-42"})
    error = assert_error(response, 500, "INTERNAL_ERROR")
    text = response.get_data(as_text=True)
    assert "secret internals" not in text and "RuntimeError" not in text and "SELECT" not in text
    assert api.key not in text
    assert response.headers["X-Request-Id"] == "boom-request-42"
    assert "secret internals" not in error["message"]
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert logged, "the unexpected error was not logged"
    assert any("boom-request-42" in r.getMessage() for r in logged), [
        r.getMessage() for r in logged
    ]
    assert any(r.exc_info and isinstance(r.exc_info[1], RuntimeError) for r in logged)


def test_service_unavailable_when_database_cannot_be_reached(app_config, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    broken = create_app(
        {**app_config, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{blocker / 'db.sqlite3'}"}
    )
    client = broken.test_client()
    response = client.get("/healthz")
    assert_error(response, 503, "SERVICE_UNAVAILABLE")
    assert "X-Request-Id" in response.headers
    response = client.get(f"{API}/maps", headers={"Authorization": "Bearer mk_live_whatever"})
    assert_error(response, 503, "SERVICE_UNAVAILABLE")
    assert "sqlite" not in response.get_data(as_text=True).lower()


# --- bodies the service cannot read: 400 without details ------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b'{"title":',
        b'{"title": "x",}',
        b"{'title': 'x'}",
        b'{"title": "\xff\xfe"}',
        b'{"title": "caf\xe9"}',
        json.dumps({"title": "x"}).encode("utf-16"),
        json.dumps({"title": "x"}).encode("utf-16-le"),
        json.dumps({"title": "x"}).encode("utf-32"),
        b"[]",
        b'[{"title": "x"}]',
        b'"title"',
        b"1",
        b"null",
        b"true",
        b"",
        b"   ",
        b"[" * 100_000 + b"]" * 100_000,
    ],
    ids=[
        "truncated",
        "trailing-comma",
        "single-quotes",
        "invalid-utf8",
        "latin1",
        "utf16-bom",
        "utf16-le",
        "utf32",
        "empty-array",
        "array",
        "string",
        "number",
        "null",
        "true",
        "empty",
        "blank",
        "deep-array",
    ],
)
def test_unreadable_body_is_validation_error_without_details(api, raw):
    assert_malformed(api.post("/maps", data=raw, content_type="application/json"))
    assert api.get("/maps").get_json()["data"]["pagination"]["total"] == 0


def test_unreadable_body_on_put_is_validation_error_without_details(api, map_id):
    assert_malformed(api.put(f"/maps/{map_id}", data=b'{"title":', content_type="application/json"))
    assert_malformed(api.put(f"/maps/{map_id}", data=b"[]", content_type="application/json"))


def test_empty_post_without_content_type_is_validation_error(api):
    assert_malformed(api.post("/maps"))


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/vnd.api+json",
        "text/json",
    ],
)
def test_body_without_json_content_type_is_validation_error(api, content_type):
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = api.post("/maps", data=json.dumps({"title": "x"}).encode(), headers=headers)
    assert_malformed(response)
    assert api.get("/maps").get_json()["data"]["pagination"]["total"] == 0


def test_form_encoded_body_is_validation_error(api):
    assert_malformed(api.post("/maps", data={"title": "x"}))


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "application/json;charset=UTF-8", "Application/JSON"],
)
def test_json_content_type_with_parameters_is_accepted(api, content_type):
    response = api.post(
        "/maps", data=json.dumps({"title": "Café"}).encode(), headers={"Content-Type": content_type}
    )
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["data"]["title"] == "Café"


def test_exactly_two_mib_is_not_too_large(api):
    prefix, suffix = b'{"title": "x", "description": "', b'"}'
    body = prefix + b"a" * (TWO_MIB - len(prefix) - len(suffix)) + suffix
    assert len(body) == TWO_MIB
    response = api.post("/maps", data=body, content_type="application/json")
    # the description is too long for the schema: refused, but not for its size
    assert_field_error(response, "description")


def test_one_byte_over_two_mib_is_too_large(api):
    prefix, suffix = b'{"title": "x", "description": "', b'"}'
    body = prefix + b"a" * (TWO_MIB + 1 - len(prefix) - len(suffix)) + suffix
    assert len(body) == TWO_MIB + 1
    assert_error(
        api.post("/maps", data=body, content_type="application/json"), 413, "PAYLOAD_TOO_LARGE"
    )


def test_chunked_body_over_two_mib_is_too_large_over_http(api, live_server):
    """Without a Content-Length the limit still holds (waitress reads the chunks)."""
    body = b'{"title": "' + b"a" * TWO_MIB + b'"}'

    def chunks():
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    headers = {"Authorization": f"Bearer {api.key}", "Content-Type": "application/json"}
    response = requests.post(f"{live_server}{API}/maps", data=chunks(), headers=headers, timeout=30)
    assert response.status_code == 413
    assert response.json() == {
        "error": {"code": "PAYLOAD_TOO_LARGE", "message": response.json()["error"]["message"]}
    }
    small = requests.post(
        f"{live_server}{API}/maps",
        data=iter([b'{"title": "chunked"}']),
        headers=headers,
        timeout=30,
    )
    assert small.status_code == 201 and small.json()["data"]["title"] == "chunked"


# --- values that are field errors: 400 with details ----------------------------------


@pytest.mark.parametrize(
    "literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", str(10**400)]
)
def test_non_finite_or_huge_location_number_is_a_field_error(api, map_id, literal):
    raw = ('{"name": "x", "lat": %s, "lng": 1}' % literal).encode()
    details = assert_field_error(
        api.post(f"/maps/{map_id}/locations", data=raw, content_type="application/json"), "lat"
    )
    assert details["lat"]
    assert api.get(f"/maps/{map_id}/locations").get_json()["data"]["pagination"]["total"] == 0


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_map_number_is_a_field_error(api, literal):
    raw = ('{"title": "x", "centerLat": %s, "zoom": %s}' % (literal, literal)).encode()
    assert_field_error(
        api.post("/maps", data=raw, content_type="application/json"), "centerLat", "zoom"
    )


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_number_inside_properties_is_a_field_error(api, map_id, literal):
    raw = ('{"name": "x", "lat": 1, "lng": 1, "properties": {"a": [%s]}}' % literal).encode()
    assert_field_error(
        api.post(f"/maps/{map_id}/locations", data=raw, content_type="application/json"),
        "properties",
    )


def test_nul_character_in_a_string_field_is_a_field_error(api):
    raw = b'{"title": "a\\u0000b"}'
    assert_field_error(api.post("/maps", data=raw, content_type="application/json"), "title")


@pytest.mark.parametrize(
    "properties",
    [
        b'{"a\\u0000": 1}',
        b'{"a": "x\\u0000"}',
        b'{"a": {"b": ["\\u0000"]}}',
        b'{"\\u0000": {"b": 1}}',
    ],
    ids=["key", "value", "nested-value", "nul-only-key"],
)
def test_nul_character_in_properties_is_a_field_error(api, map_id, properties):
    raw = b'{"name": "x", "lat": 1, "lng": 1, "properties": ' + properties + b"}"
    assert_field_error(
        api.post(f"/maps/{map_id}/locations", data=raw, content_type="application/json"),
        "properties",
    )
    assert api.get(f"/maps/{map_id}/locations").get_json()["data"]["pagination"]["total"] == 0


def test_deeply_nested_value_is_refused_not_crashing(api, map_id):
    deep = b"[" * 100_000 + b"]" * 100_000
    for raw, path in (
        (b'{"title": ' + deep + b"}", "/maps"),
        (
            b'{"name": "x", "lat": 1, "lng": 1, "properties": {"a": ' + deep + b"}}",
            f"/maps/{map_id}/locations",
        ),
    ):
        response = api.post(path, data=raw, content_type="application/json")
        assert response.status_code == 400, response.data[:300]
        assert_clean(response)
        body = response.get_json()
        assert set(body) == {"error"} and body["error"]["code"] == "VALIDATION_ERROR"
        assert set(body["error"]) <= {"code", "message", "details"}


# --- headers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "sent", ["abc", "x", "A-Z.a_z:0-9", "a" * 128, "550e8400-e29b-41d4-a716-446655440000"]
)
def test_valid_client_request_id_is_echoed(api, client, sent):
    for response in (
        api.get("/maps", headers={"X-Request-Id": sent}),
        api.get("/nope", headers={"X-Request-Id": sent}),
        client.get(f"{API}/maps", headers={"X-Request-Id": sent}),
        client.get("/healthz", headers={"X-Request-Id": sent}),
        client.get("/nope", headers={"X-Request-Id": sent}),
    ):
        assert response.headers["X-Request-Id"] == sent


@pytest.mark.parametrize(
    "sent",
    [
        "has space",
        "a/b",
        "a;b",
        "<script>",
        "a" * 129,
        "",
        "abc\u00e9".encode("utf-8").decode("latin-1"),
        "a,b",
    ],
    ids=["space", "slash", "semicolon", "angle", "129-chars", "empty", "non-ascii", "comma"],
)
def test_invalid_client_request_id_is_replaced(api, client, sent):
    for response in (
        api.get("/maps", headers={"X-Request-Id": sent}),
        client.get(f"{API}/maps", headers={"X-Request-Id": sent}),
        client.get("/healthz", headers={"X-Request-Id": sent}),
    ):
        generated = response.headers["X-Request-Id"]
        assert generated != sent
        assert REQUEST_ID_CHARS.fullmatch(generated), generated


def test_generated_request_ids_differ(api, client):
    ids = {api.get("/maps").headers["X-Request-Id"] for _ in range(3)}
    ids.add(client.get("/healthz").headers["X-Request-Id"])
    ids.add(client.get("/nope").headers["X-Request-Id"])
    assert len(ids) == 5
    assert all(REQUEST_ID_CHARS.fullmatch(i) for i in ids)


def _api_responses(app, api, client):
    map_id = make_map(api)["id"]
    keep_id = make_map(api)["id"]
    make_tag(api, keep_id, name="t")
    read_only = ApiClient(client, create_key(app, "owner@example.com", scope="READ_ONLY"))
    return {
        "200": api.get("/maps"),
        "201": api.post("/maps", json={"title": "x"}),
        "200-delete": api.delete(f"/maps/{map_id}"),
        "400": api.post("/maps", json={}),
        "400-malformed": api.post("/maps", data=b"{", content_type="application/json"),
        "401": client.get(f"{API}/maps"),
        "401-unknown-path": client.get(f"{API}/nope"),
        "403": read_only.post("/maps", json={"title": "x"}),
        "404": api.get("/maps/unknown"),
        "404-route": api.get("/nope"),
        "405": api.request("PATCH", "/maps"),
        "409": api.post(f"/maps/{keep_id}/tags", json={"name": "t"}),
        "413": api.post("/maps", data=b"a" * (TWO_MIB + 1), content_type="application/json"),
    }


def test_every_api_response_has_no_store_and_nosniff(app, api, client):
    responses = _api_responses(app, api, client)
    statuses = {name: r.status_code for name, r in responses.items()}
    assert statuses == {
        "200": 200,
        "201": 201,
        "200-delete": 200,
        "400": 400,
        "400-malformed": 400,
        "401": 401,
        "401-unknown-path": 401,
        "403": 403,
        "404": 404,
        "404-route": 404,
        "405": 405,
        "409": 409,
        "413": 413,
    }
    for name, response in responses.items():
        assert response.headers.get("Cache-Control") == "no-store", name
        assert response.headers.get("X-Content-Type-Options") == "nosniff", name
        assert REQUEST_ID_CHARS.fullmatch(response.headers.get("X-Request-Id", "")), name
        assert_clean(response)


@pytest.mark.parametrize(
    "app_config", [{"RATELIMIT_GENERAL": "1 per minute"}], indirect=True, ids=["1-per-minute"]
)
def test_rate_limited_response_has_no_store_and_nosniff(api):
    api.get("/maps")
    response = api.get("/maps")
    assert response.status_code == 429
    assert response.headers.get("Cache-Control") == "no-store"
    assert response.headers.get("X-Content-Type-Options") == "nosniff"
    assert "X-Request-Id" in response.headers


def test_responses_outside_api_still_carry_request_id(client):
    for response in (client.get("/healthz"), client.get("/nope"), client.get("/")):
        assert REQUEST_ID_CHARS.fullmatch(response.headers.get("X-Request-Id", ""))


def test_request_ids_stay_unique_past_each_refill_of_random_bytes():
    ids = [new_request_id() for _ in range(3 * 256 + 5)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{32}", request_id) for request_id in ids)


def test_a_forked_child_never_repeats_its_parents_request_ids():
    new_request_id()  # the parent's thread now holds random bytes for 255 more
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.write(writer, "".join(new_request_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    from_child = os.read(reader, 96).decode()
    os.close(reader)
    parents = {new_request_id() for _ in range(255)}
    assert len(from_child) == 96
    assert not parents & {from_child[i : i + 32] for i in range(0, 96, 32)}
