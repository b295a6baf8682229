"""No request to ``/mcp`` makes a 5xx: odd headers, odd bodies and odd
methods get the transport's or the API's answer, never a server error.

A property test with the Flask test client (the app and its database, no
server), as tests/test_hostile_headers.py does for the API.
"""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_maps", "arguments": {}}}
BODIES = [
    json.dumps(message).encode()
    for message in (
        INITIALIZE,
        CALL,
        {**CALL, "params": {"name": "create_map", "arguments": {"body": {"title": 1}}}},
        {**CALL, "params": {"name": "nothing", "arguments": None}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        [CALL, CALL],
        {"jsonrpc": "1.0"},
    )
] + [b"", b"not json", b"{", b"\xff\xfe", b"null"]
HEADERS = ("Accept", "Content-Type", "MCP-Protocol-Version", "Mcp-Session-Id", "Origin",
           "Mcp-Method", "Mcp-Name", "Last-Event-ID", "Authorization")  # fmt: skip
VALUES = st.one_of(
    st.sampled_from([
        "", "*/*", "application/json", "text/event-stream", "application/json, text/event-stream",
        "2025-11-25", "2026-07-28", "1999-01-01", "Bearer", "Bearer x", "null", "é" * 300,
        "application/json; charset=klingon", "https://evil.example.com",
    ]),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"), max_size=40),
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=st.sampled_from(["POST", "POST", "POST", "GET", "DELETE", "PUT", "OPTIONS", "HEAD"]),
    body=st.sampled_from(BODIES),
    headers=st.lists(st.tuples(st.sampled_from(HEADERS), VALUES), max_size=5),
    with_key=st.booleans(),
    query=st.sampled_from(["", "?readOnly=true", "?readOnly=maybe", "?readOnly="]),
)
def test_no_request_to_mcp_makes_a_server_error(client, key, method, body, headers, with_key, query):
    sent = [("Accept", "application/json, text/event-stream"), ("Content-Type", "application/json")]
    sent += headers
    if with_key:
        sent.append(("Authorization", f"Bearer {key}"))
    response = client.open("/mcp" + query, method=method, headers=sent, data=body)
    assert response.status_code < 500, (method, headers, body, response.status_code, response.data[:300])
