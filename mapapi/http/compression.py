"""gzip for answers of at least ``GZIP_MIN_BYTES`` to clients that accept it.

A streamed answer (the GeoJSON export, a static file) is compressed as it
streams, chunk by chunk, never held whole in memory. A client that does not
ask for gzip gets the identity body, byte for byte. The ``ETag`` of a
compressed answer is the one of its identity body: it names the resource's
version, which is what ``If-Match`` and ``If-None-Match`` compare.
"""

import gzip
import zlib

from flask import current_app, request
from werkzeug.http import parse_accept_header

#: zlib's level: chosen by measurement (docs/decisions.md), cost against bytes saved.
LEVEL = 3
#: Answers that have no body, or one that is part of a representation.
_NOT_COMPRESSED = frozenset({204, 206, 304})


def compress(response):
    """gzip-encode ``response`` when it is large enough and the client accepts gzip."""
    return compressed(response, current_app.config["GZIP_MIN_BYTES"], request.environ)


def compressed(response, minimum: int, environ: dict):
    """``compress`` for the request of WSGI ``environ``, answers of ``minimum``
    bytes and more (0: none): for ``/mcp``'s layer in front of Flask too."""
    if not minimum or response.status_code in _NOT_COMPRESSED:
        return response
    # A file sent as is (send_file) or a generator is passed on as it is read;
    # only what is already in memory is measured. Most answers are small:
    # measured first, before the headers are searched.
    streamed = response.direct_passthrough or response.is_streamed
    size = response.content_length if streamed else response.calculate_content_length()
    if (size is not None and size < minimum) or (
        "Content-Encoding" in response.headers or "Content-Range" in response.headers
    ):
        return response
    response.vary.add("Accept-Encoding")
    if parse_accept_header(environ.get("HTTP_ACCEPT_ENCODING")).quality("gzip") <= 0:
        return response
    if streamed:
        source = response.response
        response.response = _gzip_stream(response.iter_encoded(), source)
        response.direct_passthrough = False
        response.headers.pop("Content-Length", None)
    else:
        response.set_data(gzip.compress(response.get_data(), LEVEL, mtime=0))
    response.headers["Content-Encoding"] = "gzip"
    return response


def _gzip_stream(chunks, source):
    """Each chunk through one gzip stream, as the chunks come; ``source`` closed after."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    try:
        for chunk in chunks:
            compressed = compressor.compress(chunk)
            if compressed:
                yield compressed
        yield compressor.flush()
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
