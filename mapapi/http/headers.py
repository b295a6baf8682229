"""Headers on every response: the request id, and caching rules for the API."""

import itertools
import os
import re
import secrets

from flask import g, request

from .auth import is_api_request

_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class RequestIds:
    """Unique request ids: 16 hex digits drawn at random for the process,
    then 16 of a counter.

    Reading the random source for every request would cost a system call,
    which gives up the GIL under a threaded server. A forked child draws
    a prefix of its own.
    """

    def __init__(self):
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)

    def reseed(self) -> None:
        self.prefix = secrets.token_hex(8)
        self.counter = itertools.count()

    def __call__(self) -> str:
        return f"{self.prefix}{next(self.counter) & 0xFFFF_FFFF_FFFF_FFFF:016x}"


new_request_id = RequestIds()


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
