"""The MCP SDK's Streamable HTTP transport inside the WSGI service, and the
app itself as the service its tool calls go to.

The SDK's session manager is stateless (each request stands alone, no
session id) and answers JSON rather than a stream. It is an ASGI
application, run here in the waitress thread that took the request: each
thread keeps an event loop and a session manager of its own, and runs one
request on them to its end, then its tool call's API request right there,
through the whole WSGI app, as an HTTP request would go. No request waits
for another thread (a2wsgi's one loop thread for every request, and a
worker thread for each API request, cost a fifth of a tool call's rate:
docs/decisions.md has the figures).
"""

import asyncio
import contextvars
import logging
import threading
import uuid
from urllib.parse import urlencode

import mcp_types as types
import orjson
from flask import Flask
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Response

from ..contract.docs_page import api_document
from .arguments import Request
from .remote import Caller
from .server import Answer, ToolBox, build_server, listing
from .tools import build_tools

# The transport logs every stateless request's end at INFO, the manager each
# thread's start; the access log already has a line per request.
for _name in ("mcp.server.streamable_http", "mcp.server.streamable_http_manager"):
    logging.getLogger(_name).setLevel(logging.WARNING)

#: Where the caller rides in the ASGI scope, for the tool handlers.
CALLER = "mapapi.caller"


class Bridge:
    """The tools of one app, served by the SDK's transport in each thread that asks."""

    def __init__(self, app: Flask):
        self.app = app
        self.tools = build_tools(api_document(app))
        self.listings = {flag: listing(self.tools, flag) for flag in (False, True)}
        self._threads = threading.local()

    def respond(self, environ: dict, body: bytes, caller: Caller) -> Response:
        """The transport's answer to one ``POST /mcp``."""
        loop, manager = self._thread_state()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": environ.get("wsgi.url_scheme", "http"),
            "path": "/mcp",
            "root_path": "",
            "query_string": environ.get("QUERY_STRING", "").encode("latin-1"),
            "headers": _headers(environ),
            "server": (environ["SERVER_NAME"], int(environ["SERVER_PORT"])),
            "client": (caller.remote_addr, 0),
            CALLER: caller,
        }
        return loop.run_until_complete(_exchange(manager, scope, body))

    def _thread_state(self):
        state = getattr(self._threads, "state", None)
        if state is None:
            loop = asyncio.new_event_loop()
            server = build_server(self.list_tools, self.call_tool)
            # No OpenTelemetry exporter here: its span per message costs a third of the SDK's time.
            server.middleware.clear()
            manager = StreamableHTTPSessionManager(server, json_response=True, stateless=True)
            started = loop.create_future()
            # The manager's task group lives as long as the thread, between its requests.
            loop.create_task(_run_manager(manager, started), context=contextvars.Context())
            loop.run_until_complete(started)
            state = self._threads.state = (loop, manager)
        return state

    async def list_tools(self, ctx, _params) -> types.ListToolsResult:
        return self.listings[_caller(ctx).read_only]

    async def call_tool(self, ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = _caller(ctx)
        box = ToolBox(InProcess(self.app, caller), self.tools, read_only=caller.read_only)
        return await box.call(params.name, params.arguments)


async def _run_manager(manager: StreamableHTTPSessionManager, started: asyncio.Future) -> None:
    async with manager.run():
        started.set_result(None)
        await asyncio.Event().wait()


async def _exchange(manager: StreamableHTTPSessionManager, scope: dict, body: bytes) -> Response:
    """Run the transport on one request whose body is read already; its answer."""
    delivered = False
    answer = Response(status=500)
    chunks = []

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            answer.status_code = message["status"]
            answer.headers.clear()
            for name, value in message.get("headers", []):
                answer.headers.add(name.decode("latin-1"), value.decode("latin-1"))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await manager.handle_request(scope, receive, send)
    answer.set_data(b"".join(chunks))
    return answer


def _headers(environ: dict) -> list[tuple[bytes, bytes]]:
    """The request's headers as ASGI lists them."""
    headers = []
    for name, value in environ.items():
        if name.startswith("HTTP_"):
            headers.append((name[5:].replace("_", "-").lower().encode("latin-1"), value.encode("latin-1")))
        elif name in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers.append((name.replace("_", "-").lower().encode("latin-1"), value.encode("latin-1")))
    return headers


def _caller(ctx) -> Caller:
    return ctx.request.scope[CALLER]


class InProcess:
    """The app itself as the service: each request runs through the whole
    WSGI app (every hook, check and bucket), in the thread of the call."""

    def __init__(self, app: Flask, caller: Caller):
        self.app = app
        self.caller = caller
        self.base_url = caller.base_url

    async def request(self, call: Request) -> Answer:
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
