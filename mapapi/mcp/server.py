"""The MCP server: lists the tools, and turns each call into one API request."""

import json
import logging
from importlib.metadata import version

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from .client import Answer, ServiceClient, ServiceUnreachable, expand_path
from .tools import Tool, build_tools

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Tools of a mapapi service: maps and, inside a map, locations, categories, "
    "tags and layers, GeoJSON in and out, and the account's change feed. Find a "
    "map's id with list_maps first. Errors come back as CODE (status): message, "
    "with details per field: correct the named fields and call again."
)


class MapapiTools:
    """The tools of one service, built from its document on first need."""

    def __init__(self, client: ServiceClient):
        self.client = client
        self._tools: dict[str, Tool] | None = None

    async def tools(self) -> dict[str, Tool]:
        if self._tools is None:
            self._tools = build_tools(await self.client.openapi_document())
        return self._tools

    async def list_tools(self, _ctx, _params) -> types.ListToolsResult:
        try:
            tools = await self.tools()
        except ServiceUnreachable as error:
            raise MCPError(types.INTERNAL_ERROR, str(error)) from None
        return types.ListToolsResult(
            tools=[as_mcp_tool(tool) for tool in tools.values()]
        )

    async def call_tool(
        self, _ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            tools = await self.tools()
            tool = tools.get(params.name)
            if tool is None:
                return failure(
                    f"No tool named {params.name!r}; list the tools to see them."
                )
            arguments = params.arguments or {}
            missing = [name for name in tool.path_params if name not in arguments]
            if missing:
                return failure(f"Missing required argument(s): {', '.join(missing)}.")
            answer = await self.call(tool, arguments)
        except ServiceUnreachable as error:
            return failure(str(error))
        return result_of(answer)

    async def call(self, tool: Tool, arguments: dict) -> Answer:
        path = expand_path(
            tool.path, {name: arguments[name] for name in tool.path_params}
        )
        query = {
            name: arguments[name] for name in tool.query_params if name in arguments
        }
        return await self.client.request(
            tool.method,
            path,
            query=query or None,
            body=arguments.get("body") if tool.has_body else None,
            content_type=tool.body_media_type or "application/json",
        )


def as_mcp_tool(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.annotations["readOnlyHint"],
            destructive_hint=tool.annotations["destructiveHint"],
            idempotent_hint=tool.annotations["idempotentHint"],
            open_world_hint=False,
        ),
    )


def result_of(answer: Answer) -> types.CallToolResult:
    """A success's ``data`` as structured content; an API error as a tool error."""
    body = answer.body
    if 200 <= answer.status < 300:
        data = body["data"] if isinstance(body, dict) and "data" in body else body
        return types.CallToolResult(
            content=[
                types.TextContent(
                    type="text", text=json.dumps(data, ensure_ascii=False)
                )
            ],
            structured_content=data if isinstance(data, dict) else {"result": data},
        )
    return failure(error_text(answer))


def error_text(answer: Answer) -> str:
    """``CODE (status): message``, the details, and for a 429 when to try again."""
    error = body_error(answer.body)
    if error is None:
        return f"The service answered HTTP {answer.status} without an error body."
    lines = [f"{error.get('code')} ({answer.status}): {error.get('message')}"]
    if "details" in error:
        lines.append("details: " + json.dumps(error["details"], ensure_ascii=False))
    if answer.status == 429:
        lines.append(f"Retry after {answer.headers.get('Retry-After', '1')} seconds.")
    return "\n".join(lines)


def body_error(body) -> dict | None:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"]
    return None


def failure(text: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=True
    )


def build_server(client: ServiceClient) -> Server:
    handlers = MapapiTools(client)
    return Server(
        "mapapi",
        version=version("mapapi"),
        instructions=INSTRUCTIONS,
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
    )


def run(url: str, key: str) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes them."""
    # The HTTP client logs every request at INFO; stderr is the host's log.
    logging.getLogger("httpx2").setLevel(logging.WARNING)

    async def main() -> None:
        client = ServiceClient(url, key)
        try:
            server = build_server(client)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(
                    read_stream, write_stream, server.create_initialization_options()
                )
        finally:
            await client.close()

    anyio.run(main)
