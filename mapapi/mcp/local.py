"""``mapapi mcp``: the tools over stdio, as a client of a running service.

The tools are built from the service's own OpenAPI document, read at the
first need. While the service cannot be reached they are built from this
package's document instead, so that a desktop assistant started before the
service still lists them; each call then says that the service is down,
and the service's document is read again at the next need.
"""

import logging

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server

from .client import ServiceClient
from .server import ServiceUnreachable, ToolBox, build_server, listing
from .tools import Tool, build_tools

log = logging.getLogger(__name__)


class Catalog:
    """The tools of the service, built once from its document."""

    def __init__(self, client: ServiceClient):
        self.client = client
        self._tools: dict[str, Tool] | None = None

    async def tools(self) -> dict[str, Tool]:
        if self._tools is not None:
            return self._tools
        try:
            self._tools = build_tools(await self.client.openapi_document())
        except ServiceUnreachable as error:
            log.warning("%s: listing this package's own tools until it answers", error)
            return packaged_tools()
        return self._tools


_PACKAGED: dict[str, Tool] = {}


def packaged_tools() -> dict[str, Tool]:
    """The tools of this package's own API description (built without a database)."""
    if not _PACKAGED:
        from flask import Flask

        from ..api import register_blueprints
        from ..contract.openapi import build_document

        app = Flask("mapapi")
        register_blueprints(app)
        _PACKAGED.update(build_tools(build_document(app)))
    return _PACKAGED


def run(url: str, key: str, read_only: bool = False) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes them."""
    # The HTTP client logs every request at INFO; stderr is the host's log.
    logging.getLogger("httpx2").setLevel(logging.WARNING)

    async def main() -> None:
        client = ServiceClient(url, key)
        catalog = Catalog(client)

        async def list_tools(_ctx, _params) -> types.ListToolsResult:
            return listing(await catalog.tools(), read_only)

        async def call_tool(_ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
            box = ToolBox(client, await catalog.tools(), read_only=read_only)
            return await box.call(params.name, params.arguments)

        try:
            server = build_server(list_tools, call_tool)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            await client.close()

    anyio.run(main)
