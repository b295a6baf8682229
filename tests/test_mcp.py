"""``mapapi mcp`` driven by the MCP SDK's own stdio client against a live ``mapapi serve``.

Every result is checked against the HTTP API itself; the key is looked for
in everything the MCP server says or writes.
"""

import json
import os
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
import requests
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from mapapi.mcp.tools import EXCLUDED_PREFIXES, build_tools, tool_name

from .helpers import checked, free_port, mapapi_program, run_mapapi, served_mapapi

API = "/api/v1"


@pytest.fixture
def service(tmp_path):
    """A live ``mapapi serve`` (map creation limited to 3 an hour) with its
    first-run READ_WRITE key, and a READ_ONLY key of the same account."""
    with served_mapapi(tmp_path, MAPAPI_RATELIMIT_MAP_CREATE="3 per hour") as (server, key):
        env = server.env
        server.write_key = key
        server.read_key = checked(
            run_mapapi(
                env, tmp_path, "keys", "create", "local@localhost", "--name", "reader",
                "--scope", "READ_ONLY",
            )
        ).strip()  # fmt: skip
        yield server


class Agent:
    """The SDK's client session, and the MCP server's stderr."""

    def __init__(self, session: ClientSession, errlog: Path):
        self.session = session
        self.errlog = errlog

    async def call(self, name: str, **arguments):
        return await self.session.call_tool(name, arguments)

    async def data(self, name: str, **arguments):
        """A successful call's structured content (asserting it matches its text)."""
        result = await self.call(name, **arguments)
        assert not result.is_error, result.content[0].text
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content


@asynccontextmanager
async def agent_session(tmp_path: Path, url: str, key: str | None):
    env = {"MAPAPI_URL": url}
    if key is not None:
        env["MAPAPI_KEY"] = key
    errlog_path = tmp_path / "mcp.err"
    parameters = StdioServerParameters(
        command=mapapi_program(), args=["mcp"], env=env, cwd=tmp_path
    )
    with open(errlog_path, "w") as errlog:  # noqa: ASYNC230 (once, before the session)
        async with (
            stdio_client(parameters, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Agent(session, errlog_path)


def http(service, key, method, path, **kwargs):
    response = requests.request(
        method,
        service.base + API + path,
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
        **kwargs,
    )
    return response


def run(coroutine_function, *args):
    return anyio.run(coroutine_function, *args)


# --- the tools are the document's operations --------------------------------------------


def resolved(schema, document):
    """The test's own $ref resolution, to compare with the server's."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            _, _, kind, name = schema["$ref"].split("/")
            return resolved(document["components"][kind][name], document)
        return {key: resolved(value, document) for key, value in schema.items()}
    if isinstance(schema, list):
        return [resolved(item, document) for item in schema]
    return schema


def test_every_tool_schema_is_its_operations_own(service, tmp_path):
    document = requests.get(service.base + API + "/openapi.json", timeout=10).json()

    async def listed():
        async with agent_session(tmp_path, service.base, service.write_key) as agent:
            return (await agent.session.list_tools()).tools

    tools = {tool.name: tool for tool in run(listed)}
    operations = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "delete"):
                continue
            name = tool_name(operation["operationId"])
            if path.startswith(EXCLUDED_PREFIXES):
                assert name not in tools, f"{name} manages keys or webhooks"
                continue
            operations += 1
            tool = tools[name]
            schema = tool.input_schema
            parameters = [
                p
                for p in resolved(item.get("parameters", []) + operation.get("parameters", []), document)
                if p["in"] in ("path", "query")
            ]
            expected = {p["name"]: resolved(p["schema"], document) for p in parameters}
            body = operation.get("requestBody")
            if body:
                media = body["content"].get("application/json") or next(
                    iter(body["content"].values())
                )
                expected["body"] = resolved(media["schema"], document)
            assert {
                k: {x: y for x, y in v.items() if x != "description"}
                for k, v in schema["properties"].items()
            } == {
                k: {x: y for x, y in v.items() if x != "description"}
                for k, v in expected.items()
            }, name
            required = {p["name"] for p in parameters if p.get("required")}
            if body and body.get("required"):
                required.add("body")
            assert set(schema["required"]) == required, name
            assert schema["additionalProperties"] is False
            hints = tool.annotations
            assert hints.read_only_hint is (method == "get"), name
            assert hints.destructive_hint is (method == "delete"), name
            assert hints.idempotent_hint is (method in ("get", "put", "delete")), name
            assert tool.description and len(tool.description) > 40, name
    assert operations == len(tools)
    for name in (
        "list_maps",
        "create_map",
        "list_locations",
        "create_locations",
        "set_location_layers",
    ):
        assert name in tools
    assert not any("key" in name or "webhook" in name for name in tools)


def test_tools_are_built_from_the_document_alone(app, client):
    """build_tools needs nothing but the document: no database, no app."""
    document = client.get(API + "/openapi.json").get_json()
    tools = build_tools(document)
    assert tools["create_map"].method == "post" and tools["create_map"].path == "/maps"
    assert tools["get_location"].path_params == ("mapId", "locId")
    assert "page" in tools["list_maps"].query_params


# --- a realistic agent session ----------------------------------------------------------


def test_an_agent_session_matches_the_http_api(service, tmp_path):
    key = service.write_key

    async def session():
        async with agent_session(tmp_path, service.base, key) as agent:
            made = await agent.data("create_map", body={"title": "Coffee in Lisbon"})
            assert (
                made == http(service, key, "GET", f"/maps/{made['id']}").json()["data"]
            )
            map_id = made["id"]
            places = [
                {"name": "Fábrica", "lat": 38.7139, "lng": -9.1447},
                {"name": "Copenhagen Coffee Lab", "lat": 38.7105, "lng": -9.1437},
                {"name": "Hello, Kristof", "lat": 38.7090, "lng": -9.1485},
            ]
            bulk = await agent.data(
                "create_locations", mapId=map_id, body={"locations": places}
            )
            assert bulk["count"] == 3
            assert [item["name"] for item in bulk["created"]] == [
                p["name"] for p in places
            ]
            layer = await agent.data(
                "create_layer", mapId=map_id, body={"name": "Favourites"}
            )
            first = bulk["created"][0]["id"]
            on_layer = await agent.data(
                "set_location_layers",
                mapId=map_id,
                locId=first,
                body={"layerIds": [layer["id"]]},
            )
            assert [item["id"] for item in on_layer["layers"]] == [layer["id"]]
            listed = await agent.data("list_locations", mapId=map_id, pageSize=2, page=1)
            assert listed == http(
                service, key, "GET", f"/maps/{map_id}/locations", params={"pageSize": 2}
            ).json()["data"]
            # The two places east of -9.146, by a bbox around them.
            bbox = "-9.1460,38.7100,-9.1430,38.7150"
            found = await agent.data("list_locations", mapId=map_id, bbox=bbox)
            assert [item["name"] for item in found["locations"]] == [
                "Fábrica",
                "Copenhagen Coffee Lab",
            ]
            assert found == http(
                service, key, "GET", f"/maps/{map_id}/locations", params={"bbox": bbox}
            ).json()["data"]
            fetched = await agent.data("get_location", mapId=map_id, locId=first)
            assert fetched == http(
                service, key, "GET", f"/maps/{map_id}/locations/{first}"
            ).json()["data"]
            exported = await agent.data("export_geojson", mapId=map_id)
            assert exported["type"] == "FeatureCollection"
            assert exported == http(service, key, "GET", f"/maps/{map_id}/locations.geojson").json()
            assert exported["features"][0]["properties"]["layerIds"] == [layer["id"]]
            events = await agent.data("list_events", mapId=map_id, limit=100)
            assert events == http(
                service, key, "GET", "/events", params={"mapId": map_id, "limit": 100}
            ).json()["data"]
            assert [event["type"] for event in events["events"]][:5] == [
                "map.created",
                "location.created",
                "location.created",
                "location.created",
                "layer.created",
            ]
            gone = await agent.data("delete_layer", mapId=map_id, layerId=layer["id"])
            assert gone == {"id": layer["id"], "deleted": True}
            return agent.errlog

    errlog = run(session)
    assert key not in errlog.read_text()


# --- errors an agent can act on ---------------------------------------------------------


def test_api_errors_are_tool_errors_with_code_message_and_details(service, tmp_path):
    async def session():
        async with agent_session(tmp_path, service.base, service.write_key) as agent:
            missing = await agent.call("get_map", mapId="nope")
            assert missing.is_error
            assert missing.content[0].text.startswith("NOT_FOUND (404): ")
            invalid = await agent.call("create_map", body={"title": "", "zoom": 99})
            assert invalid.is_error
            text = invalid.content[0].text
            assert text.startswith("VALIDATION_ERROR (400): ")
            details = json.loads(text.split("details: ", 1)[1])
            assert set(details) == {"title", "zoom"}
            # The refused create counted too: the bucket of 3 has 2 left.
            for _ in range(2):
                await agent.data("create_map", body={"title": "within the limit"})
            limited = await agent.call("create_map", body={"title": "a fourth"})
            assert limited.is_error
            assert limited.content[0].text.startswith("RATE_LIMIT_EXCEEDED (429): ")
            assert "Retry after " in limited.content[0].text

    run(session)


def test_a_read_only_key_reads_and_its_writes_answer_insufficient_scope(
    service, tmp_path
):
    async def session():
        async with agent_session(tmp_path, service.base, service.read_key) as agent:
            maps = await agent.data("list_maps")
            assert maps["pagination"]["total"] == 0
            refused = await agent.call("create_map", body={"title": "not allowed"})
            assert refused.is_error
            assert refused.content[0].text.startswith("INSUFFICIENT_SCOPE (403): ")
            return agent.errlog

    errlog = run(session)
    assert (
        http(service, service.write_key, "GET", "/maps").json()["data"]["pagination"][
            "total"
        ]
        == 0
    )
    assert service.read_key not in errlog.read_text()


def test_a_wrong_key_is_a_clear_error_and_is_never_repeated(service, tmp_path):
    wrong = "mk_live_" + "x" * 40

    async def session():
        async with agent_session(tmp_path, service.base, wrong) as agent:
            result = await agent.call("list_maps")
            assert result.is_error
            assert result.content[0].text.startswith("INVALID_API_KEY (401): ")
            assert wrong not in result.content[0].text
            return agent.errlog

    assert wrong not in run(session).read_text()


def test_a_service_that_is_down_is_a_clear_error(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    secret = "mk_live_" + "y" * 40

    async def session():
        async with agent_session(tmp_path, url, secret) as agent:
            with pytest.raises(MCPError) as raised:
                await agent.session.list_tools()
            assert f"mapapi service at {url} did not answer" in str(raised.value)
            assert secret not in str(raised.value)
            return agent.errlog

    assert secret not in run(session).read_text()


def test_it_starts_and_lists_tools_in_under_two_seconds(service, tmp_path):
    """The best of three starts: the machines running the suite are shared."""

    async def session():
        started = time.monotonic()
        async with agent_session(tmp_path, service.base, service.write_key) as agent:
            tools = (await agent.session.list_tools()).tools
            return time.monotonic() - started, len(tools)

    timings = []
    for _ in range(3):
        elapsed, count = run(session)
        assert count > 20
        timings.append(elapsed)
        if elapsed < 2.0:
            break
    assert min(timings) < 2.0, (
        f"{min(timings):.2f} s at best to start and list {count} tools"
    )


def test_without_a_key_it_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAPAPI_")}
    done = subprocess.run(
        [mapapi_program(), "mcp"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
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
                answer = requests.request(
                    method, target + self.path, headers=headers, data=body, timeout=10
                )
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
        async with agent_session(tmp_path, proxy.url, service.write_key) as agent:
            return await agent.data("create_map", body={"title": "Created once"})

    try:
        made = run(session)
    finally:
        proxy.close()
    assert len(proxy.posts) == 2 and proxy.posts[0] == proxy.posts[1] is not None
    maps = http(service, service.write_key, "GET", "/maps").json()["data"]["maps"]
    assert [item["id"] for item in maps] == [made["id"]]
