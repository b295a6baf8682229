"""``POST /mcp``'s tool calls, answered in front of the Flask app.

A tool call is the API request it makes. Through Flask it was two passes of
the app's request pipeline, the ``/mcp`` request's and its API request's,
and a pass with nothing in it costs about four fifths of a whole
``GET /maps/:id`` (benchmarks/RESULTS.md, issue 34). So this WSGI layer, on
the app's ``wsgi_app``, takes a tool call before Flask sees it: the SDK's
kernel answers it (``bridge``), its API request is the one pass through
the app's hooks, with every check of the API. The layer sits inside the
pipeline (``mapapi/http/pipeline.py``), which gives its answers, as any
other, their request id, gzip, count in the metrics and access log line.

The layer takes only a ``tools/call`` the SDK's kernel serves (``exchange``)
in a POST with no ``Origin`` (not a browser's), a declared body within the
limit and a plain ``readOnly`` query, and answers it when the call settled
the key: its API request passed the key's checks, or refused the key (the
API's 401 or 403 is the answer). Everything else goes to the app, whose
``/mcp`` view answers as it always did; a call that did not settle the key
(its arguments did not fit, its API request was a 429 or a 5xx) goes there
with its answer made, which the view gives once it has checked the key.
"""

import io
import logging

from flask import Flask
from werkzeug.datastructures import EnvironHeaders
from werkzeug.wrappers import Response

from ..http.errors import APIError, error_response
from ..http.pipeline import record_of
from .caller import Caller, KeyCheck, kept_environ
from .remote import ANSWERED, MCP_PATH, bridge

#: The queries the layer reads ``readOnly`` from; the view reads any other.
READ_ONLY_QUERIES = {"": False, "readOnly=false": False, "readOnly=true": True}

log = logging.getLogger(__name__)


class Front:
    """The app's WSGI callable with ``/mcp``'s tool calls taken off in front."""

    def __init__(self, app: Flask, pipeline):
        self.app = app
        #: The WSGI app behind: Flask's own ``wsgi_app``.
        self.pipeline = pipeline

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") == MCP_PATH and environ.get("REQUEST_METHOD") == "POST":
            try:
                answer = self.tool_call(environ)
            except Exception:  # what the app's last error handler does, for the calls taken here
                answer = self.unexpected(environ)
            if answer is not None:
                return answer(environ, start_response)
        return self.pipeline(environ, start_response)

    def unexpected(self, environ: dict) -> Response:
        """The API's ``500 INTERNAL_ERROR`` for an error of the layer's own, logged
        on one line with the request id. The call is not handed to the app:
        its API request may have been made already, and must not be made twice."""
        log.exception("unexpected error (request %s)", record_of(environ).request_id)
        with self.app.app_context():
            return error_response(APIError(500, "INTERNAL_ERROR", "An unexpected error occurred."))

    def tool_call(self, environ: dict) -> Response | None:
        """The answer to a tool call the layer takes; None to leave the
        request to the app (with ``environ[ANSWERED]`` when only the key's
        check is left)."""
        read_only = READ_ONLY_QUERIES.get(environ.get("QUERY_STRING", ""))
        length = environ.get("CONTENT_LENGTH", "")
        if (
            read_only is None
            or "HTTP_ORIGIN" in environ
            or not length.isdigit()
            or int(length) > self.app.config["MAX_CONTENT_LENGTH"]
        ):
            return None
        body = environ["wsgi.input"].read(int(length))
        environ["wsgi.input"] = io.BytesIO(body)  # for the app, should it answer
        served = bridge(self.app)
        exchange = served.exchange(EnvironHeaders(environ), body)
        if exchange is None or exchange.method != "tools/call":
            return None
        record = record_of(environ)
        key_check = KeyCheck()
        caller = Caller(
            authorization=environ.get("HTTP_AUTHORIZATION"),
            request_id=record.request_id,
            read_only=read_only,
            environ=kept_environ(environ),
            key_check=key_check,
        )
        answer = served.respond(exchange, environ, body, caller)
        if key_check.refusal is not None:
            answer = key_check.refusal  # the API's
        elif not key_check.passed:
            environ[ANSWERED] = answer
            return None
        record.route = MCP_PATH
        return answer
