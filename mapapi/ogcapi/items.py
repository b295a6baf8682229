"""The items: pages of a map's locations as GeoJSON Features, and one of them.

The Features are the export's, written by the database in the same
statement (``services.geojson``); the filters are the list's, plus what
the standard adds (``queries``). Pages follow one another by a keyset
cursor, so a deep page costs what the first does, and a location that
exists throughout is seen exactly once whatever is written in between.
"""

import orjson
from flask import Blueprint, request

from ..http.errors import not_found
from ..services.geojson import count_features, feature_of, feature_rows
from ..services.ownership import read_map
from ..storage.models import could_be_id
from ..timeutil import format_timestamp, utcnow
from .answers import (
    GEOJSON,
    JSON,
    answer,
    check_format,
    feature_etag,
    link,
    url,
    with_links,
)
from .queries import read_items_query, write_cursor

bp = Blueprint("ogcapi_items", __name__)


@bp.get("/collections/<map_id>/items", provide_automatic_options=False)
def get_items(map_id):
    """A page of the map's locations, filtered, in creation order."""
    map_ = read_map(map_id)
    query = read_items_query(request.args)
    after = None if query.after is None else (query.after, query.after)
    rows = feature_rows(map_.id, query.chosen, query.limit + 1, after)  # one more: is there a next?
    more, rows = len(rows) > query.limit, rows[: query.limit]
    path = f"/collections/{map_.id}/items"
    asked = [
        (key, value) for key, value in request.args.items(multi=True) if key != "cursor"
    ]
    links = [
        link(
            url(path, list(request.args.items(multi=True))),
            "self",
            GEOJSON,
            "This page",
        ),
        link(url(f"/collections/{map_.id}"), "collection", JSON, map_.title),
    ]
    if more:
        next_page = url(path, [*asked, ("cursor", write_cursor(rows[-1].pk))])
        links.append(link(next_page, "next", GEOJSON, "The next page"))
    summary = {
        "numberReturned": len(rows),
        "timeStamp": format_timestamp(utcnow()),
        "links": links,
    }
    if query.after is None:  # the first page counts them all
        summary["numberMatched"] = count_features(map_.id, query.chosen) if more else len(rows)
    features = ",".join(row.feature for row in rows).encode()
    return answer(
        b'{"type":"FeatureCollection","features":['
        + features
        + b"],"
        + orjson.dumps(summary)[1:],  # its members follow the features
        GEOJSON,
    )


@bp.get("/collections/<map_id>/items/<location_id>", provide_automatic_options=False)
def get_item(map_id, location_id):
    """One location as a Feature, with its ETag."""
    map_ = read_map(map_id)
    check_format("json", "geojson")
    feature = could_be_id(location_id) and feature_of(map_.id, location_id)
    if not feature:
        raise not_found("Location")
    etag = feature_etag(feature)
    if request.if_none_match.contains_weak(etag.strip('"')):
        response = answer(b"", GEOJSON, 304, {"ETag": etag})
        response.headers.pop("Content-Type", None)
        return response
    return answer(
        with_links(feature, item_links(map_, location_id)),
        GEOJSON,
        headers={"ETag": etag},
    )


def item_links(map_, location_id: str) -> list[dict]:
    return [
        link(
            url(f"/collections/{map_.id}/items/{location_id}"),
            "self",
            GEOJSON,
            "This location",
        ),
        link(url(f"/collections/{map_.id}"), "collection", JSON, map_.title),
    ]
