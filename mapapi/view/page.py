"""``/view``: the map page, and its files, served from installed packages.

The page needs no key and counts in no rate limit (it is outside
``/api/v1``): it asks for a key itself and sends it to the API only. The
HTML is ``no-store``: it is small, and it carries the tile setting and the
version of the files it loads, which must be the running server's. The
files are cacheable as /docs' are (``http.static_files``); their URLs name
their version, so a browser fetches a new release's at once.
"""

import hashlib
from functools import cache
from pathlib import Path

from flask import Blueprint, current_app, make_response, render_template
from xstatic.pkg import leaflet

from ..http.static_files import send_asset
from .tiles import tiles_of

bp = Blueprint("view", __name__, template_folder="templates")

STATIC = Path(__file__).parent / "static"


def content_policy(tile_source: str) -> str:
    """The page's CSP: its own scripts, styles and API only; images also from the tile host."""
    images = " ".join(filter(None, ["'self'", "data:", tile_source]))
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        f"img-src {images}; connect-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


@cache
def files_version() -> str:
    """A short digest of the page's own files: changes whenever one of them does."""
    digest = hashlib.sha256()
    for path in sorted(STATIC.iterdir()):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@bp.get("/view")
def map_page():
    """The map page: asks for a key, lists the account's maps, draws one and follows it."""
    tiles = tiles_of(current_app.config["VIEW_TILES"])
    page = render_template(
        "view.html", tiles=tiles, version=files_version(), leaflet_version=leaflet.VERSION
    )
    response = make_response(page)
    response.headers["Content-Security-Policy"] = content_policy(tiles.source)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"  # frame-ancestors, for browsers without CSP 2
    # The tile host learns the origin only (OpenStreetMap's policy asks for a Referer).
    response.headers["Referrer-Policy"] = "strict-origin-when-cross-origin"
    return response


@bp.get("/view/assets/<path:filename>")
def view_asset(filename):
    """The page's script and stylesheet."""
    return send_asset(str(STATIC), filename)


@bp.get("/view/leaflet/<path:filename>")
def leaflet_asset(filename):
    """Leaflet's files, from the ``xstatic-leaflet`` package."""
    return send_asset(leaflet.BASE_DIR, filename)
