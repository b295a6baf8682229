"""CORS for browser front-ends: off unless ``CORS_ORIGINS`` lists origins (or ``*``).

A browser sends a preflight (``OPTIONS`` with ``Origin`` and
``Access-Control-Request-Method``) without the ``Authorization`` header, so
one from an allowed origin to a path under the API is answered 204 right
after the general rate limit (check 1 of the contract's order), before
authentication. Every other answer to an allowed origin names the origin
that may read it and the headers it may see. There is no credentials mode:
keys travel in ``Authorization``, never in cookies. flask-cors answers
preflights from its own after-request hook, after our authentication has
refused them, hence these few lines.
"""

from flask import current_app, g, request
from werkzeug.exceptions import MethodNotAllowed

from .auth import MCP_PATH, is_api_request

ALLOW_HEADERS = "Authorization, Content-Type, Idempotency-Key, If-Match, If-None-Match, X-Request-Id"
EXPOSE_HEADERS = (
    "X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, ETag, "
    "X-Request-Id, Idempotent-Replayed"
)
#: ``/mcp`` also takes the MCP transport's own headers.
MCP_ALLOW_HEADERS = ALLOW_HEADERS + ", Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID"
#: How long a browser may reuse a preflight's answer; Chromium caps it at 2 hours.
MAX_AGE_SECONDS = 7200


def allowed_origin() -> str | None:
    """What ``Access-Control-Allow-Origin`` says to this request, or None for no CORS."""
    origins = current_app.config["CORS_ORIGINS"]
    origin = request.headers.get("Origin")
    if not origins or not origin:
        return None
    if origins == ("*",):
        return "*"
    return origin if origin.lower() in origins else None


def preflight_response():
    """The 204 answer to a preflight under the API or to ``/mcp`` from an allowed origin, or None."""
    mcp = request.path == MCP_PATH
    if (
        request.method != "OPTIONS"
        or "Access-Control-Request-Method" not in request.headers
        or not (mcp or is_api_request())
    ):
        return None
    origin = allowed_origin()
    if origin is None:
        return None
    g.cors_preflight = True
    response = current_app.response_class(status=204)
    del response.headers["Content-Type"]  # no body, so no type
    response.headers["Access-Control-Allow-Origin"] = origin
    methods = path_methods()
    if methods:
        response.headers["Access-Control-Allow-Methods"] = ", ".join(methods)
    response.headers["Access-Control-Allow-Headers"] = MCP_ALLOW_HEADERS if mcp else ALLOW_HEADERS
    response.headers["Access-Control-Max-Age"] = str(MAX_AGE_SECONDS)
    response.vary.add("Origin")
    return response


def path_methods() -> list[str]:
    """The methods the request's path answers (its 405's ``Allow``); none for an unknown path."""
    error = request.routing_exception
    if isinstance(error, MethodNotAllowed) and error.valid_methods:
        return sorted(error.valid_methods)
    if request.url_rule is not None:
        return sorted(request.url_rule.methods or ())
    return []


def add_cors_headers(response):
    """Any answer but a preflight's, to an allowed origin: who may read it, and what."""
    if g.get("cors_preflight"):
        return response
    origin = allowed_origin()
    if origin is not None:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
        response.vary.add("Origin")
    return response
