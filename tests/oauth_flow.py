"""The OAuth flow played step by step, as a client and as the person on the
approval page, through Flask's test client (shared by the OAuth tests)."""

import base64
import hashlib
import html
import json
import re
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

REDIRECT = "http://127.0.0.1:8123/callback"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}
_FORM_TOKEN = re.compile(r'name="form_token" value="([^"]+)"')


def register(client, name="Test assistant", redirect_uris=(REDIRECT,), **more) -> str:
    answer = client.post(
        "/oauth/register", json={"client_name": name, "redirect_uris": list(redirect_uris), **more}
    )
    assert answer.status_code == 201, answer.get_data(as_text=True)
    return answer.get_json()["client_id"]


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorize_url(client_id: str, challenge: str | None, **more) -> str:
    """The authorization request's URL; ``more`` adds or replaces parameters (None: left out)."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st-1",
        "scope": "mapapi:read mapapi:write",
        **more,
    }
    return "/oauth/authorize?" + urlencode({k: v for k, v in query.items() if v is not None})


def form_token(page) -> str:
    found = _FORM_TOKEN.search(page.get_data(as_text=True))
    assert found, page.get_data(as_text=True)[:500]
    return html.unescape(found.group(1))


def approve(client, url: str, key: str, access="write", decision="approve"):
    """The person: open the page, paste the key, choose, decide. The answer to the form."""
    page = client.get(url)
    assert page.status_code == 200, page.get_data(as_text=True)[:500]
    return client.post(
        url, data={"form_token": form_token(page), "api_key": key, "access": access, "decision": decision}
    )


def code_of(answer) -> str:
    assert answer.status_code == 302, answer.get_data(as_text=True)[:500]
    query = parse_qs(urlsplit(answer.headers["Location"]).query)
    assert query["state"] == ["st-1"]
    return query["code"][0]


def exchange(client, client_id: str, code: str, verifier: str, redirect_uri=REDIRECT):
    return client.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": verifier,
            "client_id": client_id,
            "redirect_uri": redirect_uri,
        },
    )


def refresh(client, client_id: str, refresh_token: str):
    return client.post(
        "/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id},
    )


def connect(client, key: str, access="write") -> dict:
    """Register, approve and exchange: the token answer (with ``client_id`` added)."""
    client_id = register(client)
    verifier, challenge = pkce()
    code = code_of(approve(client, authorize_url(client_id, challenge), key, access))
    answer = exchange(client, client_id, code, verifier)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return {**answer.get_json(), "client_id": client_id}


def mcp(client, token: str, method: str, params=None, path="/mcp"):
    message = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        message["params"] = params
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"} if token else MCP_HEADERS
    return client.post(path, data=json.dumps(message), headers=headers)


def call(client, token: str, name: str, **arguments):
    return mcp(client, token, "tools/call", {"name": name, "arguments": arguments})
