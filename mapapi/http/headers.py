"""Request ids (the pipeline gives every answer one), and the API's caching rules."""

import os
import re
import threading

from .auth import is_api_request

_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


#: Random bytes read at once per thread: 256 request ids.
_RANDOM_BYTES = 4096
_ID_BYTES = 16


class _RandomPool(threading.local):
    data = b""
    used = 0


_pool = _RandomPool()


def new_request_id() -> str:
    """32 random hex digits (128 bits): unique, and telling nothing of the traffic.

    A counter would let anyone who sees two ids count the requests between
    them. The bytes come from the system's random source, as ``secrets``
    reads it, but 4 kB at a time per thread: each read is a system call
    around which the request's thread gives up the interpreter (the GIL),
    and under load that costs the others a wait for it.
    """
    pool = _pool
    if pool.used + _ID_BYTES > len(pool.data):
        pool.data, pool.used = os.urandom(_RANDOM_BYTES), 0
    start, pool.used = pool.used, pool.used + _ID_BYTES
    return pool.data[start : pool.used].hex()


def _forget_random_pool() -> None:
    """A forked child must not give out the ids its parent has left."""
    global _pool
    _pool = _RandomPool()


os.register_at_fork(after_in_child=_forget_random_pool)


def request_id_for(sent: str) -> str:
    """The client's ``X-Request-Id`` (``sent``) when it is safe to echo, else a new one."""
    return sent if _CLIENT_REQUEST_ID.fullmatch(sent) else new_request_id()


def add_standard_headers(response):
    if is_api_request():
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
    return response
