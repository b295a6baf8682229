"""The MCP SDK's own OAuth client against a live ``mapapi serve``: it
discovers, registers, is approved through the page (the test plays the
person with requests), calls tools, refreshes, and is cut off by a revoke.
On PostgreSQL a second process serves the same grant."""

import html
import re
import time
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
import requests
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from . import backends
from .helpers import ServeProcess, served_mapapi

REDIRECT = "http://127.0.0.1:33418/callback"
_FORM_TOKEN = re.compile(r'name="form_token" value="([^"]+)"')


class MemoryStorage:
    """The SDK's TokenStorage, kept in memory for the test."""

    def __init__(self):
        self.tokens = self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


class Person:
    """Plays the person on the approval page: pastes the key, picks the access, decides."""

    def __init__(self, key: str, decisions: list[str]):
        self.key = key
        self.decisions = decisions
        self.pages_seen = 0
        self.answer: AuthorizationCodeResult | None = None

    def _approve(self, url: str) -> None:
        self.pages_seen += 1
        browser = requests.Session()
        page = browser.get(url, timeout=10)
        assert page.status_code == 200, page.text[:300]
        assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
        decision = self.decisions.pop(0)
        answer = browser.post(
            url,
            data={
                "form_token": html.unescape(_FORM_TOKEN.search(page.text).group(1)),
                "api_key": self.key,
                "access": "write",
                "decision": decision,
            },
            allow_redirects=False,
            timeout=10,
        )
        assert answer.status_code == 302 and answer.headers["Location"].startswith(REDIRECT)
        query = parse_qs(urlsplit(answer.headers["Location"]).query)
        self.answer = None
        if "code" in query:
            self.answer = AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0])

    async def redirect(self, url: str) -> None:
        assert self.key not in url
        await anyio.to_thread.run_sync(self._approve, url)

    async def callback(self) -> AuthorizationCodeResult:
        if self.answer is None:
            raise PermissionError("the person denied the assistant")
        return self.answer


def provider_for(base: str, person: Person, storage: MemoryStorage) -> OAuthClientProvider:
    return OAuthClientProvider(
        server_url=base + "/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="SDK assistant",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",  # noqa: S106 - a method name
            scope="mapapi:read mapapi:write",
        ),
        storage=storage,
        redirect_handler=person.redirect,
        callback_handler=person.callback,
    )


def grants_of(base: str, key: str) -> list[dict]:
    answer = requests.get(base + "/api/v1/grants", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert answer.status_code == 200
    return answer.json()["data"]["grants"]


def tool_list(base: str, token: str) -> requests.Response:
    return requests.post(
        base + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
        timeout=10,
    )


def test_the_sdks_oauth_client_connects_refreshes_and_is_cut_off(tmp_path):
    with served_mapapi(tmp_path) as (first, key):
        second = None
        if backends.on_postgres():
            second = ServeProcess(first.env, tmp_path, "second")
            second.wait_until_up()
        try:
            seen = _connect_refresh_and_revoke(first, second, key)
        finally:
            if second is not None:
                second.stop()
        first.stop()
        # No key or token in a URL, a log line or (on SQLite) the database file.
        log = first.stderr_path.read_text()
        assert '"path": "/oauth/token"' in log and '"path": "/oauth/authorize"' in log
        stored = b"".join(path.read_bytes() for path in tmp_path.glob("served.sqlite3*"))
        for secret in [key, *seen]:
            assert secret not in log and secret.encode() not in stored


def _connect_refresh_and_revoke(first, second, key: str) -> None:
    person = Person(key, ["approve", "deny"])
    storage = MemoryStorage()
    seen = []
    provider = provider_for(first.base, person, storage)

    async def session():
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            streamable_http_client(first.base + "/mcp", http_client=http) as (read, write, *_),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            assert person.pages_seen == 1
            tools = {tool.name for tool in (await mcp.list_tools()).tools}
            assert {"create_map", "list_maps"} <= tools
            made = await mcp.call_tool("create_map", {"title": "Connected"})
            assert not made.is_error, made.content
            map_id = made.structured_content["id"]
            first_tokens = storage.tokens
            seen.extend([first_tokens.access_token, first_tokens.refresh_token])
            assert first_tokens.scope == "mapapi:read mapapi:write"

            if second is not None:  # the same grant, served by another process
                assert tool_list(second.base, first_tokens.access_token).status_code == 200

            # An hour later, as the client sees it: it refreshes, and the old refresh token is spent.
            provider.context.token_expiry_time = time.time() - 1
            read_back = await mcp.call_tool("get_map", {"mapId": map_id})
            assert not read_back.is_error and read_back.structured_content["title"] == "Connected"
            assert storage.tokens.refresh_token != first_tokens.refresh_token
            assert storage.tokens.access_token != first_tokens.access_token
            assert person.pages_seen == 1  # a refresh, not a new approval
            seen.extend([storage.tokens.access_token, storage.tokens.refresh_token])

            (grant,) = grants_of(first.base, key)
            assert grant["clientName"] == "SDK assistant" and grant["redirectHost"] == "127.0.0.1:33418"
            revoking = second or first
            revoked = requests.delete(
                revoking.base + f"/api/v1/grants/{grant['id']}",
                headers={"Authorization": f"Bearer {key}"},
                timeout=10,
            )
            assert revoked.status_code == 200
            assert tool_list(first.base, storage.tokens.access_token).status_code == 401
            # Cut off at once: the client must ask the person again, who denies it.
            await mcp.call_tool("list_maps", {})

    with pytest.raises(BaseExceptionGroup) as caught:
        anyio.run(session)
    assert [type(error) for error in leaves(caught.value)] == [PermissionError]
    assert person.pages_seen == 2 and person.decisions == []
    return seen


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions an exception group holds, however deep."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]
