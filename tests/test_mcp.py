"""The MCP server driven by the SDK's own clients against a live ``mapapi serve``:
``mapapi mcp`` over stdio, and ``/mcp`` over Streamable HTTP.

Every result is checked against the HTTP API itself; the key is looked for
in everything the stdio server says or writes.
"""

import json
import os
import subprocess
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

import anyio
import httpx2
import pytest
import requests
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from mapapi.app import create_app
from mapapi.extensions import db

from . import backends
from .factories import create_account, create_key
from .helpers import ServeProcess, free_port, mapapi_program, served_mapapi

API = "/api/v1"
TRANSPORTS = ["stdio", "remote"]
TEXT_LIMIT = 20_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A live ``mapapi serve`` for the module (map creation limited to 3 an
    hour), and an app on its database that makes accounts and keys."""
    workdir = tmp_path_factory.mktemp("mcp")
    with served_mapapi(workdir, MAPAPI_RATELIMIT_MAP_CREATE="3 per hour") as (process, _key):
        process.accounts = create_app({"SQLALCHEMY_DATABASE_URI": process.env["MAPAPI_DATABASE_URL"]})
        try:
            yield process
        finally:
            with process.accounts.app_context():
                db.engine.dispose()  # before the database is dropped


@pytest.fixture
def service(server):
    """Accounts of this test alone on the module's server: a READ_WRITE and
    a READ_ONLY key of one, and a key of another (so its buckets are its own)."""
    mine, theirs = (f"{uuid.uuid4().hex}@example.com" for _ in range(2))
    for email in (mine, theirs):
        create_account(server.accounts, email)
    return SimpleNamespace(
        base=server.base,
        write_key=create_key(server.accounts, mine),
        read_key=create_key(server.accounts, mine, "READ_ONLY"),
        other_key=create_key(server.accounts, theirs),
    )


class Agent:
    """The SDK's client session, over one transport."""

    def __init__(self, session: ClientSession, errlog: Path | None = None):
        self.session = session
        self.errlog = errlog

    async def call(self, tool: str, /, **arguments):
        result = await self.session.call_tool(tool, arguments)
        assert sum(len(item.text) for item in result.content) <= TEXT_LIMIT
        return result

    async def data(self, tool: str, /, **arguments):
        """A successful call's structured content (asserting it matches its text)."""
        result = await self.call(tool, **arguments)
        assert not result.is_error, result.content[0].text
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content

    async def error(self, tool: str, /, **arguments) -> str:
        """A failed call's one text."""
        result = await self.call(tool, **arguments)
        assert result.is_error and len(result.content) == 1, result.content
        return result.content[0].text


@asynccontextmanager
async def agent_session(transport: str, tmp_path: Path, url: str, key: str | None, read_only=False):
    if transport == "stdio":
        async with stdio_agent(tmp_path, url, key, read_only) as agent:
            yield agent
        return
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    address = url + "/mcp" + ("?readOnly=true" if read_only else "")
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(address, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Agent(session)


@asynccontextmanager
async def stdio_agent(tmp_path: Path, url: str, key: str | None, read_only=False):
    env = {"MAPAPI_URL": url}
    if key is not None:
        env["MAPAPI_KEY"] = key
    errlog_path = tmp_path / "mcp.err"
    parameters = StdioServerParameters(
        command=mapapi_program(), args=["mcp"] + ["--read-only"] * read_only, env=env, cwd=tmp_path
    )
    with open(errlog_path, "w") as errlog:  # noqa: ASYNC230 (once, before the session)
        async with (
            stdio_client(parameters, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Agent(session, errlog_path)


def http(service, key, method, path, **kwargs):
    return requests.request(
        method, service.base + API + path, headers={"Authorization": f"Bearer {key}"}, timeout=10, **kwargs
    )


def run(coroutine_function, *args):
    return anyio.run(coroutine_function, *args)


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions an exception group holds, however deep."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def remaining(service, key) -> int:
    """The general bucket's requests left, as a GET (which takes one) says."""
    return int(http(service, key, "GET", "/maps").headers["X-RateLimit-Remaining"])


# --- an agent's session, over each transport ------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_agent_session_end_to_end(service, tmp_path, transport):
    key = service.write_key
    places = [
        {"name": f"Café {n}", "lat": 38.70 + n / 1000, "lng": -9.15 + n / 1000, "address": f"Rua {n}"}
        for n in range(50)
    ]

    async def session():
        async with agent_session(transport, tmp_path, service.base, key) as agent:
            tools = (await agent.session.list_tools()).tools
            assert len(tools) == 35 and not any("key" in t.name or "webhook" in t.name for t in tools)
            made = await agent.data("create_map", title="Cafés in Lisbon")
            assert made == http(service, key, "GET", f"/maps/{made['id']}").json()["data"]
            map_id = made["id"]
            # Agents plan too: what the buckets hold, read without using any.
            limits = await agent.data("get_rate_limits")
            assert set(limits["buckets"]) == {"general", "mapCreation", "bulk", "sync"}
            assert limits["buckets"]["mapCreation"]["window"] == "3 per hour"
            assert (await agent.data("get_rate_limits"))["buckets"]["general"]["remaining"] == (
                limits["buckets"]["general"]["remaining"]
            )
            bulk = await agent.data("create_locations", mapId=map_id, locations=places)
            assert bulk["count"] == 50 and [p["name"] for p in bulk["created"]] == [p["name"] for p in places]
            ids = [p["id"] for p in bulk["created"]]
            tag = await agent.data("create_tag", mapId=map_id, name="terrace")
            layer = await agent.data("create_layer", mapId=map_id, name="Favourites")
            for loc_id in ids[:3]:
                await agent.data("update_location", mapId=map_id, locId=loc_id, tagIds=[tag["id"]])
            on_layer = await agent.data("set_location_layers", mapId=map_id, locId=ids[0], layerIds=[layer["id"]])
            assert [item["id"] for item in on_layer["layers"]] == [layer["id"]]
            # A call that does not fit sends nothing: the bucket took only the GETs.
            before = remaining(service, key)
            refused = await agent.error("create_map", body={"title": "nested"})
            assert "body: no such argument" in refused and "title: required" in refused
            assert remaining(service, key) == before - 1
            # Lists: 20 by default, and how to read on.
            page = await agent.call("list_locations", mapId=map_id)
            assert len(page.structured_content["locations"]) == 20
            assert "page=2, pageSize=20 gives the next" in page.content[1].text
            bbox = "-9.1500,38.7000,-9.1400,38.7100"  # the first ten
            found = await agent.data("list_locations", mapId=map_id, bbox=bbox)
            assert found == http(service, key, "GET", f"/maps/{map_id}/locations",
                                 params={"bbox": bbox, "pageSize": 20}).json()["data"]  # fmt: skip
            assert found["pagination"]["total"] == 11
            by_text = await agent.data("list_locations", mapId=map_id, q="rua 4", tagId=None)
            assert [p["name"] for p in by_text["locations"]] == ["Café 4"] + [f"Café {n}" for n in range(40, 50)]
            tagged = await agent.data("list_locations", mapId=map_id, tagId=[tag["id"]])
            assert [p["id"] for p in tagged["locations"]] == ids[:3]
            # The viewport's clusters, as the API answers them, a layer hidden in one call.
            view = {"bbox": "-9.2,38.6,-9.0,38.8", "zoom": 12, "layerId": ["none"]}
            grouped = await agent.data("cluster_locations", mapId=map_id, **view)
            assert grouped == http(service, key, "GET", f"/maps/{map_id}/locations/clusters",
                                   params=view).json()["data"]  # fmt: skip
            assert grouped["total"] == 49
            # A page of GeoJSON, and the rest by its cursor.
            exported = await agent.call("export_geojson", mapId=map_id, limit=30)
            first = exported.structured_content
            whole = http(service, key, "GET", f"/maps/{map_id}/locations.geojson").json()
            assert first["features"] == whole["features"][:30]
            assert (first["total"], first["next"]) == (50, "30")
            assert f"/api/v1/maps/{map_id}/locations.geojson" in exported.content[1].text
            rest = await agent.data("export_geojson", mapId=map_id, cursor=first["next"])
            assert rest["features"] == whole["features"][30:] and rest["next"] is None
            past = await agent.call("export_geojson", mapId=map_id, cursor="500")
            assert past.structured_content == {"type": "FeatureCollection", "features": [], "total": 50, "next": None}
            assert past.content[1].text.startswith("No Features from position 501; 50 in all.")
            # The feed, followed to its end (the first answer is cut to fit: 50 long events).
            read, after = [], None
            while True:
                events = await agent.data("list_events", after=after, mapId=map_id, limit=100)
                read += events["events"]
                after = events["next"]
                if not events["hasMore"]:
                    break
            assert read == http(service, key, "GET", "/events", params={"mapId": map_id, "limit": 100}).json()["data"]["events"]
            kinds = [event["type"] for event in read]
            assert kinds[:2] == ["map.created", "location.created"] and kinds.count("location.created") == 50
            gone = await agent.data("bulk_delete_locations", mapId=map_id, ids=ids[40:])
            assert gone["count"] == 10
            return agent.errlog

    errlog = run(session)
    if errlog is not None:
        assert key not in errlog.read_text()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_read_only_key_reads_and_its_writes_answer_insufficient_scope(service, tmp_path, transport):
    map_id = http(service, service.write_key, "POST", "/maps", json={"title": "Shared"}).json()["data"]["id"]

    async def session():
        async with agent_session(transport, tmp_path, service.base, service.read_key) as agent:
            maps = await agent.data("list_maps")
            assert [item["id"] for item in maps["maps"]] == [map_id]
            assert (await agent.data("export_geojson", mapId=map_id))["total"] == 0
            for name, arguments in [
                ("create_map", {"title": "not allowed"}),
                ("create_locations", {"mapId": map_id, "locations": [{"name": "a", "lat": 1, "lng": 2}]}),
                ("delete_map", {"mapId": map_id}),
            ]:
                text = await agent.error(name, **arguments)
                assert text.startswith("INSUFFICIENT_SCOPE (403): "), text
            return agent.errlog

    errlog = run(session)
    assert http(service, service.write_key, "GET", "/maps").json()["data"]["pagination"]["total"] == 1
    if errlog is not None:
        assert service.read_key not in errlog.read_text()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_read_only_lists_only_the_reading_tools(service, tmp_path, transport):
    async def session():
        async with agent_session(transport, tmp_path, service.base, service.write_key, read_only=True) as agent:
            names = {tool.name for tool in (await agent.session.list_tools()).tools}
            assert "list_maps" in names and "create_map" not in names
            text = await agent.error("create_map", title="hidden")
            assert "only the tools that read" in text

    run(session)
    assert http(service, service.write_key, "GET", "/maps").json()["data"]["pagination"]["total"] == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_429_and_an_api_error_are_one_clear_tool_error(service, tmp_path, transport):
    async def session():
        async with agent_session(transport, tmp_path, service.base, service.write_key) as agent:
            missing = await agent.error("get_map", mapId="nope")
            assert missing.startswith("NOT_FOUND (404): ")
            invalid = await agent.error("create_map", title=" ")
            assert invalid.startswith("VALIDATION_ERROR (400): ")
            assert set(json.loads(invalid.split("details: ", 1)[1])) == {"title"}
            for _ in range(2):  # the refused create counted: the bucket of 3 has 2 left
                await agent.data("create_map", title="within the limit")
            limited = await agent.error("create_map", title="a fourth")
            assert limited.startswith("RATE_LIMIT_EXCEEDED (429): ") and "Retry after " in limited

    run(session)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_one_accounts_key_never_sees_anothers_maps(service, tmp_path, transport):
    mine = http(service, service.write_key, "POST", "/maps", json={"title": "Mine"}).json()["data"]["id"]

    async def session():
        async with agent_session(transport, tmp_path, service.base, service.other_key) as agent:
            assert (await agent.data("list_maps"))["maps"] == []
            assert (await agent.error("get_map", mapId=mine)).startswith("NOT_FOUND (404): ")
            assert (await agent.error("export_geojson", mapId=mine)).startswith("NOT_FOUND (404): ")
            assert (await agent.error("delete_map", mapId=mine)).startswith("NOT_FOUND (404): ")
            ours = await agent.data("create_map", title="Theirs")
            assert (await agent.error("create_location", mapId=mine, name="x", lat=1, lng=2)).startswith("NOT_FOUND")
            return ours["id"]

    theirs = run(session)
    maps = http(service, service.write_key, "GET", "/maps").json()["data"]["maps"]
    assert [item["id"] for item in maps] == [mine] and theirs != mine


def test_ids_of_another_map_are_api_errors_naming_them(service, tmp_path):
    """Mistakes only the API can see: ids that exist, on another map."""
    key = service.write_key
    first, second = (http(service, key, "POST", "/maps", json={"title": t}).json()["data"]["id"] for t in "AB")
    category = http(service, key, "POST", f"/maps/{first}/categories", json={"name": "Cafés"}).json()["data"]["id"]
    place = http(service, key, "POST", f"/maps/{first}/locations", json={"name": "x", "lat": 1, "lng": 2}).json()["data"]

    async def session():
        async with agent_session("remote", tmp_path, service.base, key) as agent:
            text = await agent.error("get_location", mapId=second, locId=place["id"])
            assert text.startswith("NOT_FOUND (404): ")
            text = await agent.error("create_location", mapId=second, name="y", lat=1, lng=2, categoryId=category)
            assert text.startswith("VALIDATION_ERROR (400): ") and '"categoryId"' in text
            text = await agent.error("set_location_layers", mapId=first, locId=place["id"], layerIds=[category])
            assert text.startswith("VALIDATION_ERROR (400): ") and '"layerIds"' in text

    run(session)
    assert http(service, key, "GET", f"/maps/{second}/locations").json()["data"]["pagination"]["total"] == 0


# --- no answer too long, whatever the map's size ------------------------------------------


def test_no_answer_passes_20000_characters_on_a_map_of_2000_long_locations(tmp_path):
    with served_mapapi(tmp_path, MAPAPI_RATELIMIT_BULK="100 per hour") as (server, key):
        map_id = http(server, key, "POST", "/maps", json={"title": "Big"}).json()["data"]["id"]
        long_text = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 50
        for batch in range(20):
            items = [
                {"name": f"Place {batch}-{n}", "lat": 10 + n / 100, "lng": 20 + batch / 100,
                 "description": long_text, "externalId": f"E{batch}-{n}", "properties": {"note": long_text[:500]}}
                for n in range(100)
            ]  # fmt: skip
            assert http(server, key, "POST", f"/maps/{map_id}/locations/bulk", json={"locations": items}).status_code == 201
        some_id = http(server, key, "GET", f"/maps/{map_id}/locations").json()["data"]["locations"][0]["id"]
        upserts = [{"externalId": f"E0-{n}", "description": long_text + "!"} for n in range(100)]

        async def session():
            async with agent_session("remote", tmp_path, server.base, key) as agent:
                page = await agent.call("list_locations", mapId=map_id, pageSize=100)
                shown = page.structured_content["pagination"]
                assert 0 < shown["pageSize"] < 100 and shown["total"] == 2000
                export = await agent.call("export_geojson", mapId=map_id, limit=200)
                assert 0 < len(export.structured_content["features"]) < 200
                assert export.structured_content["total"] == 2000
                events = await agent.call("list_events", mapId=map_id, limit=100)
                assert events.structured_content["hasMore"] is True
                upserted = await agent.call("upsert_locations", mapId=map_id, locations=upserts)
                assert upserted.structured_content["updated"] == 100
                assert not (await agent.call("get_location", mapId=map_id, locId=some_id)).is_error
                assert not (await agent.call("list_maps", pageSize=100)).is_error

        try:
            run(session)
        except BaseException:
            print(server.stderr())  # what the service said, for whoever reads the failure
            raise


# --- /mcp as HTTP ---------------------------------------------------------------------------

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post_mcp(service, key=None, headers=(), path="/mcp", message=INITIALIZE):
    sent = dict(MCP_HEADERS, **dict(headers))
    if key is not None:
        sent["Authorization"] = f"Bearer {key}"
    return requests.post(service.base + path, json=message, headers=sent, timeout=10)


def test_mcp_over_http_is_stateless_json_and_answers_only_post(service):
    answer = post_mcp(service, service.write_key)
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("application/json")
    assert "Mcp-Session-Id" not in answer.headers
    assert answer.json()["result"]["serverInfo"]["name"] == "mapapi"
    listed = post_mcp(service, service.write_key, message={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert len(listed.json()["result"]["tools"]) == 35
    assert len(listed.text) <= 24_000
    for method in ("GET", "DELETE"):
        refused = requests.request(method, service.base + "/mcp", headers=MCP_HEADERS, timeout=10)
        assert refused.status_code == 405 and refused.headers["Allow"] == "POST"
        assert refused.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    bad = post_mcp(service, service.write_key, path="/mcp?readOnly=yes")
    assert bad.status_code == 400 and bad.json()["error"]["details"] == {"readOnly": ["Must be true or false."]}


def test_mcp_without_a_good_key_is_401_as_the_api(service):
    missing = post_mcp(service)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "MISSING_API_KEY"
    metadata = f'resource_metadata="{service.base}/.well-known/oauth-protected-resource/mcp"'
    assert missing.headers["WWW-Authenticate"] == f'Bearer realm="mapapi", {metadata}'
    wrong = post_mcp(service, "mk_live_" + "x" * 40)
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "INVALID_API_KEY"
    assert wrong.headers["WWW-Authenticate"] == f'Bearer realm="mapapi", {metadata}, error="invalid_token"'
    assert "X-RateLimit-Remaining" in wrong.headers  # the client address's bucket counted it

    async def session():
        async with agent_session("remote", Path("."), service.base, "mk_live_" + "y" * 40):
            pass

    # The SDK's client gives up at the 401 (its message is its own: "Server
    # returned an error response"); the host sees the status.
    with pytest.raises(BaseException) as raised:
        run(session)
    assert any("error response" in str(error) for error in leaves(raised.value))


def test_mcp_refuses_an_origin_that_is_not_allowed(tmp_path):
    with served_mapapi(tmp_path, MAPAPI_CORS_ORIGINS="https://app.example.com") as (server, key):
        allowed = post_mcp(server, key, headers={"Origin": "https://app.example.com"})
        assert allowed.status_code == 200
        assert allowed.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
        refused = post_mcp(server, key, headers={"Origin": "https://evil.example.com"})
        assert refused.status_code == 403
        assert refused.json()["jsonrpc"] == "2.0" and refused.json()["error"]["code"] == -32600
        assert "Origin" in refused.json()["error"]["message"]
        assert post_mcp(server, key).status_code == 200  # no Origin: not a browser


def test_a_tool_call_is_answered_by_either_process_on_postgres(tmp_path):
    if not backends.on_postgres():
        pytest.skip("two processes share a database on PostgreSQL (MAPAPI_TEST_BACKEND=postgres)")
    with served_mapapi(tmp_path, MAPAPI_RATELIMIT_MAP_CREATE="2 per hour") as (first, key):
        second = ServeProcess(first.env, tmp_path, "second")
        try:
            second.wait_until_up()

            async def session():
                async with (
                    agent_session("remote", tmp_path, first.base, key) as one,
                    agent_session("remote", tmp_path, second.base, key) as two,
                ):
                    made = await one.data("create_map", title="Made by one")
                    assert (await two.data("get_map", mapId=made["id"])) == made
                    await two.data("create_map", title="Made by two")
                    # The buckets are the account's, in Redis: the third create is refused by either.
                    assert (await one.error("create_map", title="third")).startswith("RATE_LIMIT_EXCEEDED")
                    assert (await two.data("list_maps"))["pagination"]["total"] == 2

            run(session)
        finally:
            second.stop()


# --- stdio: a service that is down, a lost answer, start-up -------------------------------


def test_a_service_that_is_down_lists_the_tools_and_each_call_says_so(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    secret = "mk_live_" + "y" * 40

    async def session():
        async with stdio_agent(tmp_path, url, secret) as agent:
            assert len((await agent.session.list_tools()).tools) == 35
            text = await agent.error("list_maps")
            assert f"mapapi service at {url} did not answer" in text and secret not in text
            return agent.errlog

    assert secret not in run(session).read_text()


def test_a_wrong_key_over_stdio_is_one_clear_tool_error(service, tmp_path):
    wrong = "mk_live_" + "x" * 40

    async def session():
        async with stdio_agent(tmp_path, service.base, wrong) as agent:
            text = await agent.error("list_maps")
            assert text.startswith("INVALID_API_KEY (401): ") and wrong not in text
            return agent.errlog

    assert wrong not in run(session).read_text()


def test_it_starts_and_lists_every_tool(service, tmp_path):
    """How fast it starts is measured by benchmarks/commands.py, not here: the
    machines running the suite are shared."""

    async def session():
        async with stdio_agent(tmp_path, service.base, service.write_key) as agent:
            return [tool.name for tool in (await agent.session.list_tools()).tools]

    names = run(session)
    assert len(names) == len(set(names)) == 35
    assert {"list_maps", "create_locations", "export_geojson", "upsert_geojson", "get_rate_limits", "cluster_locations"} <= set(names)


def test_without_a_key_it_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAPAPI_")}
    done = subprocess.run(
        [mapapi_program(), "mcp"], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=30, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("MAPAPI_KEY is not set")
    assert "Traceback" not in done.stderr


class LosingProxy:
    """An HTTP proxy on 127.0.0.1 that forwards every request to the service but
    drops the answer of the first POST: the write happens, its answer is lost."""

    def __init__(self, target: str):
        import http.server
        import threading

        proxy = self
        self.posts = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.forward("GET")

            def do_POST(self):
                self.forward("POST")

            def forward(self, method):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                answer = requests.request(method, target + self.path, headers=headers, data=body, timeout=10)
                if method == "POST":
                    proxy.posts.append(self.headers.get("Idempotency-Key"))
                    if len(proxy.posts) == 1:
                        self.close_connection = True
                        return  # the answer is lost on the way back
                self.send_response(answer.status_code)
                # requests has decoded the body: its encoding headers no longer hold.
                dropped = ("content-length", "content-encoding", "transfer-encoding", "connection")
                for name, value in answer.headers.items():
                    if name.lower() not in dropped:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *_args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_lost_answer_is_retried_with_the_same_key_and_creates_once(service, tmp_path):
    proxy = LosingProxy(service.base)

    async def session():
        async with stdio_agent(tmp_path, proxy.url, service.write_key) as agent:
            return await agent.data("create_map", title="Created once")

    try:
        made = run(session)
    finally:
        proxy.close()
    assert len(proxy.posts) == 2 and proxy.posts[0] == proxy.posts[1] is not None
    maps = http(service, service.write_key, "GET", "/maps").json()["data"]["maps"]
    assert [item["id"] for item in maps] == [made["id"]]


# --- nothing changes on the way ---------------------------------------------------------------

NOT_NUMBERS = ["NaN", "Infinity", "-Infinity"]


def tool_call(number: int, name: str, arguments: str) -> bytes:
    """A ``tools/call`` message whose ``arguments`` are written as raw JSON text
    (as an agent's own encoder may write them: ``NaN`` is no JSON, but Python's
    and JavaScript's encoders write it)."""
    return (
        f'{{"jsonrpc":"2.0","id":{number},"method":"tools/call",'
        f'"params":{{"name":"{name}","arguments":{arguments}}}}}'
    ).encode()


def refused_without_change(answer: dict, expected: str) -> None:
    """A tool error naming the argument, or a JSON-RPC error: either way a refusal."""
    if "error" in answer:
        return
    result = answer["result"]
    assert result["isError"] is True, result
    assert expected in result["content"][0]["text"], result


@pytest.mark.parametrize("literal", NOT_NUMBERS)
def test_nan_and_infinity_over_mcp_are_refused_and_nothing_is_stored(service, literal):
    key = service.write_key
    made = http(service, key, "POST", "/maps", json={"title": "Exact", "centerLat": 10.5}).json()["data"]
    sent = dict(MCP_HEADERS, Authorization=f"Bearer {key}")
    calls = [
        ("update_map", f'{{"mapId":"{made["id"]}","centerLat":{literal}}}', "centerLat: a finite number"),
        ("create_location", f'{{"mapId":"{made["id"]}","name":"P","lat":1,"lng":2,"properties":{{"v":{literal}}}}}',
         "properties.v: a finite number"),
    ]  # fmt: skip
    for number, (name, arguments, expected) in enumerate(calls, start=10):
        answer = requests.post(service.base + "/mcp", data=tool_call(number, name, arguments), headers=sent, timeout=10)
        assert answer.status_code in (200, 400), answer.text
        refused_without_change(answer.json(), expected)
    after = http(service, key, "GET", f"/maps/{made['id']}").json()["data"]
    assert after["centerLat"] == 10.5 and after["updatedAt"] == made["updatedAt"]
    assert http(service, key, "GET", f"/maps/{made['id']}/locations").json()["data"]["pagination"]["total"] == 0


def test_nan_over_stdio_is_refused_and_nothing_is_stored(service, tmp_path):
    key = service.write_key
    made = http(service, key, "POST", "/maps", json={"title": "Exact", "centerLat": 10.5}).json()["data"]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MAPAPI_")},
           "MAPAPI_URL": service.base, "MAPAPI_KEY": key}  # fmt: skip
    initialize = json.dumps(INITIALIZE).encode()
    initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    call = tool_call(2, "update_map", f'{{"mapId":"{made["id"]}","centerLat":NaN}}')
    process = subprocess.Popen(
        [mapapi_program(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        process.stdin.write(b"\n".join([initialize, initialized, call, b""]))
        process.stdin.flush()  # stdin stays open until the answer: EOF would end the session first
        answer = {}
        while answer.get("id") != 2:
            line = process.stdout.readline()
            assert line, "mapapi mcp ended without answering the call"
            answer = json.loads(line)
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    assert answer["result"]["isError"] is True, answer  # the tool's own error, naming it
    assert "centerLat: a finite number" in answer["result"]["content"][0]["text"]
    after = http(service, key, "GET", f"/maps/{made['id']}").json()["data"]
    assert after["centerLat"] == 10.5 and after["updatedAt"] == made["updatedAt"]
