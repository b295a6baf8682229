"""OAuth for /mcp: discovery, registration, approval, tokens, grants."""

from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from mapapi.extensions import db

from .factories import create_account, create_key
from .oauth_flow import (
    REDIRECT,
    approve,
    authorize_url,
    call,
    code_of,
    connect,
    exchange,
    form_token,
    mcp,
    pkce,
    refresh,
    register,
)

CHALLENGE = 'Bearer realm="mapapi", resource_metadata="http://localhost/.well-known/oauth-protected-resource/mcp"'


def test_a_401_from_mcp_points_to_the_metadata_documents(client):
    answer = mcp(client, "", "tools/list")
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == CHALLENGE
    resource = client.get("/.well-known/oauth-protected-resource/mcp").get_json()
    assert resource == {
        "resource": "http://localhost/mcp",
        "authorization_servers": ["http://localhost"],
        "scopes_supported": ["mapapi:read", "mapapi:write"],
        "bearer_methods_supported": ["header"],
        "resource_name": "mapapi",
    }
    server = client.get("/.well-known/oauth-authorization-server").get_json()
    assert server["issuer"] == resource["authorization_servers"][0]
    assert server["authorization_endpoint"] == "http://localhost/oauth/authorize"
    assert server["token_endpoint"] == "http://localhost/oauth/token"  # noqa: S105 - a URL
    assert server["registration_endpoint"] == "http://localhost/oauth/register"
    assert server["response_types_supported"] == ["code"]
    assert server["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["token_endpoint_auth_methods_supported"] == ["none"]
    assert server["client_id_metadata_document_supported"] is True


def test_the_public_url_is_the_base_of_every_oauth_url(app_config, app):
    app.config["PUBLIC_URL"] = "https://maps.example.com"
    client = app.test_client()
    server = client.get("/.well-known/oauth-authorization-server").get_json()
    assert server["issuer"] == "https://maps.example.com"
    assert server["token_endpoint"] == "https://maps.example.com/oauth/token"  # noqa: S105 - a URL
    answer = mcp(client, "", "tools/list")
    assert 'resource_metadata="https://maps.example.com/.well-known/oauth-protected-resource/mcp"' in (
        answer.headers["WWW-Authenticate"]
    )


@pytest.mark.parametrize("public_url", ["", "http://maps.example.com"])
def test_oauth_is_refused_on_plain_http_that_is_not_loopback(app, public_url):
    app.config["PUBLIC_URL"] = public_url
    client = app.test_client()
    # Host: localhost proves nothing: the connection comes from elsewhere.
    remote = {"REMOTE_ADDR": "203.0.113.9"}
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"):
        assert client.get(path, environ_base=remote).status_code == 404
    assert client.post("/oauth/register", json={"redirect_uris": [REDIRECT]}, environ_base=remote).status_code == 404
    assert client.get("/oauth/authorize?client_id=x", environ_base=remote).status_code == 404
    assert client.post("/oauth/token", data={}, environ_base=remote).status_code == 404
    answer = client.post("/mcp", json={}, environ_base=remote)
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == 'Bearer realm="mapapi"'


def test_registration_takes_public_clients_and_ignores_what_it_does_not_use(client):
    answer = client.post(
        "/oauth/register",
        json={
            "client_name": "Inspector",
            "redirect_uris": ["https://app.example/cb", "http://localhost/cb"],
            "logo_uri": 7,
            "token_endpoint_auth_method": "client_secret_basic",
            "software_id": "x",
        },
    )
    assert answer.status_code == 201
    body = answer.get_json()
    assert body["client_id"] and "client_secret" not in body
    assert body["token_endpoint_auth_method"] == "none"  # noqa: S105 - a method name
    assert body["redirect_uris"] == ["https://app.example/cb", "http://localhost/cb"]


@pytest.mark.parametrize(
    "uris",
    [["http://app.example/cb"], ["javascript:alert(1)"], [], "https://app.example/cb", ["https://a.example/#f"]],
)
def test_registration_refuses_redirect_uris_that_are_not_https_or_loopback(client, uris):
    answer = client.post("/oauth/register", json={"client_name": "x", "redirect_uris": uris})
    assert answer.status_code == 400
    assert answer.get_json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


def test_registration_refuses_a_body_that_is_not_a_json_object(client):
    for sent in ({"data": "x", "content_type": "text/plain"}, {"data": "[1]", "content_type": "application/json"}):
        answer = client.post("/oauth/register", **sent)
        assert answer.status_code == 400 and answer.get_json()["error"] == "invalid_client_metadata"


def test_twenty_registrations_an_hour_from_one_address_then_429(client):
    answers = [client.post("/oauth/register", json={"redirect_uris": ["bad"]}) for _ in range(20)]
    assert {answer.status_code for answer in answers} == {400}  # refused ones count too
    refused = client.post("/oauth/register", json={"redirect_uris": [REDIRECT]})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert refused.get_json()["error"] == "too_many_requests"


def test_an_approved_client_calls_tools_with_its_token(client, key, account):
    tokens = connect(client, key)
    assert tokens["token_type"].lower() == "bearer" and tokens["scope"] == "mapapi:read mapapi:write"
    assert tokens["expires_in"] == 3600 and tokens["refresh_token"]
    created = call(client, tokens["access_token"], "create_map", title="By OAuth").get_json()["result"]
    assert not created.get("isError"), created
    listed = call(client, tokens["access_token"], "list_maps").get_json()["result"]["structuredContent"]
    assert [item["title"] for item in listed["maps"]] == ["By OAuth"]
    # Good on /mcp only: on the API it is no key.
    answer = client.get("/api/v1/maps", headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert answer.status_code == 401 and answer.get_json()["error"]["code"] == "INVALID_API_KEY"


def test_no_token_code_or_key_is_stored_in_the_clear(app, client, key):
    tokens = connect(client, key)
    with app.app_context():
        dumped = []
        for table in ("oauth_clients", "oauth_grants", "oauth_codes", "oauth_tokens", "oauth_form_tokens"):
            dumped += [repr(tuple(row)) for row in db.session.execute(text(f"SELECT * FROM {table}"))]  # noqa: S608
    everything = "\n".join(dumped)
    assert tokens["access_token"] not in everything and tokens["refresh_token"] not in everything
    assert key not in everything


def test_a_code_is_good_once_and_its_reuse_revokes_the_grant(client, key):
    client_id = register(client)
    verifier, challenge = pkce()
    code = code_of(approve(client, authorize_url(client_id, challenge), key))
    first = exchange(client, client_id, code, verifier)
    assert first.status_code == 200
    again = exchange(client, client_id, code, verifier)
    assert again.status_code == 400 and again.get_json()["error"] == "invalid_grant"
    assert mcp(client, first.get_json()["access_token"], "tools/list").status_code == 401


def test_pkce_is_required_and_checked(client, key):
    client_id = register(client)
    verifier, challenge = pkce()
    page = client.get(authorize_url(client_id, None, code_challenge_method=None))
    assert page.status_code == 400 and "code_challenge" in page.get_data(as_text=True)
    plain = client.get(authorize_url(client_id, challenge, code_challenge_method="plain"))
    assert plain.status_code == 400
    code = code_of(approve(client, authorize_url(client_id, challenge), key))
    wrong = exchange(client, client_id, code, pkce()[0])
    assert wrong.status_code == 400 and wrong.get_json()["error"] == "invalid_grant"


def test_a_code_is_bound_to_its_client_and_redirect_uri(client, key):
    client_id = register(client)
    other_id = register(client, name="Other")
    verifier, challenge = pkce()
    code = code_of(approve(client, authorize_url(client_id, challenge), key))
    assert exchange(client, other_id, code, verifier).get_json()["error"] == "invalid_grant"
    code = code_of(approve(client, authorize_url(client_id, challenge), key))
    moved = exchange(client, client_id, code, verifier, redirect_uri="http://127.0.0.1:8123/other")
    assert moved.status_code == 400 and moved.get_json()["error"] == "invalid_grant"


def test_refresh_tokens_rotate_and_a_reused_one_revokes_the_grant(client, key):
    tokens = connect(client, key)
    renewed = refresh(client, tokens["client_id"], tokens["refresh_token"])
    assert renewed.status_code == 200, renewed.get_data(as_text=True)
    fresh = renewed.get_json()
    assert fresh["refresh_token"] != tokens["refresh_token"] and fresh["scope"] == "mapapi:read mapapi:write"
    assert mcp(client, fresh["access_token"], "tools/list").status_code == 200
    reused = refresh(client, tokens["client_id"], tokens["refresh_token"])
    assert reused.status_code == 400 and reused.get_json()["error"] == "invalid_grant"
    assert mcp(client, fresh["access_token"], "tools/list").status_code == 401
    assert refresh(client, tokens["client_id"], fresh["refresh_token"]).status_code == 400


def test_a_read_grant_lists_and_runs_only_the_tools_that_read(app, client, account):
    read_key = create_key(app, "owner@example.com", scope="READ_ONLY")
    refused = approve(client, authorize_url(register(client), pkce()[1]), read_key, access="write")
    assert refused.status_code == 400 and "read-only" in refused.get_data(as_text=True)
    tokens = connect(client, read_key, access="read")
    assert tokens["scope"] == "mapapi:read"
    names = {tool["name"] for tool in mcp(client, tokens["access_token"], "tools/list").get_json()["result"]["tools"]}
    assert "list_maps" in names and "create_map" not in names
    result = call(client, tokens["access_token"], "create_map", title="No").get_json()["result"]
    assert result["isError"] and "INSUFFICIENT_SCOPE" in result["content"][0]["text"]


def test_the_approval_page_frames_nothing_runs_nothing_and_shows_values_as_text(client, key):
    client_id = register(client, name='<script>alert("x")</script>')
    page = client.get(authorize_url(client_id, pkce()[1]))
    assert page.status_code == 200
    policy = page.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in policy and "script-src" not in policy and "form-action" not in policy
    assert "default-src 'none'" in policy and page.headers["X-Frame-Options"] == "DENY"
    body = page.get_data(as_text=True)
    assert "<script>" not in body and "&lt;script&gt;" in body
    assert "127.0.0.1:8123" in body  # where the answer goes


@pytest.mark.parametrize(
    "query",
    [
        {"redirect_uri": "https://evil.example/cb"},
        {"client_id": "no-such-client", "redirect_uri": REDIRECT},
        {"resource": "http://localhost/elsewhere"},
    ],
)
def test_a_request_that_does_not_fit_is_shown_never_redirected(client, query):
    query = {"client_id": register(client), **query}
    page = client.get(authorize_url(challenge=pkce()[1], **query))
    assert page.status_code == 400 and "Location" not in page.headers
    assert "form_token" not in page.get_data(as_text=True)


def test_the_form_token_is_good_once_and_only_in_the_browser_that_got_it(app, client, key):
    client_id = register(client)
    url = authorize_url(client_id, pkce()[1])
    page = client.get(url)
    sent = {"form_token": form_token(page), "api_key": key, "access": "read", "decision": "approve"}
    stranger = app.test_client()  # another site's forged POST: no cookie of this browser
    assert stranger.post(url, data=sent).status_code == 403
    assert client.post(url, data=sent).status_code == 302
    again = client.post(url, data=sent)
    assert again.status_code == 403 and "Location" not in again.headers


def test_a_denial_redirects_with_access_denied(client, key):
    client_id = register(client)
    answer = approve(client, authorize_url(client_id, pkce()[1]), key, decision="deny")
    assert answer.status_code == 302
    assert "error=access_denied" in answer.headers["Location"] and "state=st-1" in answer.headers["Location"]
    assert answer.headers["Location"].startswith(REDIRECT)


def test_a_bad_key_is_shown_on_the_page_and_never_echoed(app, client, key):
    client_id = register(client)
    bad = "mk_live_" + "z" * 43
    answer = approve(client, authorize_url(client_id, pkce()[1]), bad)
    assert answer.status_code == 400 and bad not in answer.get_data(as_text=True)
    create_account(app, "free@example.com", plan="free")
    free_key = create_key(app, "free@example.com")
    answer = approve(client, authorize_url(client_id, pkce()[1]), free_key)
    assert answer.status_code == 400 and "Pro plan" in answer.get_data(as_text=True)


def test_grants_are_listed_and_revoked_over_the_api(client, api, other_api, key):
    tokens = connect(client, key)
    listed = api.get("/grants").get_json()["data"]
    (grant,) = listed["grants"]
    assert listed["pagination"]["total"] == 1
    assert set(grant) == {"id", "clientName", "clientId", "redirectHost", "scope", "createdAt", "lastUsedAt"}
    assert grant["clientName"] == "Test assistant" and grant["redirectHost"] == "127.0.0.1:8123"
    assert grant["clientId"] == tokens["client_id"] and grant["scope"] == "mapapi:read mapapi:write"
    assert other_api.get("/grants").get_json()["data"]["grants"] == []
    assert other_api.delete(f"/grants/{grant['id']}").status_code == 404
    assert mcp(client, tokens["access_token"], "tools/list").status_code == 200
    assert api.get("/grants").get_json()["data"]["grants"][0]["lastUsedAt"] is not None
    deleted = api.delete(f"/grants/{grant['id']}")
    assert deleted.status_code == 200 and deleted.get_json() == {"data": {"id": grant["id"], "deleted": True}}
    cut = mcp(client, tokens["access_token"], "tools/list")
    assert cut.status_code == 401 and cut.headers["WWW-Authenticate"] == f'{CHALLENGE}, error="invalid_token"'
    assert refresh(client, tokens["client_id"], tokens["refresh_token"]).status_code == 400
    assert api.get("/grants").get_json()["data"]["grants"] == []
    assert api.delete(f"/grants/{grant['id']}").status_code == 404


def test_revoking_the_pasted_key_leaves_the_grant(client, api, key):
    tokens = connect(client, key)
    key_id = api.get("/keys").get_json()["data"]["keys"][0]["id"]
    assert api.delete(f"/keys/{key_id}").status_code == 200
    assert mcp(client, tokens["access_token"], "tools/list").status_code == 200


def test_grants_are_listed_and_revoked_by_the_operator(app, client, key, runner):
    tokens = connect(client, key)
    listed = runner.invoke(args=["grants", "list", "owner@example.com"])
    assert listed.exit_code == 0, listed.output
    (line,) = listed.output.splitlines()
    grant_id, name, client_id, host, scope = line.split("\t")[:5]
    assert (name, client_id, host, scope) == ("Test assistant", tokens["client_id"], "127.0.0.1:8123",
                                              "mapapi:read mapapi:write")  # fmt: skip
    assert runner.invoke(args=["grants", "revoke", grant_id]).exit_code == 0
    assert mcp(client, tokens["access_token"], "tools/list").status_code == 401
    again = runner.invoke(args=["grants", "revoke", grant_id])
    assert again.exit_code == 1 and "not found" in again.output


def test_the_metadata_registration_and_token_endpoints_answer_any_origin(client):
    origin = {"Origin": "https://inspector.example"}
    answer = client.get("/.well-known/oauth-authorization-server", headers=origin)
    assert answer.headers["Access-Control-Allow-Origin"] == "*"
    preflight = client.options(
        "/oauth/token", headers={**origin, "Access-Control-Request-Method": "POST"}
    )
    assert preflight.status_code == 204 and preflight.headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    assert "Access-Control-Allow-Credentials" not in preflight.headers


@pytest.mark.parametrize(
    ("client_id", "says"),
    [
        ("http://app.example/client.json", "https"),
        ("https://127.0.0.1/client.json", "loopback"),
        ("https://app.example/", "path"),
    ],
)
def test_a_client_id_metadata_document_is_fetched_only_under_the_webhooks_rules(client, client_id, says):
    page = client.get(authorize_url(client_id, pkce()[1]))
    assert page.status_code == 400 and "Location" not in page.headers
    assert says in page.get_data(as_text=True)


def test_a_registered_client_unused_for_30_days_is_forgotten(app, client, key):
    stale = register(client, name="Stale")
    kept = connect(client, key)["client_id"]
    with app.app_context():
        db.session.execute(
            text("UPDATE oauth_clients SET last_used_at = :then"), {"then": datetime(2020, 1, 1)}
        )
        db.session.execute(text("UPDATE oauth_clients SET last_used_at = :now WHERE client_id = :kept"),
                           {"now": datetime.now(UTC).replace(tzinfo=None), "kept": kept})  # fmt: skip
        db.session.commit()
    register(client, name="Newcomer")  # registrations sweep the forgotten ones
    page = client.get(authorize_url(stale, pkce()[1]))
    assert page.status_code == 400 and "not known here" in page.get_data(as_text=True)
    assert client.get(authorize_url(kept, pkce()[1])).status_code == 200


def test_a_code_older_than_60_seconds_is_refused(app, client, key):
    client_id = register(client)
    verifier, challenge = pkce()
    code = code_of(approve(client, authorize_url(client_id, challenge), key))
    with app.app_context():
        db.session.execute(text("UPDATE oauth_codes SET expires_at = :then"), {"then": datetime(2020, 1, 1)})
        db.session.commit()
    late = exchange(client, client_id, code, verifier)
    assert late.status_code == 400 and late.get_json()["error"] == "invalid_grant"
