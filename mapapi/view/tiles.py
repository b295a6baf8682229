"""Where the map page's background tiles come from (``VIEW_TILES``): the
template Leaflet reads, the source the page's CSP allows, the attribution."""

from typing import NamedTuple
from urllib.parse import urlsplit

#: The tile servers of the OpenStreetMap Foundation, and what their licence asks to show.
OSM_HOST = "tile.openstreetmap.org"
OSM_ATTRIBUTION = ("OpenStreetMap contributors", "https://www.openstreetmap.org/copyright")


class Tiles(NamedTuple):
    #: Leaflet's URL template, or "" for a plain background.
    template: str
    #: The CSP source the tile images come from (``https://*.example.org``), or "".
    source: str
    #: The text of the attribution, and where it links to.
    attribution: str
    attribution_url: str


def tiles_of(setting: str) -> Tiles:
    """What the page needs of ``VIEW_TILES`` (``none`` or a template already checked by config)."""
    if setting == "none":
        return Tiles("", "", "", "")
    parts = urlsplit(setting)
    # {s} opens the host name (config allows it nowhere else): any subdomain.
    host = parts.netloc.replace("{s}.", "*.", 1)
    source = f"{parts.scheme}://{host}"
    name = parts.hostname.removeprefix("{s}.") if parts.hostname else host
    if name == OSM_HOST or name.endswith("." + OSM_HOST):
        return Tiles(setting, source, *OSM_ATTRIBUTION)
    return Tiles(setting, source, name, f"{parts.scheme}://{name}/")
