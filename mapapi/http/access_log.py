"""One structured line per request on the ``mapapi.access`` logger.

JSON with the method, path (never the query string), status, duration,
request id, account id and client address (the proxy's client, when
``TRUSTED_PROXIES`` says so). Headers are never logged, so neither is a key.
"""

import json
import logging
import time

from flask import g, request

log = logging.getLogger("mapapi.access")


def start_timer() -> None:
    g.started = time.perf_counter()


def log_request(response):
    if log.isEnabledFor(logging.INFO):
        # Each use of a context proxy looks the context up again: once each here.
        state, current = g._get_current_object(), request._get_current_object()
        account = getattr(state, "account", None)
        write_line(
            current.method,
            current.path,
            response.status_code,
            started=getattr(state, "started", None),
            request_id=getattr(state, "request_id", None),
            account_id=account.id if account is not None else None,
            client=current.remote_addr,
        )
    return response


def write_line(method: str, path: str, status: int, *, started, request_id, account_id, client) -> None:
    """The line of one answer (``started``: its ``time.perf_counter()`` at the
    start, None when unknown); for ``/mcp``'s layer in front of Flask too."""
    now = time.perf_counter()
    log.info(
        json.dumps(
            {
                "method": method,
                "path": path,
                "status": status,
                "duration_ms": round((now - (now if started is None else started)) * 1000, 2),
                "request_id": request_id,
                "account_id": account_id,
                "client": client,
            }
        )
    )
