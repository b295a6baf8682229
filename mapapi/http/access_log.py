"""One structured line per request on the ``mapapi.access`` logger (written
by the pipeline, ``pipeline.py``, for every answer).

JSON with the method, path (never the query string), status, duration,
request id, account id and client address (the proxy's client, when
``TRUSTED_PROXIES`` says so). Headers are never logged, so neither is a key.
"""

import json
import logging
import time

log = logging.getLogger("mapapi.access")


def write_line(method: str, path: str, status: int, *, started, request_id, account_id, client) -> None:
    """The line of one answer (``started``: its ``time.perf_counter()`` at the
    start, None when unknown), written by the pipeline (``pipeline.py``)."""
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
