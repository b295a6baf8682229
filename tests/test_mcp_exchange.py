"""``/mcp`` on the SDK's kernel: it answers exactly as the SDK's transport,
and a tool call's key is checked once, by the API request it makes.

The requests the kernel takes are answered both ways, by the kernel and by
the SDK's Streamable HTTP transport (``Bridge.respond`` without an
exchange), and the two answers must be the same bytes.
"""

import gzip
import json
import logging
from datetime import timedelta

import pytest
from sqlalchemy import select
from werkzeug.datastructures import EnvironHeaders
from werkzeug.test import EnvironBuilder

from mapapi.extensions import db
from mapapi.mcp.bridge import Bridge
from mapapi.mcp.caller import Caller, kept_environ
from mapapi.mcp.remote import bridge
from mapapi.storage.models import Account
from mapapi.timeutil import utcnow

from .factories import ApiClient, create_account, create_key, make_map

VERSION = "2025-11-25"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": VERSION,
}
BAD_KEY = "mk_live_" + "x" * 43
#: A 401 of /mcp names where its OAuth starts (the test client calls from loopback).
CHALLENGE = 'Bearer realm="mapapi", resource_metadata="http://localhost/.well-known/oauth-protected-resource/mcp"'


def message(method: str, params=None, id_=1) -> dict:
    sent = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        sent["params"] = params
    return sent


def call(name: str, **arguments) -> dict:
    return message("tools/call", {"name": name, "arguments": arguments})


INITIALIZE = {"capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def both_ways(app, key, sent: dict, headers=None, read_only=False):
    """The kernel's answer and the SDK transport's to one POST."""
    body = json.dumps(sent).encode()
    environ = EnvironBuilder(
        path="/mcp", method="POST", data=body, headers={**MCP_HEADERS, **(headers or {})}
    ).get_environ()
    served = bridge(app)
    exchange = served.exchange(EnvironHeaders(environ), body)
    assert exchange is not None, sent
    caller = Caller(
        authorization=f"Bearer {key}",
        request_id="test",
        read_only=read_only,
        environ=kept_environ(environ),
    )
    return served.respond(exchange, environ, body, caller), served.respond(None, environ, body, caller)


CASES = [
    ("initialize", message("initialize", {**INITIALIZE, "protocolVersion": VERSION}), {}),
    ("initialize, older version, no header",
     message("initialize", {**INITIALIZE, "protocolVersion": "2025-03-26"}), {"MCP-Protocol-Version": None}),
    ("initialize, unknown version",
     message("initialize", {**INITIALIZE, "protocolVersion": "1999-01-01"}), {}),
    ("initialize without params", message("initialize"), {}),
    ("ping", message("ping"), {}),
    ("tools/list", message("tools/list"), {}),
    ("tools/list at 2025-06-18", message("tools/list"), {"MCP-Protocol-Version": "2025-06-18"}),
    ("a string id", message("ping", id_="a-7"), {}),
    ("id 0", message("tools/list", id_=0), {}),
    ("no such method", message("nothing/here"), {}),
    ("a method without a handler", message("resources/list"), {}),
    ("tools/call without params", message("tools/call"), {}),
    ("tools/call, arguments not an object",
     message("tools/call", {"name": "list_maps", "arguments": [1]}), {}),
    ("tools/call, no such tool", call("no_such_tool"), {}),
    ("tools/call, bad arguments", call("create_map", title=7, colour="red"), {}),
    ("tools/call with a progress token",
     message("tools/call", {"name": "list_maps", "arguments": {}, "_meta": {"progressToken": 3}}), {}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("sent", "headers"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_the_kernel_answers_as_the_sdks_transport(app, key, sent, headers):
    by_kernel, by_transport = both_ways(app, key, sent, {k: v for k, v in headers.items() if v})
    assert by_kernel.status_code == by_transport.status_code == 200
    assert by_kernel.headers["Content-Type"] == by_transport.headers["Content-Type"] == "application/json"
    assert by_kernel.get_data() == by_transport.get_data()


def test_a_tool_call_and_a_read_only_listing_answer_as_the_sdks_transport(app, key, map_id):
    by_kernel, by_transport = both_ways(app, key, call("get_map", mapId=map_id))
    assert by_kernel.get_data() == by_transport.get_data()
    assert json.loads(by_kernel.get_data())["result"]["structuredContent"]["id"] == map_id
    by_kernel, by_transport = both_ways(app, key, message("tools/list"), read_only=True)
    assert by_kernel.get_data() == by_transport.get_data()
    assert "create_map" not in by_kernel.get_data().decode()


NOT_FOR_THE_KERNEL = [
    ("a notification", {}, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), 202),
    ("a response", {}, json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}), 202),
    ("a batch", {}, json.dumps([message("ping"), message("ping", id_=2)]), 400),
    ("not JSON", {}, "{", 400),
    ("not JSON-RPC", {}, json.dumps({"jsonrpc": "1.0", "id": 1, "method": "ping"}), 400),
    ("JSON not accepted", {"Accept": "text/event-stream"}, json.dumps(message("ping")), 406),
    ("not sent as JSON", {"Content-Type": "text/plain"}, json.dumps(message("ping")), 400),
    ("the 2026 protocol", {"MCP-Protocol-Version": "2026-07-28"}, json.dumps(message("ping")), 400),
    ("an unknown version", {"MCP-Protocol-Version": "1999-01-01"}, json.dumps(message("ping")), 400),
]  # fmt: skip


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [case[1:] for case in NOT_FOR_THE_KERNEL],
    ids=[case[0] for case in NOT_FOR_THE_KERNEL],
)
def test_anything_else_is_left_to_the_sdks_transport(app, client, key, headers, body, status):
    sent = {**MCP_HEADERS, **headers, "Authorization": f"Bearer {key}"}
    assert bridge(app).exchange(sent, body.encode()) is None
    answer = client.post("/mcp", data=body, headers=sent)
    assert answer.status_code == status, answer.data[:300]


def test_a_2026_request_is_served_by_the_sdks_transport(client, key, map_id):
    """The protocol without a handshake: each request carries its version,
    the transport serves it on the SDK's own path, and the tools work there."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    sent = message("tools/call", {"name": "get_map", "arguments": {"mapId": map_id}, "_meta": meta})
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
               "Mcp-Name": "get_map", "Authorization": f"Bearer {key}"}  # fmt: skip
    assert bridge(client.application).exchange(headers, json.dumps(sent).encode()) is None
    answer = client.post("/mcp", data=json.dumps(sent), headers=headers)
    assert answer.status_code == 200, answer.data[:300]
    assert answer.get_json()["result"]["structuredContent"]["id"] == map_id
    headers["Authorization"] = f"Bearer {BAD_KEY}"
    assert_refused(client.post("/mcp", data=json.dumps(sent), headers=headers), 401, "INVALID_API_KEY")


def post(client, sent: dict, key=None, path="/mcp"):
    headers = dict(MCP_HEADERS)
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return client.post(path, data=json.dumps(sent), headers=headers)


def assert_refused(answer, status: int, code: str) -> None:
    assert answer.status_code == status, answer.data[:300]
    assert answer.get_json()["error"]["code"] == code


def test_a_tool_call_with_a_bad_key_is_the_apis_401_counted_once(client, map_id):
    """Whether the call makes its API request or not (its arguments do not
    fit, its tool does not exist), the answer is the API's 401, and the
    client address's bucket counts it once."""
    remaining = []
    for sent in (call("get_map", mapId=map_id), call("get_map"), call("no_such_tool"), message("tools/list")):
        answer = post(client, sent, BAD_KEY)
        assert_refused(answer, 401, "INVALID_API_KEY")
        assert answer.headers["WWW-Authenticate"] == f'{CHALLENGE}, error="invalid_token"'
        remaining.append(int(answer.headers["X-RateLimit-Remaining"]))
    assert remaining == [remaining[0] - n for n in range(4)]
    missing = post(client, call("get_map", mapId=map_id))
    assert_refused(missing, 401, "MISSING_API_KEY")
    assert missing.headers["WWW-Authenticate"] == CHALLENGE
    bad_query = post(client, call("get_map", mapId=map_id), BAD_KEY, "/mcp?readOnly=maybe")
    assert_refused(bad_query, 401, "INVALID_API_KEY")


def test_a_tool_call_of_an_account_without_a_plan_is_the_apis_403(app, client, key, map_id):
    with app.app_context():
        account = db.session.scalar(select(Account).where(Account.email == "owner@example.com"))
        account.plan_until = utcnow() - timedelta(minutes=1)
        db.session.commit()
    for sent in (call("get_map", mapId=map_id), call("get_map"), message("tools/list")):
        assert_refused(post(client, sent, key), 403, "PRO_SUBSCRIPTION_REQUIRED")


def test_a_read_only_keys_write_is_a_tool_error_not_a_refusal(app, client, account):
    read_key = create_key(app, "owner@example.com", "READ_ONLY")
    answer = post(client, call("create_map", title="Cafés"), read_key)
    assert answer.status_code == 200
    result = answer.get_json()["result"]
    assert result["isError"] and result["content"][0]["text"].startswith("INSUFFICIENT_SCOPE (403)")


def test_a_tool_call_reads_the_key_once(client, key, map_id, statements):
    """The API request checks the key (and reads the map with it, in one
    statement): /mcp does not check it again."""
    assert post(client, call("get_map", mapId=map_id), key).status_code == 200  # lastUsedAt written
    statements.reset()
    answer = post(client, call("get_map", mapId=map_id), key)
    assert not answer.get_json()["result"]["isError"]
    assert statements.count == 1


@pytest.fixture
def two_an_hour(app_config):
    app_config["RATELIMIT_GENERAL"] = "2 per hour"


def test_a_bad_keys_429_is_the_answer_a_good_keys_is_a_tool_error(two_an_hour, app, client):
    create_account(app, "owner@example.com")
    key = create_key(app, "owner@example.com")
    map_id = make_map(ApiClient(client, key))["id"]
    for _ in range(2):
        assert_refused(post(client, call("get_map", mapId=map_id), BAD_KEY), 401, "INVALID_API_KEY")
    assert_refused(post(client, call("get_map", mapId=map_id), BAD_KEY), 429, "RATE_LIMIT_EXCEEDED")
    assert post(client, call("get_map", mapId=map_id), key).status_code == 200  # the account's second
    answer = post(client, call("get_map", mapId=map_id), key)
    assert answer.status_code == 200
    assert answer.get_json()["result"]["content"][0]["text"].startswith("RATE_LIMIT_EXCEEDED (429)")


def test_a_tool_calls_api_request_is_a_request_of_its_own(client, key, account, map_id, caplog):
    """It runs in an app context of its own, as a request from outside: its
    buckets' headers stay in its own answer, and the access log has a line
    for each request under the one request id."""
    caplog.set_level(logging.INFO, logger="mapapi.access")
    answer = post(client, call("get_map", mapId=map_id), key)
    assert answer.status_code == 200 and not answer.get_json()["result"]["isError"]
    assert "X-RateLimit-Remaining" not in answer.headers
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mapapi.access"]
    api, mcp = lines[-2:]
    assert (api["method"], api["path"], api["status"]) == ("GET", f"/api/v1/maps/{map_id}", 200)
    assert (mcp["method"], mcp["path"], mcp["status"]) == ("POST", "/mcp", 200)
    assert api["request_id"] == mcp["request_id"] == answer.headers["X-Request-Id"]
    assert api["account_id"] == account
    assert mcp["duration_ms"] >= api["duration_ms"]


@pytest.fixture
def gzip_from_100_bytes(app_config):
    app_config["GZIP_MIN_BYTES"] = 100


def test_a_tool_calls_answer_keeps_the_request_id_and_is_gzipped_as_any(gzip_from_100_bytes, client, key, map_id):
    """Answered in front of Flask's views, it gets what the pipeline gives any
    answer: the client's request id, gzip when asked for."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}", "X-Request-Id": "agent-7"}
    sent = json.dumps(call("get_map", mapId=map_id))
    zipped = client.post("/mcp", data=sent, headers={**headers, "Accept-Encoding": "gzip"})
    assert zipped.status_code == 200 and zipped.headers["Content-Encoding"] == "gzip"
    assert zipped.headers["X-Request-Id"] == "agent-7" and "Accept-Encoding" in zipped.headers["Vary"]
    assert json.loads(gzip.decompress(zipped.get_data()))["result"]["structuredContent"]["id"] == map_id
    plain = client.post("/mcp", data=sent, headers=headers)
    assert "Content-Encoding" not in plain.headers and plain.get_json()["result"]["structuredContent"]["id"] == map_id


def test_an_error_of_the_layer_in_front_is_the_apis_500_logged_on_one_line(client, key, map_id, monkeypatch, caplog):
    """The layer's own code failing (made to fail here: nothing else makes it)
    answers as the app's last error handler does, and the call is not made twice."""

    respond = Bridge.respond

    def failing(*args, **kwargs):
        respond(*args, **kwargs)  # the call made, then the layer fails
        raise RuntimeError(f"secret internals {key}")

    monkeypatch.setattr(Bridge, "respond", failing)
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}", "X-Request-Id": "agent-8"}
    sent = json.dumps(message("tools/call", {"name": "create_location", "arguments": {
        "mapId": map_id, "name": "Once", "lat": 1, "lng": 2}}))  # fmt: skip
    with caplog.at_level(logging.ERROR):
        answer = client.post("/mcp", data=sent, headers=headers)
    assert_refused(answer, 500, "INTERNAL_ERROR")
    assert answer.headers["X-Request-Id"] == "agent-8"
    assert "secret internals" not in answer.get_data(as_text=True)
    assert [record.getMessage() for record in caplog.records] == ["unexpected error (request agent-8)"]
    monkeypatch.undo()
    listed = client.get(f"/api/v1/maps/{map_id}/locations", headers={"Authorization": f"Bearer {key}"})
    assert [location["name"] for location in listed.get_json()["data"]["locations"]] == ["Once"]


def test_a_number_beyond_64_bits_goes_through_a_tool_call_exactly(client, key, map_id):
    """The API keeps a property's integer of any size; a tool writes and reads it unchanged."""
    big = 2**70 + 1
    sent = message("tools/call", {"name": "create_location", "arguments": {
        "mapId": map_id, "name": "Big", "lat": 1, "lng": 2, "properties": {"count": big}}})  # fmt: skip
    created = post(client, sent, key).get_json()["result"]
    assert not created.get("isError"), created
    assert created["structuredContent"]["properties"] == {"count": big}
    location_id = created["structuredContent"]["id"]
    read = post(client, call("get_location", mapId=map_id, locId=location_id), key)
    assert read.get_json()["result"]["structuredContent"]["properties"] == {"count": big}
    assert str(big) in read.get_json()["result"]["content"][0]["text"]
