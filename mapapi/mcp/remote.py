"""``POST /mcp``: the MCP server on the service's own port, for agents elsewhere.

The protocol is the MCP SDK's (``bridge``): its low-level ``Server``
behind its Streamable HTTP session manager, stateless and answering JSON.

Before the SDK sees a request, an ``Origin`` that is not an allowed CORS
origin is refused (403 and a JSON-RPC error, against DNS rebinding); then
the view answers as the API does: the key is checked (the general bucket first for a key
that is refused, then 401 with ``WWW-Authenticate``, or 403 for an account
without a plan). A valid key's own protocol messages (``initialize``,
``tools/list``) count against no bucket: each tool call is dispatched to
the app in-process as the API request it makes, with the caller's
``Authorization``, so it passes every check of the API, scopes, buckets
and idempotency included, and is counted there.
"""

import threading
from dataclasses import dataclass

from flask import Blueprint, Flask, current_app, g, jsonify, request

from ..http import auth, cors, ratelimit
from ..http.errors import validation_error

MCP_PATH = "/mcp"
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


#: What a tool call's API request keeps of the ``/mcp`` request's WSGI
#: environ: where the request came in, and from whom.
KEPT_ENVIRON = (
    "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "HTTP_HOST", "REMOTE_ADDR", "wsgi.version",
    "wsgi.url_scheme", "wsgi.errors", "wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once",
)  # fmt: skip


@dataclass(frozen=True)
class Caller:
    """What a tool call's API request needs of the ``/mcp`` request that carried it."""

    authorization: str | None
    request_id: str
    base_url: str
    read_only: bool
    #: The WSGI environ's entries in ``KEPT_ENVIRON``.
    environ: dict


@bp.post(MCP_PATH)
def serve_mcp():
    """The MCP Streamable HTTP transport: one JSON-RPC message in, its answer out."""
    if "Origin" in request.headers and cors.allowed_origin() is None:
        return jsonify(FOREIGN_ORIGIN), 403
    auth.check_key(request._get_current_object(), writes=False)
    refusal = auth.refusal()
    if refusal is not None:
        ratelimit.count_in_general_bucket()
        raise refusal
    read_only = READ_ONLY_VALUES.get(request.args.get("readOnly", "false"))
    if read_only is None:
        raise validation_error("The query is invalid.", {"readOnly": ["Must be true or false."]})
    caller = Caller(
        authorization=request.headers["Authorization"],
        request_id=g.request_id,
        base_url=request.host_url,
        read_only=read_only,
        environ={name: request.environ[name] for name in KEPT_ENVIRON if name in request.environ},
    )
    return bridge(current_app._get_current_object()).respond(
        request.environ, request.headers, request.get_data(), caller
    )


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


