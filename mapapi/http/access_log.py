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
        duration = time.perf_counter() - g.get("started", time.perf_counter())
        account = g.get("account")
        log.info(
            json.dumps(
                {
                    "method": request.method,
                    "path": request.path,
                    "status": response.status_code,
                    "duration_ms": round(duration * 1000, 2),
                    "request_id": g.get("request_id"),
                    "account_id": account.id if account is not None else None,
                    "client": request.remote_addr,
                }
            )
        )
    return response
