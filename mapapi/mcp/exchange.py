"""One JSON-RPC request to ``/mcp``, served on the MCP SDK's kernel itself.

For every POST, the SDK's stateless Streamable HTTP transport makes a
transport, memory streams, a task in its task group, a JSON-RPC dispatcher
and a server runner, sends the message through them and tears them down:
most of a tool call's cost. What it does for a JSON-RPC *request* of the
handshake era (``initialize``, ``tools/list``, ``tools/call``, ``ping``)
comes down to one run of the SDK's kernel (``serve_one``: the method and
its params checked against the SDK's types, the handler, its result
checked and shaped for the protocol version) on a connection born ready
at the request's protocol version, and its JSON-RPC response or error
written back. That is what ``answer`` does, and nothing else, on the
kernel its thread keeps for that protocol version (``Runners``).

``request_in`` takes only such a request, in a POST the transport accepts
as it is. Everything else (a notification or a response, which the
transport answers 202; a body that does not parse or is not a JSON-RPC
message; an ``Accept`` or ``Content-Type`` it refuses; a 2026 or unknown
protocol version) is left to the SDK's transport, which answers it as it
always did. tests/test_mcp_exchange.py checks that the two answer alike.
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import ServerRunner, serve_one
from mcp.server.streamable_http import CONTENT_TYPE_JSON, check_accept_headers
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

log = logging.getLogger(__name__)

#: What the transport says of a request in JSON-response mode: the answer
#: has no room for a request to the client, and stateless, no reply could
#: come back.
NO_BACK_CHANNEL = TransportContext(kind="streamable-http", can_send_request=False)


@dataclass(frozen=True)
class Exchange:
    """A JSON-RPC request that ``answer`` serves, and its protocol version."""

    request: JSONRPCRequest
    protocol_version: str

    @property
    def method(self) -> str:
        return self.request.method


def request_in(headers: Mapping[str, str], body: bytes) -> Exchange | None:
    """The request a POST carries, when the SDK's transport would take it as
    one of the handshake era; None for anything it answers otherwise."""
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    accepts_json, _ = check_accept_headers(_WithHeaders(headers))
    content_type = headers.get("Content-Type", "")
    if not accepts_json or content_type.split(";")[0].strip() != CONTENT_TYPE_JSON:
        return None
    try:
        message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
    except ValueError:  # not JSON, or not a JSON-RPC message (ValidationError is one)
        return None
    if not isinstance(message, JSONRPCRequest):
        return None
    return Exchange(message, version or DEFAULT_NEGOTIATED_VERSION)


@dataclass(frozen=True)
class _WithHeaders:
    """What ``check_accept_headers`` reads of a request: its headers."""

    headers: Mapping[str, str]


class Runners:
    """The SDK's kernel of one thread: a ``ServerRunner`` on a connection born
    ready, per protocol version, kept for the thread's life.

    ``serve_one`` makes a runner and its connection for each request and
    closes the connection after (a shielded, bounded cancel scope): a third
    of the kernel's time (135 against 87 µs a ``tools/call``, in-process).
    Only ``initialize`` changes its connection
    (it commits the version it negotiated), so it alone gets one of its own,
    through ``serve_one``; no handler of ours keeps anything on a connection.
    """

    def __init__(self, server: Server, lifespan_state: Any):
        self.server = server
        self.lifespan_state = lifespan_state
        self._kept: dict[str, ServerRunner] = {}

    async def serve(self, version: str, request: JSONRPCRequest) -> dict[str, Any]:
        context = _Context(request.id)
        if request.method == "initialize":
            connection = Connection.from_envelope(version, None, None)
            return await serve_one(
                self.server, context, request.method, request.params,
                connection=connection, lifespan_state=self.lifespan_state,
            )  # fmt: skip
        runner = self._kept.get(version)
        if runner is None:
            connection = Connection.from_envelope(version, None, None)
            runner = self._kept[version] = ServerRunner(self.server, connection, self.lifespan_state)
        return await runner.on_request(context, request.method, request.params)


async def answer(runners: Runners, exchange: Exchange) -> bytes:
    """The JSON-RPC response to ``exchange``, or its error, as the transport writes it."""
    request = exchange.request
    try:
        result = await runners.serve(exchange.protocol_version, request)
    except Exception as error:  # the dispatcher's boundary: every error is an answer
        data = handler_exception_to_error_data(error)
        if data is None:
            log.exception("handler for %r raised", request.method)
            # As the SDK's dispatcher answers it (its compatibility code 0).
            data = ErrorData(code=0, message=str(error))
        message = JSONRPCError(jsonrpc="2.0", id=request.id, error=data)
    else:
        message = JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode()


@dataclass
class _Context:
    """The SDK's dispatch context of one request answered in JSON: nothing can
    reach the client but the answer (a notification or progress is dropped,
    as the transport drops them in JSON-response mode)."""

    request_id: RequestId
    transport: TransportContext = NO_BACK_CHANNEL
    message_metadata: ServerMessageMetadata = field(default_factory=ServerMessageMetadata)
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)

    @property
    def can_send_request(self) -> bool:
        return False

    async def send_raw_request(self, method: str, params, opts=None) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params, opts=None) -> None:
        return None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None
