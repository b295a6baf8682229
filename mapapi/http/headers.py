"""Headers on every response: the request id, and caching rules for the API."""

import re
import secrets

from flask import g, request

from .auth import is_api_request

_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def new_request_id() -> str:
    """32 random hex digits (128 bits): unique, and telling nothing of the traffic.

    A counter would let anyone who sees two ids count the requests between
    them. One read of the system's random source costs about 2 µs.
    """
    return secrets.token_hex(16)


def assign_request_id() -> None:
    """Keep the client's ``X-Request-Id`` when it is safe to echo, else make one."""
    sent = request.headers.get("X-Request-Id", "")
    g.request_id = sent if _CLIENT_REQUEST_ID.fullmatch(sent) else new_request_id()


def add_standard_headers(response):
    response.headers["X-Request-Id"] = g.get("request_id") or new_request_id()
    if is_api_request():
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
    return response
