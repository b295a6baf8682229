"""The MCP SDK's Streamable HTTP transport inside the WSGI service, and the
app itself as the service its tool calls go to.

The SDK's session manager is stateless (each request stands alone, no
session id) and answers JSON rather than a stream. It is an ASGI
application: ``a2wsgi`` runs it on one event loop, in a thread of its own,
while the waitress thread that took the request waits for the answer. A
tool call's API request leaves that loop for a worker thread, where it
runs through the whole WSGI app, as an HTTP request would
(docs/decisions.md says what these hops cost).
"""

import asyncio
import concurrent.futures
import logging
import threading
import uuid
from urllib.parse import urlencode

import anyio
import mcp_types as types
import orjson
from a2wsgi import ASGIMiddleware
from flask import Flask
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Response

from ..contract.docs_page import api_document
from .arguments import Request
from .remote import CALLER, Caller
from .server import Answer, ToolBox, build_server, listing
from .tools import build_tools

# The transport logs every stateless request's end at INFO; the access log
# already has a line per request.
logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)


class Bridge:
    """The SDK's session manager on an event loop of its own, as a WSGI app."""

    def __init__(self, app: Flask):
        self.app = app
        self.tools = tools = build_tools(api_document(app))
        self.listings = {flag: listing(tools, flag) for flag in (False, True)}
        self.manager = StreamableHTTPSessionManager(
            build_server(self.list_tools, self.call_tool), json_response=True, stateless=True
        )
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="mcp-loop", daemon=True).start()
        started = concurrent.futures.Future()
        asyncio.run_coroutine_threadsafe(self._run_manager(started), self.loop)
        started.result()
        self.wsgi = ASGIMiddleware(self.manager.handle_request, loop=self.loop)

    async def _run_manager(self, started: concurrent.futures.Future) -> None:
        async with self.manager.run():
            started.set_result(None)
            await asyncio.Event().wait()  # for the life of the process

    async def list_tools(self, ctx, _params) -> types.ListToolsResult:
        return self.listings[_caller(ctx).read_only]

    async def call_tool(self, ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = _caller(ctx)
        box = ToolBox(InProcess(self.app, caller), self.tools, read_only=caller.read_only)
        return await box.call(params.name, params.arguments)


def _caller(ctx) -> Caller:
    return ctx.request.scope["wsgi_environ"][CALLER]


class InProcess:
    """The app itself as the service: each request runs through the whole
    WSGI app (every hook, check and bucket), in a worker thread."""

    def __init__(self, app: Flask, caller: Caller):
        self.app = app
        self.caller = caller
        self.base_url = caller.base_url

    async def request(self, call: Request) -> Answer:
        return await anyio.to_thread.run_sync(self._respond, call)

    def _respond(self, call: Request) -> Answer:
        headers = {"Authorization": self.caller.authorization, "X-Request-Id": self.caller.request_id}
        if call.method == "post":
            headers["Idempotency-Key"] = str(uuid.uuid4())
        environ = EnvironBuilder(
            path=call.path,
            base_url=self.caller.base_url,
            method=call.method.upper(),
            query_string=urlencode(call.query),
            headers=headers,
            data=None if call.body is None else orjson.dumps(call.body),
            content_type=call.content_type if call.body is not None else None,
            environ_base={"REMOTE_ADDR": self.caller.remote_addr},
        ).get_environ()
        response = Response.from_app(self.app, environ, buffered=True)
        body = response.get_data()
        return Answer(response.status_code, response.headers, orjson.loads(body) if body else None)
