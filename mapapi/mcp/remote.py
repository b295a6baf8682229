"""``POST /mcp``: the MCP server on the service's own port, for agents elsewhere.

The protocol is the MCP SDK's (``bridge``): its low-level server, on its
kernel for a JSON-RPC request and behind its Streamable HTTP transport
(stateless, answering JSON) for anything else.

Before the SDK sees a request, an ``Origin`` that is not an allowed CORS
origin is refused (403 and a JSON-RPC error, against DNS rebinding). Then
the key is checked as the API checks it (the general bucket first for a
key that is refused, then 401 with ``WWW-Authenticate``, or 403 for an
account without a plan), once:

- a tool call is dispatched to the app in-process as the API request it
  makes, with the caller's ``Authorization``, so it passes every check of
  the API, the key's, scopes, buckets and idempotency included, and is
  counted there. When the API refuses the key, its answer is the answer
  to ``/mcp``; when the call made no API request (its arguments did not
  fit, say), or one that did not get as far as the key (a 429, a 5xx), the
  view checks the key itself before answering;
- any other message is answered only after the view has checked the key.
  A valid key's own protocol messages (``initialize``, ``tools/list``)
  count against no bucket.

Most tool calls never reach this view: ``front``, a WSGI layer in front of
Flask's views, answers them the same way in one pass of the app's hooks
(their API request's). Those it does not take come here; one whose key
its call did not settle comes with its answer made (``ANSWERED``), which
the view gives once it has checked the key.
"""

import threading

from flask import Blueprint, Flask, current_app, g, jsonify, request

from ..http import auth, cors, ratelimit
from ..http.errors import APIError, validation_error
from .caller import Caller, KeyCheck, kept_environ

MCP_PATH = "/mcp"
#: The WSGI environ's entry with the answer ``front`` made to a tool call
#: that left only the key's check to this view.
ANSWERED = "mapapi.mcp.answered"
READ_ONLY_VALUES = {"true": True, "false": False}
#: The answer to a browser's request from an origin that may not call: a
#: JSON-RPC error (invalid request), as the MCP SDK's own transport refuses
#: one, which MCP clients show as it is.
FOREIGN_ORIGIN = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {
        "code": -32600,
        "message": "Requests from this Origin are refused: it is not one of MAPAPI_CORS_ORIGINS.",
    },
}

bp = Blueprint("mcp", __name__)


@bp.post(MCP_PATH)
def serve_mcp():
    """The MCP Streamable HTTP transport: one JSON-RPC message in, its answer out."""
    current = request._get_current_object()  # one context lookup for the uses below
    answered = current.environ.get(ANSWERED)
    if answered is not None:
        require_key()
        return answered
    if "Origin" in current.headers and cors.allowed_origin() is None:
        return jsonify(FOREIGN_ORIGIN), 403
    read_only = _read_only(current.args.getlist("readOnly"))
    if read_only is None or _too_large(current):
        # The key, then the buckets, then the query and the body's size.
        require_key()
        ratelimit.count_in_general_bucket()
        if read_only is None:
            raise validation_error("The query is invalid.", {"readOnly": ["Must be true or false."]})
        raise APIError(413, "PAYLOAD_TOO_LARGE", "The request body is larger than 2 MiB.")
    served = bridge(current_app._get_current_object())
    body = current.get_data()
    exchange = served.exchange(current.headers, body)
    # A tool call's API request checks the key as the API checks any
    # request's: the view checks it only when that request did not.
    key_check = KeyCheck() if exchange is not None and exchange.method == "tools/call" else None
    if key_check is None:
        require_key()
        # A read-only grant lists the tools that read; calling one that
        # writes is the API's INSUFFICIENT_SCOPE, as for a READ_ONLY key.
        read_only = read_only or not g.get("grant_writes", True)
    environ = current.environ
    caller = Caller(
        authorization=current.headers.get("Authorization"),
        request_id=g.request_id,
        read_only=read_only,
        environ=kept_environ(environ),
        key_check=key_check,
    )
    answer = served.respond(exchange, environ, body, caller)
    if key_check is not None:
        if key_check.refusal is not None:
            return key_check.refusal
        if not key_check.passed:
            require_key()
    return answer


def _read_only(values: list[str]) -> bool | None:
    """``readOnly`` from the query: left out, or given once as true or false; None otherwise."""
    if not values:
        return False
    return READ_ONLY_VALUES.get(values[0]) if len(values) == 1 else None


def _too_large(current) -> bool:
    length = current.content_length
    return length is not None and length > current_app.config["MAX_CONTENT_LENGTH"]


def require_key() -> None:
    """The API's checks of the key (1 to 3), for this request: raises their refusal."""
    auth.check_key(request._get_current_object(), writes=False)
    refusal = auth.refusal()
    if refusal is not None:
        ratelimit.count_in_general_bucket()
        raise refusal


_BRIDGE_LOCK = threading.Lock()


def bridge(app: Flask):
    """The app's bridge to the SDK, made at the first request to ``/mcp`` (the
    SDK is imported then: a service nobody asks for MCP starts without it)."""
    found = app.extensions.get("mapapi.mcp")
    if found is None:
        with _BRIDGE_LOCK:
            found = app.extensions.get("mapapi.mcp")
            if found is None:
                from .bridge import Bridge

                found = app.extensions["mapapi.mcp"] = Bridge(app)
    return found


