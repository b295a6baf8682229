"""One HTTP POST to a receiver, with hard bounds on everything it controls.

A small client of our own rather than a library's, because each bound
matters here: it connects to the address the guard checked (never looking
the name up again), follows no redirect, reads at most the status line
(``MAX_ANSWER_BYTES``) and gives the whole exchange one deadline, so a
receiver that trickles bytes cannot hold an attempt past it.

It runs on an event loop with non-blocking sockets: an attempt waiting on
a receiver that never answers holds no thread, only its socket, so one
loop makes many attempts at once (``worker.py``).
"""

import asyncio
import re
import ssl
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


async def post(
    destination: Destination,
    headers: dict[str, str],
    body: bytes,
    timeout: float = TIMEOUT_SECONDS,
    tls: ssl.SSLContext = _tls,
) -> Outcome:
    """POST ``body``; success is a 2xx status line received within ``timeout``.
    ``https`` URLs verify the certificate against ``tls``'s authorities
    (the system's by default) and the URL's host name."""
    status, error = None, None
    try:
        async with asyncio.timeout(timeout):
            status = await _exchange(destination, _request(destination, headers, body), tls)
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


async def _exchange(destination: Destination, request: bytes, tls: ssl.SSLContext) -> int:
    target = destination.target
    https = target.scheme == "https"
    # An address, not a name: asyncio looks nothing up.
    reader, writer = await asyncio.open_connection(
        destination.address,
        target.port,
        ssl=tls if https else None,
        server_hostname=target.host if https else None,
    )
    try:
        writer.write(request)
        await writer.drain()
        return await _read_status(reader)
    finally:
        # At once, without waiting for the receiver (nor a TLS goodbye).
        writer.transport.abort()


async def _read_status(reader: asyncio.StreamReader) -> int:
    answer = b""
    while b"\n" not in answer:
        if len(answer) >= MAX_ANSWER_BYTES:
            raise _Failed("the answer has no HTTP status line")
        chunk = await reader.read(MAX_ANSWER_BYTES - len(answer))
        if not chunk:
            break
        answer += chunk
    found = _STATUS_LINE.match(answer)
    if not found:
        raise _Failed("the answer has no HTTP status line" if answer else "closed without answering")
    return int(found.group(1))
