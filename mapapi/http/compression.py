"""gzip for answers of at least ``GZIP_MIN_BYTES`` to clients that accept it,
as a WSGI step of the pipeline (``pipeline.py``), for every answer alike.

A streamed answer (the GeoJSON export, a static file) is compressed as it
streams, chunk by chunk, never held whole in memory. A client that does not
ask for gzip gets the identity body, byte for byte. The ``ETag`` of a
compressed answer is the one of its identity body: it names the resource's
version, which is what ``If-Match`` and ``If-None-Match`` compare.
"""

import gzip
import zlib

from werkzeug.http import parse_accept_header

#: zlib's level: chosen by measurement (docs/decisions.md), cost against bytes saved.
LEVEL = 3
#: An answer that declares at most this many bytes is compressed whole (its
#: ``Content-Length`` kept); a longer or undeclared one as it streams.
WHOLE_AT_MOST = 1 << 20
#: Statuses whose answer has no body, or one that is part of a representation.
_NOT_COMPRESSED = ("204", "206", "304")


def gzip_answer(status: str, headers: list, body, environ: dict, minimum: int):
    """``body`` gzip-encoded when it is at least ``minimum`` bytes (or of
    unknown length) and the client accepts gzip; ``headers`` edited to say
    so. The identity body otherwise, byte for byte."""
    if status[:3] in _NOT_COMPRESSED or environ.get("REQUEST_METHOD") == "HEAD":
        return body
    length = None
    vary_at = None
    for index, (name, value) in enumerate(headers):
        lowered = name.lower()
        if lowered == "content-length":
            length = int(value)
        elif lowered in ("content-encoding", "content-range"):
            return body
        elif lowered == "vary":
            vary_at = index
    if length is not None and length < minimum:
        return body
    if vary_at is None:
        headers.append(("Vary", "Accept-Encoding"))
    elif "accept-encoding" not in headers[vary_at][1].lower():
        headers[vary_at] = ("Vary", headers[vary_at][1] + ", Accept-Encoding")
    if parse_accept_header(environ.get("HTTP_ACCEPT_ENCODING")).quality("gzip") <= 0:
        return body
    headers[:] = [(name, value) for name, value in headers if name.lower() != "content-length"]
    headers.append(("Content-Encoding", "gzip"))
    if length is not None and length <= WHOLE_AT_MOST:
        try:
            packed = gzip.compress(b"".join(body), LEVEL, mtime=0)
        finally:
            _close(body)
        headers.append(("Content-Length", str(len(packed))))
        return [packed]
    return _gzip_stream(body)


def _gzip_stream(body):
    """Each chunk of ``body`` through one gzip stream, as the chunks come; ``body`` closed after."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    try:
        for chunk in body:
            packed = compressor.compress(chunk)
            if packed:
                yield packed
        yield compressor.flush()
    finally:
        _close(body)


def _close(body) -> None:
    close = getattr(body, "close", None)
    if close is not None:
        close()
