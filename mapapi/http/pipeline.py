"""What every request passes, once: a WSGI layer around the whole app.

Its request id, its gzip, its count in the metrics and its line in the
access log are given here to every answer, whoever made it: Flask's views
and error handlers, ``/mcp``'s layer in front of Flask (``mcp/front.py``),
a tool call's API request made in-process. Anything added for every
request is added here, and nowhere else.

The app tells the layer what only it knows through the request's
``RequestRecord`` in the WSGI environ: the route template Flask matched
(the metrics' label) and the account whose key was accepted (the access
log's). The layer sits inside the trusted proxies' fix, so the client
address it logs is the proxy's client.
"""

import logging
import time
from dataclasses import dataclass

from werkzeug.wsgi import get_path_info

from .. import metrics
from . import access_log, request_metrics
from .compression import gzip_answer
from .headers import request_id_for

#: The WSGI environ's entry with the request's ``RequestRecord``.
RECORD = "mapapi.request"


@dataclass(slots=True)
class RequestRecord:
    """One request as the pipeline sees it, filled in by the app as it learns."""

    request_id: str
    started: float
    #: The route template that answered (``unmatched``: none did).
    route: str = "unmatched"
    #: The id of the account whose key or token was accepted.
    account_id: str | None = None


def record_of(environ: dict) -> RequestRecord:
    """The request's record (one made here for an app called past the pipeline)."""
    found = environ.get(RECORD)
    if found is None:
        found = environ[RECORD] = RequestRecord(
            request_id_for(environ.get("HTTP_X_REQUEST_ID", "")), time.perf_counter()
        )
    return found


class Pipeline:
    """The WSGI app ``wsgi_app`` with the steps every request passes around it."""

    def __init__(self, wsgi_app, gzip_min_bytes: int):
        self.wsgi_app = wsgi_app
        #: ``GZIP_MIN_BYTES``: the smallest answer compressed (0: none is).
        self.gzip_min_bytes = gzip_min_bytes

    def __call__(self, environ, start_response):
        record = environ[RECORD] = RequestRecord(
            request_id_for(environ.get("HTTP_X_REQUEST_ID", "")), time.perf_counter()
        )
        started = []

        def capture(status, headers, exc_info=None):
            started[:] = (status, headers)
            return _no_write

        body = self.wsgi_app(environ, capture)
        status, headers = started
        headers = [(name, value) for name, value in headers if name.lower() != "x-request-id"]
        headers.append(("X-Request-Id", record.request_id))
        if self.gzip_min_bytes:
            body = gzip_answer(status, headers, body, environ, self.gzip_min_bytes)
        code = int(status[:3])
        if metrics.serving:
            request_metrics.count(
                record.route, environ.get("REQUEST_METHOD", ""), code, time.perf_counter() - record.started
            )
        if access_log.log.isEnabledFor(logging.INFO):
            access_log.write_line(
                environ.get("REQUEST_METHOD", ""), "/" + get_path_info(environ).lstrip("/"), code,
                started=record.started, request_id=record.request_id, account_id=record.account_id,
                client=environ.get("REMOTE_ADDR"),
            )  # fmt: skip
        start_response(status, headers)
        return body


def _no_write(data: bytes) -> None:
    raise RuntimeError("the app wrote with write(); mapapi's answers are iterables")
