"""The MCP server's tools at work, whichever transport carries them.

``ToolBox`` lists the tools and turns a call into the API request it makes,
through a ``Service``: the HTTP client of ``mapapi mcp`` (``client``), or
the app itself, in-process, for ``/mcp`` (``remote``). Either way the
request carries the caller's key, so every rule of the API applies to the
agent unchanged.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import version
from typing import Protocol

import mcp_types as types
from mcp.server.lowlevel import Server

from .arguments import ArgumentErrors, Request, checked, request_for
from .export import export_page
from .results import error_text, failure, success
from .tools import EXPORT_TOOL, Tool

INSTRUCTIONS = (
    "Tools of a mapapi service: maps and, inside a map, locations, categories, tags "
    "and layers, GeoJSON in and out, and the account's change feed. Find a map's id "
    "with list_maps first. Arguments are flat: path, query and body fields side by "
    "side. A call that does not fit its schema sends nothing and says which arguments "
    "to fix; an API error comes back as CODE (status): message, with the fields at "
    "fault. Lists give 20 items a page unless asked for more."
)


@dataclass(frozen=True)
class Answer:
    """An API response: its status, headers (anything with ``get``) and JSON body."""

    status: int
    headers: Mapping
    body: object


class Service(Protocol):
    """Where a tool call's API request goes."""

    #: The service's address, for the notes that point to the HTTP API.
    base_url: str

    async def request(self, request: Request) -> Answer: ...


class ServiceUnreachable(Exception):
    """The service did not answer: down, wrong URL, or every try lost."""


def as_mcp_tool(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.hints.read_only,
            destructive_hint=tool.hints.destructive,
            idempotent_hint=tool.hints.idempotent,
            open_world_hint=False,
        ),
    )


def listing(tools: dict[str, Tool], read_only: bool) -> types.ListToolsResult:
    """The ``tools/list`` answer: every tool, or with ``read_only`` those that only read."""
    return types.ListToolsResult(
        tools=[as_mcp_tool(tool) for tool in tools.values() if tool.hints.read_only or not read_only]
    )


class ToolBox:
    """The tools of one service, called with one key."""

    def __init__(self, service: Service, tools: dict[str, Tool], *, read_only: bool = False):
        self.service = service
        self.tools = tools
        self.read_only = read_only

    async def call(self, name: str, arguments: dict | None) -> types.CallToolResult:
        tool = self.tools.get(name)
        if tool is None:
            return failure(f"No tool named {name!r}; list the tools to see them.")
        if self.read_only and not tool.hints.read_only:
            return failure(f"{name} writes, and this server offers only the tools that read.")
        try:
            arguments = checked(tool, arguments)
        except ArgumentErrors as errors:
            return failure(errors.text())
        request = request_for(tool, arguments)
        try:
            if name == EXPORT_TOOL:
                return await export_page(self.data, request, arguments, self.service.base_url)
            data = await self.data(request)
        except ServiceUnreachable as error:
            return failure(str(error))
        return data if isinstance(data, types.CallToolResult) else success(data)

    async def data(self, request: Request):
        """A success's ``data`` (the whole body when it is not wrapped), or the
        tool error of an API error."""
        answer = await self.service.request(request)
        body = answer.body
        if 200 <= answer.status < 300:
            return body["data"] if isinstance(body, dict) and "data" in body else body
        return failure(error_text(answer.status, body, answer.headers.get("Retry-After")))


def build_server(on_list_tools, on_call_tool) -> Server:
    return Server(
        "mapapi",
        version=version("mapapi"),
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
