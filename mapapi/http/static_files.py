"""Files of the service's own pages (/docs, /view), sent from installed packages.

Browsers may keep them for ``ASSET_MAX_AGE`` seconds and then revalidate
them (``ETag``, ``Last-Modified``); ranges are served as HTTP says.
"""

from flask import Response, request, send_from_directory
from werkzeug.exceptions import RequestedRangeNotSatisfiable

#: How long browsers may keep a file of a page without asking again.
ASSET_MAX_AGE = 3600


def send_asset(directory: str, filename: str) -> Response:
    """One file of ``directory``: cacheable (``max-age`` and a validator), in
    ranges as HTTP says: a malformed ``Range``, or one of several ranges
    (which werkzeug does not serve), is ignored: the whole file; a range
    beyond the file is 416. A name outside ``directory`` is a 404."""
    if "HTTP_RANGE" in request.environ and (
        request.range is None or len(request.range.ranges) != 1
    ):
        del request.environ["HTTP_RANGE"]
    try:
        response = send_from_directory(directory, filename, max_age=ASSET_MAX_AGE)
    except RequestedRangeNotSatisfiable as refused:
        return Response(status=416, headers={"Content-Range": f"bytes */{refused.length}"})
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
