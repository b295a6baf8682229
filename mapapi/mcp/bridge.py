"""The MCP SDK inside the WSGI service, and the app itself as the service
its tool calls go to.

Each waitress thread keeps an event loop of its own, and on it the SDK's
low-level server and its Streamable HTTP session manager (stateless,
answering JSON), made at the thread's first ``/mcp`` request and kept for
the thread's life. A request runs on them to its end in the thread that
took it, and so does its tool call's API request, through the whole WSGI
app, as an HTTP request would go: no request waits for another thread.

A JSON-RPC request of the handshake era, which is every message an MCP
client sends but its notifications, is served on the SDK's kernel directly
(``exchange``); anything else goes to the SDK's transport. The caller rides
in a context variable, which the transport's tasks inherit: the tool
handlers find it on either path. docs/decisions.md has what each design
cost.
"""

import asyncio
import contextvars
import io
import logging
import threading
import uuid
from dataclasses import dataclass
from urllib.parse import urlencode

import mcp_types as types
from flask import Flask
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from werkzeug.datastructures import Headers
from werkzeug.wrappers import Response

from ..contract.docs_page import api_document
from ..contract.jsonprovider import encode
from ..http.auth import VIA_MCP
from .arguments import Request
from .exchange import Exchange, Runners, answer, request_in
from .caller import Caller
from .server import Answer, ToolBox, build_server, listing
from .sizes import loads
from .tools import build_tools

# The transport logs every stateless request's end at INFO, the manager each
# thread's start; the access log already has a line per request.
for _name in ("mcp.server.streamable_http", "mcp.server.streamable_http_manager"):
    logging.getLogger(_name).setLevel(logging.WARNING)

#: The caller of the request being served, for the tool handlers.
CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar("mapapi.mcp.caller")


@dataclass(frozen=True)
class _ThreadState:
    """What a waitress thread keeps to serve ``/mcp``."""

    loop: asyncio.AbstractEventLoop
    #: The SDK's kernel, on what the server's lifespan gave (as the transport passes it).
    runners: Runners
    manager: StreamableHTTPSessionManager


class Bridge:
    """The tools of one app, served by the SDK in each thread that asks."""

    def __init__(self, app: Flask):
        self.app = app
        self.tools = build_tools(api_document(app))
        self.listings = {flag: listing(self.tools, flag) for flag in (False, True)}
        self._threads = threading.local()

    @staticmethod
    def exchange(headers, body: bytes) -> Exchange | None:
        """The JSON-RPC request of a POST that the SDK's kernel answers (``exchange.request_in``)."""
        return request_in(headers, body)

    def respond(self, exchange: Exchange | None, environ: dict, body: bytes, caller: Caller) -> Response:
        """The answer to one ``POST /mcp``: of the SDK's kernel for ``exchange``,
        of its transport when there is none."""
        state = self._thread_state()
        token = CALLER.set(caller)
        try:
            if exchange is None:
                return state.loop.run_until_complete(_by_transport(state.manager, environ, body, caller))
            answered = state.loop.run_until_complete(answer(state.runners, exchange))
        finally:
            CALLER.reset(token)
        return Response(answered, content_type="application/json")

    def _thread_state(self) -> _ThreadState:
        state = getattr(self._threads, "state", None)
        if state is None:
            loop = asyncio.new_event_loop()
            server = build_server(self.list_tools, self.call_tool)
            # No OpenTelemetry exporter here: its span per message costs a third of the SDK's time.
            server.middleware.clear()
            manager = StreamableHTTPSessionManager(server, json_response=True, stateless=True)
            started = loop.create_future()
            # The server's lifespan and the manager's task group live as long as the thread.
            loop.create_task(_run(server, manager, started), context=contextvars.Context())
            lifespan_state = loop.run_until_complete(started)
            state = self._threads.state = _ThreadState(loop, Runners(server, lifespan_state), manager)
        return state

    async def list_tools(self, _ctx, _params) -> types.ListToolsResult:
        return self.listings[CALLER.get().read_only]

    async def call_tool(self, _ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = CALLER.get()
        box = ToolBox(InProcess(self.app, caller), self.tools, read_only=caller.read_only)
        return await box.call(params.name, params.arguments)


async def _run(server: Server, manager: StreamableHTTPSessionManager, started: asyncio.Future) -> None:
    # The manager enters the server's lifespan for its transport, this one
    # for the kernel: the SDK's default lifespan, which does nothing.
    async with server.lifespan(server) as lifespan_state, manager.run():
        started.set_result(lifespan_state)
        await asyncio.Event().wait()


async def _by_transport(
    manager: StreamableHTTPSessionManager, environ: dict, body: bytes, caller: Caller
) -> Response:
    """Run the SDK's transport on one request whose body is read already; its answer."""
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
        "client": (caller.environ.get("REMOTE_ADDR", ""), 0),
    }
    delivered = False
    answered = Response(status=500)
    chunks = []

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            answered.status_code = message["status"]
            answered.headers.clear()
            for name, value in message.get("headers", []):
                answered.headers.add(name.decode("latin-1"), value.decode("latin-1"))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await manager.handle_request(scope, receive, send)
    answered.set_data(b"".join(chunks))
    return answered


def _headers(environ: dict) -> list[tuple[bytes, bytes]]:
    """The request's headers as ASGI lists them."""
    headers = []
    for name, value in environ.items():
        if name.startswith("HTTP_"):
            headers.append((name[5:].replace("_", "-").lower().encode("latin-1"), value.encode("latin-1")))
        elif name in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers.append((name.replace("_", "-").lower().encode("latin-1"), value.encode("latin-1")))
    return headers


class InProcess:
    """The app itself as the service: each request runs through the whole
    WSGI app (every hook, check and bucket), in the thread of the call, as a
    request from outside would."""

    def __init__(self, app: Flask, caller: Caller):
        self.app = app
        self.caller = caller

    @property
    def base_url(self) -> str:
        return self.caller.base_url

    async def request(self, call: Request) -> Answer:
        environ = {
            **self.caller.environ,
            "REQUEST_METHOD": call.method.upper(),
            "SCRIPT_NAME": "",
            "PATH_INFO": call.path,
            "QUERY_STRING": urlencode(call.query),
            "HTTP_X_REQUEST_ID": self.caller.request_id,
            VIA_MCP: True,
        }
        if self.caller.authorization is not None:
            environ["HTTP_AUTHORIZATION"] = self.caller.authorization
        if call.method == "post":
            environ["HTTP_IDEMPOTENCY_KEY"] = str(uuid.uuid4())
        body = b"" if call.body is None else encode(call.body)
        if call.body is not None:
            environ["CONTENT_TYPE"] = call.content_type
            environ["CONTENT_LENGTH"] = str(len(body))
        environ["wsgi.input"] = io.BytesIO(body)
        # In a context of its own, as a request from outside: in the /mcp
        # request's, Flask would give it that request's app context (its `g`,
        # its database session) instead of one of its own.
        status, headers, data = contextvars.Context().run(_run_wsgi, self.app, environ)
        body = loads(data) if data else None
        if self.caller.key_check is not None:
            self.caller.key_check.learn(status, body, lambda: Response(data, status, headers))
        return Answer(status, Headers(headers), body)


def _run_wsgi(app: Flask, environ: dict) -> tuple[int, list, bytes]:
    """The status, headers and body with which ``app`` answers ``environ``."""
    started = []
    answer = app(environ, lambda status, headers, exc_info=None: started.append((status, headers)))
    try:
        data = b"".join(answer)
    finally:
        if hasattr(answer, "close"):
            answer.close()
    status, headers = started[0]
    return int(status[:3]), headers, data
