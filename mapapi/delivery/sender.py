"""One HTTP POST to a receiver, with hard bounds on everything it controls.

A small client of our own rather than a library's, because each bound
matters here: it connects to the address the guard checked (never looking
the name up again), follows no redirect, reads at most the status line
(``MAX_ANSWER_BYTES``) and gives the whole exchange one deadline, so a
receiver that trickles bytes cannot hold an attempt past it.
"""

import re
import socket
import ssl
import time
from dataclasses import dataclass

from .addresses import Destination

TIMEOUT_SECONDS = 10.0
MAX_ANSWER_BYTES = 4096
USER_AGENT = "mapapi-webhooks/1"
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-5][0-9]{2})(?: |\r?\n|$)")
_tls = ssl.create_default_context()


@dataclass(frozen=True)
class Outcome:
    response_status: int | None
    #: Why the attempt failed; None when it succeeded.
    error: str | None

    @property
    def succeeded(self) -> bool:
        return self.error is None


class _Failed(Exception):
    """An attempt that ended without a usable answer; the message says why."""


def post(
    destination: Destination,
    headers: dict[str, str],
    body: bytes,
    timeout: float = TIMEOUT_SECONDS,
    tls: ssl.SSLContext = _tls,
) -> Outcome:
    """POST ``body``; success is a 2xx status line received within ``timeout``.
    ``https`` URLs verify the certificate against ``tls``'s authorities
    (the system's by default) and the URL's host name."""
    deadline = time.monotonic() + timeout
    status, error = None, None
    try:
        status = _exchange(destination, _request(destination, headers, body), deadline, tls)
        if not 200 <= status < 300:
            error = _describe_status(status)
    except _Failed as failure:
        error = str(failure)
    except TimeoutError:
        error = f"no answer within {timeout:g} s"
    except ssl.SSLError as failure:
        error = f"TLS failed: {failure.reason or failure.__class__.__name__}"
    except OSError as failure:
        error = f"connection failed: {failure.strerror or failure.__class__.__name__}"
    return Outcome(status, error)


def _describe_status(status: int) -> str:
    if 300 <= status < 400:
        return f"answered {status}: redirects are not followed"
    return f"answered {status}"


def _request(destination: Destination, headers: dict[str, str], body: bytes) -> bytes:
    target = destination.target
    lines = [
        f"POST {target.path} HTTP/1.1",
        f"Host: {target.host_header}",
        f"User-Agent: {USER_AGENT}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _exchange(destination: Destination, request: bytes, deadline: float, tls) -> int:
    target = destination.target
    with socket.create_connection(
        (destination.address, target.port), timeout=_remaining(deadline)
    ) as raw:
        connection = raw
        if target.scheme == "https":
            raw.settimeout(_remaining(deadline))
            connection = tls.wrap_socket(raw, server_hostname=target.host)
        try:
            _send_all(connection, request, deadline)
            return _read_status(connection, deadline)
        finally:
            if connection is not raw:
                connection.close()


def _send_all(connection, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        connection.settimeout(_remaining(deadline))
        sent = connection.send(view)
        view = view[sent:]


def _read_status(connection, deadline: float) -> int:
    answer = b""
    while b"\n" not in answer:
        if len(answer) >= MAX_ANSWER_BYTES:
            raise _Failed("the answer has no HTTP status line")
        connection.settimeout(_remaining(deadline))
        chunk = connection.recv(MAX_ANSWER_BYTES - len(answer))
        if not chunk:
            break
        answer += chunk
    found = _STATUS_LINE.match(answer)
    if not found:
        raise _Failed("the answer has no HTTP status line" if answer else "closed without answering")
    return int(found.group(1))
