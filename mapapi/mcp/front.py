"""``POST /mcp``'s tool calls, answered in front of the Flask app.

A tool call is the API request it makes. Through Flask it was two passes of
the app's request pipeline, the ``/mcp`` request's and its API request's,
and a pass with nothing in it costs about four fifths of a whole
``GET /maps/:id`` (benchmarks/RESULTS.md, issue 34). So this WSGI layer, on
the app's ``wsgi_app``, takes a tool call before Flask sees it: the SDK's
kernel answers it (``bridge``), its API request is the one pass through
the pipeline, with every check of the API, and the layer does for the
``/mcp`` request what the app's hooks do for any request that is not the
API's: its request id, its gzip, its count in the metrics, its line in the
access log (``mapapi/http/hooks.py``).

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
import time

from flask import Flask
from werkzeug.datastructures import EnvironHeaders
from werkzeug.wrappers import Response

from .. import metrics
from ..http import access_log, request_metrics
from ..http.compression import compressed
from ..http.errors import APIError, error_response
from ..http.headers import request_id_for
from .remote import ANSWERED, MCP_PATH, Caller, KeyCheck, bridge, kept_environ

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
        request_id = request_id_for(environ.get("HTTP_X_REQUEST_ID", ""))
        log.exception("unexpected error (request %s)", request_id)
        with self.app.app_context():
            answer = error_response(APIError(500, "INTERNAL_ERROR", "An unexpected error occurred."))
        answer.headers["X-Request-Id"] = request_id
        return answer

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
        started = time.perf_counter()
        body = environ["wsgi.input"].read(int(length))
        environ["wsgi.input"] = io.BytesIO(body)  # for the app, should it answer
        served = bridge(self.app)
        exchange = served.exchange(EnvironHeaders(environ), body)
        if exchange is None or exchange.method != "tools/call":
            return None
        request_id = request_id_for(environ.get("HTTP_X_REQUEST_ID", ""))
        # The app, should it answer, and ``unexpected`` name the API request's id.
        environ["HTTP_X_REQUEST_ID"] = request_id
        key_check = KeyCheck()
        caller = Caller(
            authorization=environ.get("HTTP_AUTHORIZATION"),
            request_id=request_id,
            read_only=read_only,
            environ=kept_environ(environ),
            key_check=key_check,
        )
        answer = served.respond(exchange, environ, body, caller)
        if key_check.refusal is not None:
            answer = key_check.refusal  # the API's, its request id included
        elif not key_check.passed:
            environ[ANSWERED] = answer
            return None
        else:
            answer.headers["X-Request-Id"] = request_id
        answer = compressed(answer, self.app.config["GZIP_MIN_BYTES"], environ)
        if metrics.serving:
            request_metrics.count(MCP_PATH, "POST", answer.status_code, time.perf_counter() - started)
        if access_log.log.isEnabledFor(logging.INFO):
            access_log.write_line(
                "POST", MCP_PATH, answer.status_code, started=started, request_id=request_id,
                account_id=None, client=environ.get("REMOTE_ADDR"),
            )  # fmt: skip
        return answer
